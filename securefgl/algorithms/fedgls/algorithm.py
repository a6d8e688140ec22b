"""FedGLS (Fu et al., TMLR, Algorithm 1) and its FedAvg baselines (Sec. 5.1.2).

Every method draws the same graphless clients (:mod:`~securefgl.algorithms.fedgls.graphless`) and
gives them views with no edges, except the Fed-GNN oracle, which keeps them and says so.
The round loop is :class:`~securefgl.algorithms.fedavg.algorithm.FedAvg`'s (broadcast, local update,
the protocol stack's phases, the holder's step, accounting); what differs is each client's
graph and models and the federated vector (:class:`~securefgl.algorithms.fedgls.clients.Layout`):

* ``fedgls``: (θ ‖ φ) from every client, one vector, one release per round (the DP
  accountant is charged once per round for the concatenation, clipped as a whole); graph
  clients propagate over Â, graphless ones over their learned S;
* ``fed-gnnk`` / ``fed-gnn-oracle``: the GCN f alone; graphless clients on the cosine kNN of
  their features / on their real edges (the oracle: NOT a graphless setting);
* ``fed-mlp``: h with the same head, on features only;
* ``fed-gnnmlp``: a GCN federation of graph clients and an MLP federation of graphless ones,
  run as one sum of (θ ‖ φ ‖ indicators) so each block is averaged over its own clients
  (the server learns each federation's total weight, not who belongs to which).

Deviation: the global model is the plain weighted mean of the clients' models, applied as
the mean delta with SGD at learning rate 1 (equal to Eq. 12 when every client takes part).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from torch_geometric.data import Data

from protocols.base import AggregationServer, Role
from protocols.registry import parse_stack
from protocols.wire import Payload
from securefgl.algorithms.common.server_optimizer import GlobalOptimizer
from securefgl.algorithms.common.training import party_torch_rng
from securefgl.algorithms.fedavg.algorithm import MODEL_BROADCAST, MODEL_UPDATES, FedAvg
from securefgl.algorithms.fedavg.parties import FedAvgServer
from securefgl.algorithms.fedgls.clients import (
    MODEL_TAG,
    FederatedClient,
    FedGLSClient,
    Layout,
    SingleModelClient,
)
from securefgl.algorithms.fedgls.graphless import graphless_ids, view_payload_of
from securefgl.algorithms.fedgls.learner import AttentiveLearner, feature_knn
from securefgl.algorithms.fedgls.models import Net, Propagation, gcn_propagation
from securefgl.algorithms.fedgls.settings import UNREAD_BY_FEDGLS
from securefgl.config import ConfigError
from securefgl.data import ClientGraph
from securefgl.federation import SERVER, client_party_id
from securefgl.federation.builders import (
    config_from_json,
    protocol_party,
    view_from_payload,
)
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import Recipe, party_builder, recipe
from securefgl.models import get_flat

WEIGHTS = "FedAvg weights n_k"
LEARNED_GRAPH = "graph learner ω and learned graph S"


class FedGLSServer(FedAvgServer):
    """The FedAvg server over a :class:`Layout` (decodes per-block means)."""

    model_tag = MODEL_TAG

    def __init__(
        self, params: np.ndarray, agg: AggregationServer, holds_model: bool, layout: Layout
    ) -> None:
        super().__init__(params, agg, holds_model, GlobalOptimizer(params, "sgd", 1.0, 0.0))
        self.layout = layout

    def apply_result(self, round_idx: int) -> None:
        result = self.agg.result()
        if result is not None and self.params is not None:
            self.params = self.optimizer.step(self.layout.decode(result.mean))

    def apply_empty_round(self, round_idx: int, dim: int) -> None:
        mean = self.empty_round_mean(dim)
        if mean is not None and self.params is not None:
            self.params = self.optimizer.step(self.layout.decode(mean))


def weight_protection(stack: list[str]) -> str:
    """How the FedAvg weights n_k travel under ``stack`` (as the protocols apply them)."""
    transport, mechanism = parse_stack(stack)
    if mechanism == "clip_noise":
        return "uniform (clip_noise weighs every client 1)"
    return {
        "plain": "in the clear beside each update",
        "secagg": "inside the masked sum: the server learns only Σ n_k",
        "secagg+": "inside the masked sum: the server learns only Σ n_k",
        "ckks": "inside the encrypted sum: only the clients decrypt Σ n_k",
    }[transport]


class FedGLSFamily(FedAvg):
    """Shared set-up; subclasses say which blocks exist, which a client trains, and its
    graph (``"real"``, ``"knn"``, ``"learned"``, ``"none"``)."""


    instead_of = UNREAD_BY_FEDGLS
    BLOCKS: ClassVar[tuple[tuple[str, bool], ...]] = (("gcn", True),)  # (encoder, with head)
    INDICATORS: ClassVar[bool] = False
    KEEPS_EDGES: ClassVar[bool] = False  # the oracle: graphless clients keep their edges
    client_class: ClassVar[type[FederatedClient]] = SingleModelClient

    def blocks_of(self, graphless: bool) -> tuple[int, ...]:
        return tuple(range(len(self.BLOCKS)))

    def graph_of(self, graphless: bool) -> str:
        return "knn" if graphless else "real"

    def net(self, b: int, view: ClientGraph) -> Net:
        cfg, kind_head = self.config, self.BLOCKS[b]
        return Net(
            kind_head[0], view.num_features, cfg.hidden, view.num_classes,
            cfg.fedgls.split, cfg.dropout, head=kind_head[1],
        )  # fmt: skip

    def propagation(self, view: ClientGraph, graph: str) -> Propagation | None:
        if graph == "real":
            return gcn_propagation(view.edge_index, view.num_nodes)
        if graph == "knn":
            s = self.config.fedgls
            return feature_knn(view.x, s.knn_k, s.knn_graph == "weighted")
        return None  # "none" (MLP); "learned": the client's learner makes it

    def make_client(
        self, view: ClientGraph, agg: Any, layout: Layout, graphless: bool,
        noise_seed: int | None, seed: int,
    ) -> FederatedClient:  # fmt: skip
        """A client (a graphless one's view comes without its edges, unless an oracle)."""
        graph = self.graph_of(graphless)
        with party_torch_rng(seed, client_party_id(view.client_id), "init"):  # replaced
            nets = {b: self.net(b, view) for b in self.blocks_of(graphless)}
        args = (view, self.config, agg, layout, nets, self.propagation(view, graph), noise_seed)
        if graph == "learned":
            s = self.config.fedgls
            learner = AttentiveLearner(view.num_features, s.learner_layers, s.knn_k)
            return FedGLSClient(*args, graphless=graphless, seed=seed, learner=learner)
        return self.client_class(*args, graphless=graphless, seed=seed)

    def _check_federations(self, views: list[ClientGraph]) -> None:
        """With blocks trained by different clients (fed-gnnmlp), each block's mean is over
        its own clients only: a secure sum must hold at least two of them in every round,
        or the server (under ckks, every client) reads one client's update exactly."""
        transport = self.config.protocol.transport
        if not self.INDICATORS or transport == "plain":
            return
        holders = [sum(b in self.blocks_of(v.client_id in self.graphless) for v in views)
                   for b in range(len(self.BLOCKS))]  # fmt: skip
        if min(holders) < 2 or self.config.client_fraction < 1:
            raise ConfigError(
                f"{self.name} under {transport}: each federation's mean is a sum over its own "
                f"clients, and it must hold at least 2 every round (clients per federation: "
                f"{', '.join(f'{self.BLOCKS[b][0]}: {n}' for b, n in enumerate(holders))}; "
                f"client_fraction {self.config.client_fraction:g}): change clients or "
                "graphless_fraction, and use client_fraction = 1"
            )

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        self.federation = federation
        self.rng = np.random.default_rng(federation.seed)
        views = federation.views
        self.graphless = graphless_ids([v.client_id for v in views], cfg.fedgls, federation.seed)
        self._check_federations(views)
        protocol = federation.stack.protocol
        if protocol.output_role is Role.CLIENT and cfg.client_fraction < 1:
            raise ConfigError(
                f"{protocol.name} delivers the aggregate only to the clients of the round: "
                "use client_fraction = 1 with it"
            )
        init = [self.net(b, views[0]) for b in range(len(self.BLOCKS))]
        layout = Layout(tuple(int(get_flat(n).size) for n in init), self.INDICATORS)
        self.layout, self.dim = layout, layout.dim
        ids = [client_party_id(v.client_id) for v in views]
        params = np.concatenate([get_flat(n) for n in init])
        holds = protocol.output_role is Role.SERVER
        shape = {"sizes": list(layout.sizes), "indicators": layout.indicators}
        fed = federation

        def client(v: ClientGraph, stack: dict[str, Any]) -> Recipe:
            graphless = v.client_id in self.graphless
            return recipe(
                fedgls_client, view=view_payload_of(v, graphless and not self.KEEPS_EDGES),
                stack=stack, algorithm=self.name, graphless=graphless, layout=shape,
                noise_seed=fed.noise_seed, seed=fed.seed,
            )  # fmt: skip

        self._make_parties(
            federation,
            ids,
            lambda stack: recipe(fedgls_server, params=params, stack=stack, holds=holds,
                                 layout=shape),  # fmt: skip
            client,
        )
        self._setup_and_start(federation, protocol, ids)

    def protection(self) -> dict[str, str]:
        stack = self.federation.stack.names
        return {
            MODEL_UPDATES: "+".join(stack) or "plain",
            MODEL_BROADCAST: "plain (every client holds the model)",
            WEIGHTS: weight_protection(stack),
        }

    def model_label(self) -> str:
        return "GCN (graphless clients: cosine kNN graph)"


class FedGLS(FedGLSFamily):
    name = "fedgls"
    BLOCKS = (("gcn", True), ("mlp", False))  # θ = (θ_z, θ_c), φ
    client_class = FedGLSClient

    def graph_of(self, graphless: bool) -> str:
        return "learned" if graphless else "real"

    def protection(self) -> dict[str, str]:
        return {**super().protection(), LEARNED_GRAPH: "never sent (local to the client)"}

    def model_label(self) -> str:
        return f"GCN (split {self.config.fedgls.split}; graphless clients: learned graph)"


class FedGNNk(FedGLSFamily):
    name = "fed-gnnk"


class FedGNNOracle(FedGLSFamily):
    """Fed-GNN: the graphless clients use their real edges. An ORACLE, not a method for
    graphless clients (it is federated, but its graphless clients are not graphless)."""

    name = "fed-gnn-oracle"
    KEEPS_EDGES = True

    def graph_of(self, graphless: bool) -> str:
        return "real"

    def model_label(self) -> str:
        return "GCN (ORACLE: graphless clients use their real edges)"


class FedMLP(FedGLSFamily):
    name = "fed-mlp"
    BLOCKS = (("mlp", True),)

    def graph_of(self, graphless: bool) -> str:
        return "none"

    def model_label(self) -> str:
        return "MLP (features only)"


class FedGNNMLP(FedGLSFamily):
    """Graph clients federate a GCN, graphless clients an MLP (two FedAvg federations)."""

    name = "fed-gnnmlp"
    BLOCKS = (("gcn", True), ("mlp", True))
    INDICATORS = True

    def blocks_of(self, graphless: bool) -> tuple[int, ...]:
        return (1,) if graphless else (0,)

    def graph_of(self, graphless: bool) -> str:
        return "none" if graphless else "real"

    def model_label(self) -> str:
        return "GCN on graph clients, MLP on graphless clients"

    def protection(self) -> dict[str, str]:
        out = super().protection()
        if self.config.protocol.transport != "plain" and WEIGHTS in out:
            out[WEIGHTS] += " of each federation (graph clients, graphless clients)"
        return out


#: the family by name: a client's process rebuilds the algorithm's client from it
FAMILY: dict[str, type[FedGLSFamily]] = {
    c.name: c for c in (FedGLS, FedGNNk, FedGNNOracle, FedMLP, FedGNNMLP)
}


@party_builder
def fedgls_client(
    view: Payload, stack: dict[str, Any], algorithm: str, graphless: bool,
    layout: dict[str, Any], noise_seed: int | None, seed: int,
) -> FederatedClient:  # fmt: skip
    """A client of the FedGLS-family method ``algorithm`` (its blocks, graph and class)."""
    config, v = config_from_json(stack["config"]), view_from_payload(view)
    agg = protocol_party(stack, client_party_id(v.client_id))
    shape = Layout(tuple(layout["sizes"]), layout["indicators"])
    return FAMILY[algorithm](config).make_client(v, agg, shape, graphless, noise_seed, seed)


@party_builder
def fedgls_server(
    params: np.ndarray, stack: dict[str, Any], holds: bool, layout: dict[str, Any]
) -> FedGLSServer:
    shape = Layout(tuple(layout["sizes"]), layout["indicators"])
    return FedGLSServer(params, protocol_party(stack, SERVER), holds, shape)
