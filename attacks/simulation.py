"""One audited run: the transcript, the parties' final state and the ground truth.

:func:`simulate` trains an algorithm through :func:`securefgl.experiment.runner.run_single`
with payload storage on and the simulator state kept; :func:`make_world` only draws the
split, partition and client views (for attacks on a pre-training protocol, which run the
protocol themselves). Attacks take the adversary's part (:meth:`AuditRun.view`, a
client's own :class:`ClientGraph`, the released model); the global graph
(:class:`World`'s ``truth_*``) is used only to score them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
import torch
from torch_geometric.data import Data

from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.data.views import opaque_id_permutation
from securefgl.experiment.graph_world import draw_graph_world
from securefgl.experiment.runner import RunResult, SimulationState, draw_world, run_single
from securefgl.federation.transcript import PartyView, Transcript


@dataclass
class World:
    """The simulator's data of one seed: global graph (+ masks), partition, client views."""

    graph: Data
    assignment: np.ndarray
    views: list[ClientGraph]
    view_seed: int

    @cached_property
    def opaque_of_global(self) -> np.ndarray:
        return opaque_id_permutation(self.graph.num_nodes, self.view_seed)

    @cached_property
    def global_of_opaque(self) -> np.ndarray:
        return np.argsort(self.opaque_of_global)

    def global_nodes(self, client: int) -> np.ndarray:
        """Global index of each local node of ``client`` (local order = ascending opaque id)."""
        return self.global_of_opaque[self.views[client].node_ids.numpy()]

    @cached_property
    def truth_adjacency(self) -> sp.csr_matrix:
        """Global symmetric 0/1 adjacency without self-loops (GROUND TRUTH)."""
        return undirected_adjacency(self.graph.edge_index, self.graph.num_nodes)

    @cached_property
    def truth_opaque_adjacency(self) -> sp.csr_matrix:
        """:attr:`truth_adjacency` indexed by opaque ids (GROUND TRUTH)."""
        a = self.truth_adjacency.tocoo()
        p = self.opaque_of_global
        return sp.csr_matrix((a.data, (p[a.row], p[a.col])), shape=a.shape)

    def truth_local_adjacency(self, client: int) -> sp.csr_matrix:
        """The client's true internal adjacency in local order (before any edge DP)."""
        g = self.global_nodes(client)
        return sp.csr_matrix(self.truth_adjacency[g][:, g])


@dataclass
class AuditRun:
    """A trained run plus its :class:`World`."""

    config: ExperimentConfig
    result: RunResult

    @property
    def state(self) -> SimulationState:
        assert self.result.state is not None
        return self.result.state

    @cached_property
    def world(self) -> World:
        s = self.state
        return World(s.graph, s.assignment, s.views, s.view_seed)

    @property
    def transcript(self) -> Transcript:
        assert self.result.transcript is not None, "simulate() stores payloads"
        return self.result.transcript

    @property
    def views(self) -> list[ClientGraph]:
        return self.state.views

    @property
    def accuracy(self) -> float:
        return float(self.result.final["test_acc"])

    @property
    def epsilon(self) -> float | None:
        return self.result.privacy.get("epsilon")

    def view(self, party: str) -> PartyView:
        return self.transcript.view(party)

    def global_nodes(self, client: int) -> np.ndarray:
        return self.world.global_nodes(client)

    @property
    def truth_adjacency(self) -> sp.csr_matrix:
        return self.world.truth_adjacency

    def truth_local_adjacency(self, client: int) -> sp.csr_matrix:
        return self.world.truth_local_adjacency(client)


def undirected_adjacency(edge_index: torch.Tensor | np.ndarray, n: int) -> sp.csr_matrix:
    """Symmetric binary CSR adjacency with an empty diagonal."""
    src, dst = np.asarray(edge_index, dtype=np.int64)
    keep = src != dst
    rows, cols = np.r_[src[keep], dst[keep]], np.r_[dst[keep], src[keep]]
    a = sp.coo_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n)).tocsr()
    a.data[:] = 1.0
    return a


def make_world(config: ExperimentConfig, seed: int, data: Data) -> World:
    """The split, partition and views :func:`run_single` draws for ``seed`` (same streams);
    for graph tasks ``graph`` is the dataset and the views are whole-graph views."""
    world = draw_graph_world if config.task == "graph" else draw_world
    graph, part, views, view_seed = world(config, seed, data)  # type: ignore[operator]
    return World(graph, np.asarray(part.assignment), views, view_seed)


def simulate(
    config: ExperimentConfig,
    algorithm: str,
    seed: int,
    data: Data,
    progress: bool = False,
    views_hook: Callable[[list[ClientGraph]], list[ClientGraph]] | None = None,
    payload_rounds: int | None = 0,
    keep_tags: frozenset[str] = frozenset(),
) -> AuditRun:
    """Train ``algorithm`` with the simulator state kept and the payloads of the set-up and
    rounds ``≤ payload_rounds`` stored (``None``: all rounds; sizes are always counted),
    plus every round's payloads of ``keep_tags`` (e.g. the model broadcasts a replay needs).
    The round-0 attacks need no more, and a CKKS run's full transcript would not fit in
    memory."""
    config = config.replace(store_payloads=True)
    transcript = Transcript(store_payloads=True, payload_rounds=payload_rounds, keep_tags=keep_tags)
    result = run_single(
        config,
        algorithm,
        seed,
        data,
        progress,
        keep_state=True,
        views_hook=views_hook,
        transcript=transcript,
    )
    return AuditRun(config, result)
