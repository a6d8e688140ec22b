"""FedStruct's parties (Aliakbari et al., ICLR 2025, Alg. 1-3): client ``i`` with Ā^[i], the
replica of S and its model, and the server that relays NSFs and holds (θ ‖ S) when the
protocol lets it. Built from recipes (:func:`fedstruct_client`, :func:`fedstruct_server`)
where the executor keeps them; a client's dropout stream is its own
(:func:`~securefgl.algorithms.common.training.party_torch_rng`), so results do not depend on
where it lives.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch.nn import functional as F
from torch.nn.utils import parameters_to_vector

from protocols.base import AggregationClient, AggregationServer, Envelope
from protocols.dp.rng import make_rng
from protocols.wire import Payload
from securefgl.algorithms.base import SplitPredictions
from securefgl.algorithms.common.server_optimizer import GlobalOptimizer
from securefgl.algorithms.common.training import SPLITS, party_torch_rng, unlinked
from securefgl.algorithms.fedavg.parties import FedAvgServer, RoundClient
from securefgl.algorithms.fedstruct import edge_dp
from securefgl.algorithms.fedstruct.abar_client import AdjacencyClient, AdjacencyRelay, SparseRows
from securefgl.algorithms.fedstruct.model import AbarRows, FedStructModel, local_propagation
from securefgl.algorithms.fedstruct.nsf import node_structure_features
from securefgl.algorithms.fedstruct.output_grads import expand_update, round_masks
from securefgl.algorithms.fedstruct.settings import EdgeDP, FedStructSettings
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import SERVER, Party, client_party_id
from securefgl.federation.builders import (
    config_from_json,
    protocol_party,
    view_from_payload,
)
from securefgl.federation.recipes import party_builder
from securefgl.models import set_flat

MODEL_TAG = "fedstruct/model"
UPDATE_TAG = "fedstruct/update"  # the aggregate of output gradients, expanded by each client
NSF_TAG = "fedstruct/nsf"
NSF_ALL_TAG = "fedstruct/nsf-all"


def build_fedstruct_model(
    settings: FedStructSettings, num_features: int, num_classes: int
) -> FedStructModel:
    """The predictor of ``settings`` (pure H2V: ``d_s`` is forced to ``num_classes``)."""
    return FedStructModel(
        num_features,
        num_classes,
        settings.nsf_dim if settings.structure_mlp else num_classes,
        settings.feature_hidden,
        settings.structure_hidden,
        settings.feature_hops,
        settings.dropout,
        settings.structure_mlp,
    )


class FedStructClient(RoundClient, Party):
    """Client ``i``: its view, Ā^[i], the replica of S, the model and its protocol side.

    Its roles: itself (training), ``agg`` (aggregation), ``adjacency`` (its side of
    Algorithm 3, an :class:`~securefgl.algorithms.fedstruct.abar_client.AdjacencyClient`,
    with the secure hop sums it hosts) and ``perturber`` (edge DP on Ā's inputs, when
    hosted).
    """

    def __init__(
        self,
        view: ClientGraph,
        settings: FedStructSettings,
        agg: AggregationClient,
        config: ExperimentConfig,
        seed: int,
        noise_seed: int | None = None,
    ) -> None:
        self.party_id = client_party_id(view.client_id)
        self.noise_seed = noise_seed  # privacy noise: None = secret
        self.coin = make_rng(noise_seed, "client-sampling", self.party_id)
        self.view = view
        self.structure_view = view  # what Ā and the NSFs are built from (edge DP: perturbed)
        self.perturber: edge_dp.EdgePerturber | None = None
        self.settings = settings
        self.config = config
        self.agg = agg
        self.seed = seed
        self.adjacency: AdjacencyClient | None = (
            AdjacencyClient(view, self.party_id) if view.cross_edges == "known" else None
        )
        with party_torch_rng(seed, self.party_id, "init"):  # replaced by the server's model
            self.model = build_fedstruct_model(settings, view.num_features, view.num_classes)
        self.theta_dim = sum(p.numel() for p in self.model.parameters())
        self.a_local = local_propagation(view.edge_index, view.num_nodes)
        self.train_rows = np.flatnonzero(view.train_mask.numpy())
        self.labels = view.y[torch.from_numpy(self.train_rows)]
        n, d = view.num_global_nodes, self.model_nsf_dim
        self.s = torch.zeros(n, d, requires_grad=settings.learnable_nsf)  # S, by opaque id
        self.abar: sp.csr_matrix | None = None
        self._train_abar: AbarRows | None = None
        self._all_abar: AbarRows | None = None
        count = self.train_rows.size if settings.loss_weighting == "labelled" else view.num_nodes
        self.weight = float(count)
        self.params: np.ndarray | None = None  # the global (θ ‖ S) as this client knows it
        self.global_opt: GlobalOptimizer | None = None  # when clients hold the aggregate
        self._round_masks: tuple[int, list[torch.Tensor]] | None = None

    @property
    def model_nsf_dim(self) -> int:
        st = self.settings
        return st.nsf_dim if st.structure_mlp else self.view.num_classes

    # -- pre-training --------------------------------------------------------------------

    def set_abar(self, abar: sp.spmatrix | Payload) -> None:
        """Hold ``Ā^[i]`` (``[n_i, n]``, rows in local order, opaque-id columns), as a matrix
        or in its wire form (:meth:`SparseRows.to_payload` with local row numbers)."""
        if isinstance(abar, Payload):
            abar = SparseRows.from_payload(abar, self.view.num_global_nodes).matrix
        expected = (self.view.num_nodes, self.view.num_global_nodes)
        if abar.shape != expected:
            raise ValueError(f"{self.party_id}: Ā^[i] has shape {abar.shape}, expected {expected}")
        self.abar = sp.csr_matrix(abar, dtype=np.float64)
        self._train_abar = AbarRows.of(self.abar, self.train_rows)
        self._all_abar = AbarRows.of(self.abar, np.arange(self.view.num_nodes))

    def adopt_abar(self) -> int:
        """Take Ā^[i] from the finished Algorithm 3 run; returns its ``nnz``."""
        if self.adjacency is None or self.adjacency.abar is None:
            raise RuntimeError(f"{self.party_id}: no Ā^[i] was built")
        self.set_abar(self.adjacency.abar)
        self.adjacency = None  # the per-hop state is no longer needed
        return int(self.abar.nnz) if self.abar is not None else 0

    def roles(self) -> Iterable[object | None]:
        adjacency = self.adjacency.roles() if self.adjacency is not None else ()
        return (self, self.agg, *adjacency, self.perturber)

    def host_edge_dp(self, mechanism: str, epsilon: float) -> None:
        """Start this client's edge perturbation (:mod:`~.edge_dp`), with noise from its own
        secret randomness."""
        rng = make_rng(self.noise_seed, "edge-dp", self.party_id)
        dp = EdgeDP(mechanism, epsilon)
        self.perturber = edge_dp.EdgePerturber(self.view, self.party_id, dp, rng)

    def adopt_perturbed_view(self, num_clients: int) -> int:
        """Build Ā and the NSFs from the perturbed view from now on; returns its edges."""
        if self.perturber is None:
            raise RuntimeError(f"{self.party_id}: no edge perturbation hosted")
        self.structure_view = self.perturber.result(num_clients)
        self.adjacency = AdjacencyClient(self.structure_view, self.party_id)
        self.perturber = None
        return self.structure_view.num_edges // 2 + self.structure_view.num_external_edges

    def share_nsf(self) -> list[Envelope]:
        """``(own opaque ids, S_i)`` to the server (Alg. 1/2 "share S_i")."""
        st = self.settings
        rows = node_structure_features(
            self.structure_view, st.nsf, self.model_nsf_dim, self.seed, st.rw_steps, st.init_std
        )
        ids = self.view.node_ids.numpy().astype(np.int64)
        with torch.no_grad():
            self.s[torch.from_numpy(ids)] = torch.from_numpy(rows)
        return [Envelope(self.party_id, SERVER, NSF_TAG, Payload({"ids": ids, "rows": rows}))]

    def receive_nsf(self, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag != NSF_ALL_TAG:
                raise ValueError(f"{self.party_id}: unexpected {env.tag} during NSF exchange")
            nsf = env.payload.array("nsf")
            if nsf.shape != tuple(self.s.shape):
                raise ValueError(f"{self.party_id}: S has shape {nsf.shape}")
            with torch.no_grad():
                self.s.copy_(torch.from_numpy(nsf))

    # -- rounds --------------------------------------------------------------------------

    def receive_model(self, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag == UPDATE_TAG:
                self.apply_mean(env.payload.array("update"), int(env.payload.meta["round"]))
            elif env.tag == MODEL_TAG:
                params = env.payload.array("params").astype(np.float32)
                expected = self.theta_dim + (self.s.numel() if self.settings.learnable_nsf else 0)
                if params.shape != (expected,):
                    raise ValueError(f"{self.party_id}: model has shape {params.shape}")
                self.params = params

    def _sync(self) -> None:
        if self.params is None:
            raise RuntimeError(f"{self.party_id}: no global model received")
        set_flat(self.model, self.params[: self.theta_dim])
        if self.settings.learnable_nsf:
            with torch.no_grad():
                self.s.copy_(torch.from_numpy(self.params[self.theta_dim :]).view_as(self.s))

    @property
    def output_grads(self) -> bool:
        return self.settings.structure_grads == "output"

    def _masks(self, round_idx: int) -> list[torch.Tensor]:
        """The round's shared structure dropout masks (drawn once: training and expansion)."""
        if self._round_masks is None or self._round_masks[0] != round_idx:
            n = self.view.num_global_nodes
            self._round_masks = (round_idx, round_masks(self.model, self.seed, round_idx, n))
        return self._round_masks[1]

    def apply_mean(self, mean: np.ndarray, round_idx: int) -> None:
        """The global optimizer's step; with output gradients the aggregate is expanded
        first (:func:`~securefgl.algorithms.fedstruct.output_grads.expand_update`)."""
        if self.output_grads and self.params is not None:
            self._sync()
            mean = expand_update(self.model, self.s, mean, self._masks(round_idx))
        super().apply_mean(mean, round_idx)

    def _output_update(self, round_idx: int) -> tuple[np.ndarray, float]:
        """``-(∇_θf L_i ‖ vec E_i)`` with ``E_i = ∂L_i/∂g(S)`` (:mod:`.output_grads`)."""
        abar = self._train_abar
        assert abar is not None
        n, c = self.view.num_global_nodes, self.view.num_classes
        e = torch.zeros(n, c)
        loss = 0.0
        if self.train_rows.size:
            cols = torch.from_numpy(abar.cols)
            with torch.no_grad():
                g = self.model.structure_output(
                    self.s[cols], [m[cols] for m in self._masks(round_idx)]
                )
            g.requires_grad_(True)
            with party_torch_rng(self.seed, self.party_id, round_idx):  # feature dropout
                f = self.model.feature_logits(self.view.x, self.a_local)
            logits = f[torch.from_numpy(abar.rows)] + torch.sparse.mm(abar.matrix, g)
            ce = F.cross_entropy(logits, self.labels)
            ce.backward()
            loss = float(ce.item())
            e[cols] = g.grad
        params = list(self.model.feature_mlp.parameters())
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        update = -torch.cat([parameters_to_vector(grads).double(), e.double().reshape(-1)])
        return update.numpy(), loss

    def local_update(self, round_idx: int, mu: float = 0.0) -> float:
        """Gradient of the mean CE over the labelled nodes; hands ``-∇`` to the protocol."""
        del mu  # FedSGD: no proximal term
        if self._train_abar is None:
            raise RuntimeError(f"{self.party_id}: Ā^[i] is not set")
        self._sync()
        self.model.train()
        self.model.zero_grad(set_to_none=True)
        self.s.grad = None
        if self.output_grads:
            update, loss = self._output_update(round_idx)
            self.submit(round_idx, update, max(self.weight, 1e-12))
            return loss
        loss = 0.0
        if self.train_rows.size:
            with party_torch_rng(self.seed, self.party_id, round_idx):  # this client's dropout
                logits = self.model(self.view.x, self.a_local, self._train_abar, self.s)
            ce = F.cross_entropy(logits, self.labels)
            ce.backward()
            loss = float(ce.item())
        grads = [
            p.grad if p.grad is not None else torch.zeros_like(p) for p in self.model.parameters()
        ]
        parts = [parameters_to_vector(grads).detach().double()]
        if self.settings.learnable_nsf:
            g_s = self.s.grad if self.s.grad is not None else torch.zeros_like(self.s)
            parts.append(g_s.detach().double().reshape(-1))
        update = -torch.cat(parts).numpy()
        self.submit(round_idx, update, max(self.weight, 1e-12))
        return loss

    def optimizer_settings(self) -> tuple[str, float, float]:
        return self.config.server_optimizer, self.settings.lr, self.settings.weight_decay

    @torch.no_grad()
    def predict(self) -> SplitPredictions:
        if self._all_abar is None:
            raise RuntimeError(f"{self.party_id}: Ā^[i] is not set")
        self._sync()
        self.model.eval()
        pred = self.model(self.view.x, self.a_local, self._all_abar, self.s).argmax(dim=-1)
        return {
            s: unlinked(self.view.y[m].numpy(), pred[m].numpy())
            for s in SPLITS
            if (m := getattr(self.view, f"{s}_mask")) is not None
        }


class FedStructServer(FedAvgServer):
    """Holds (θ ‖ S) when the protocol lets it see the aggregate (with output gradients it
    forwards the aggregate instead); relays NSFs (and, with ``abar_relay``, the Ā blocks)."""

    model_tag = MODEL_TAG

    def __init__(
        self,
        theta: np.ndarray,
        agg: AggregationServer,
        holds_model: bool,
        settings: FedStructSettings,
        optimizer_kind: str,
        num_nodes: int,
        client_ids: list[str],
    ) -> None:
        st = settings
        super().__init__(
            theta, agg, holds_model, GlobalOptimizer(theta, optimizer_kind, st.lr, st.weight_decay)
        )
        self.settings = settings
        self.optimizer_kind = optimizer_kind
        self.num_nodes = num_nodes
        self.relay = AdjacencyRelay(self.party_id, client_ids)
        self.pending: np.ndarray | None = None  # output gradients: the aggregate to forward

    def roles(self) -> Iterable[object | None]:
        return (*super().roles(), *self.relay.roles())

    @property
    def forwards_update(self) -> bool:
        """Output gradients: after the initial model the server forwards each round's short
        aggregate instead of the model (every client expands it and steps), so the download
        shrinks like the upload."""
        return self.holds_model and self.settings.structure_grads == "output"

    def broadcast(self, round_idx: int, receivers: list[str]) -> list[Envelope]:
        if not self.forwards_update or self.params is not None:
            sent = super().broadcast(round_idx, receivers)
            if self.forwards_update:
                self.params = None  # from now on every client holds the model
            return sent
        if self.pending is None:
            return []
        payload = Payload({"update": self.pending}, {"round": round_idx})
        self.pending = None
        return [Envelope(self.party_id, r, UPDATE_TAG, payload) for r in receivers]

    def apply_result(self, round_idx: int) -> None:
        if not self.forwards_update:
            super().apply_result(round_idx)
        elif (result := self.agg.result()) is not None:
            self.pending = result.mean.astype(np.float32)

    def apply_empty_round(self, round_idx: int, dim: int) -> None:
        if not self.forwards_update:
            super().apply_empty_round(round_idx, dim)
        elif (mean := self.empty_round_mean(dim)) is not None:
            self.pending = mean.astype(np.float32)

    def assemble_nsf(self, inbox: list[Envelope], receivers: list[str]) -> list[Envelope]:
        """Place every ``S_i`` by opaque id; H2V: S joins the model, else S goes to all."""
        if self.params is None:
            raise RuntimeError("server: NSFs arrived after the model was handed over")
        rows, ids = [], []
        for env in inbox:
            if env.tag != NSF_TAG:
                raise ValueError(f"server: unexpected {env.tag} during NSF exchange")
            ids.append(env.payload.array("ids").astype(np.int64))
            rows.append(env.payload.array("rows").astype(np.float32))
        all_ids = np.concatenate(ids)
        if all_ids.size != self.num_nodes or not np.array_equal(
            np.sort(all_ids), np.arange(self.num_nodes)
        ):
            raise ValueError("server: the clients' NSF rows do not cover every node exactly once")
        s = np.zeros((self.num_nodes, rows[0].shape[1]), dtype=np.float32)
        s[all_ids] = np.concatenate(rows)
        if self.settings.learnable_nsf:
            self.params = np.concatenate([self.params, s.reshape(-1)])
            st = self.settings
            self.optimizer = GlobalOptimizer(
                self.params, self.optimizer_kind, st.lr, st.weight_decay
            )
            return []
        payload = Payload({"nsf": s})  # one payload: encoded once for all receivers
        return [Envelope(self.party_id, r, NSF_ALL_TAG, payload) for r in receivers]


@party_builder
def fedstruct_client(
    view: Payload, stack: dict[str, Any], settings: str, seed: int, noise_seed: int | None
) -> FedStructClient:
    """A FedStruct client, built where it lives from its own view, the stack's settings
    and FedStruct's (:meth:`FedStructSettings.to_json`)."""
    config, v = config_from_json(stack["config"]), view_from_payload(view)
    agg = protocol_party(stack, client_party_id(v.client_id))
    st = FedStructSettings.from_json(settings)
    return FedStructClient(v, st, agg, config, seed, noise_seed)


@party_builder
def fedstruct_server(
    theta: np.ndarray, stack: dict[str, Any], settings: str, holds_model: bool,
    num_nodes: int, client_ids: list[str],
) -> FedStructServer:  # fmt: skip
    """The FedStruct server with the initial θ (``holds_model``: it sees the aggregate)."""
    config, st = config_from_json(stack["config"]), FedStructSettings.from_json(settings)
    agg = protocol_party(stack, SERVER)
    return FedStructServer(
        theta, agg, holds_model, st, config.server_optimizer, num_nodes, client_ids
    )
