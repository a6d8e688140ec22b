"""FedStruct training (Aliakbari et al., ICLR 2025, Alg. 1 and Alg. 2) on securefgl's runtime.

Pre-training, through the channel (set-up bytes): edge DP on Ā's inputs if configured
(:mod:`~securefgl.fedstruct.edge_dp`); Ā^[i] for every client by Algorithm 3
(``abar="federated"``, :mod:`~securefgl.fedstruct.abar_build`, plain or secure hop sums) or
by the simulator (``abar="oracle"``: NOT private, what the official code does); the NSFs,
through the server (``fedstruct/nsf``, ``fedstruct/nsf-all``; Hop2Vec's S travels with the
model); the initial model θ = (θ_f ‖ θ_s), plus S for Hop2Vec.

Rounds: FedSGD, as the official code, reusing :class:`~securefgl.algorithms.fedavg.FedAvg`'s
loop. Each client uploads ``-∇`` of its cross-entropy over its labelled nodes w.r.t. θ (and
its replica of S for Hop2Vec, Prop. 2) with weight ``|Ṽ_i|`` (Eq. 5;
``loss_weighting="nodes"``: n_i, the official code) through the configured stack; Adam
(λ = λ_s) is applied to (θ ‖ S) by whoever holds the aggregate (the server, or every client
under ``ckks``). Deviation: Alg. 2 applies the S-gradient one round late; like the official
code we step θ and S together.

Leaks: the server learns each client's opaque ids and NSFs; every client learns S of every
node (App. G.1; not for Hop2Vec); over ``plain`` the server reads each upload, whose S part
reveals the client's L_s-hop reach. In full: ``docs/algorithms/fedstruct.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
import torch
from torch.nn import functional as F
from torch.nn.utils import parameters_to_vector
from torch_geometric.data import Data

from protocols.base import AggregationClient, AggregationServer, Envelope, Role
from protocols.dp.rng import make_rng
from protocols.secure_sum import SumTooLargeError, TooFewSendersError
from protocols.wire import Payload
from securefgl.algorithms.base import Federation, SplitPredictions
from securefgl.algorithms.fedavg import ClientHeldModel, FedAvg, FedAvgServer
from securefgl.algorithms.server_optimizer import GlobalOptimizer
from securefgl.algorithms.training import SPLITS
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import (
    AGG,
    SERVER,
    SUMS,
    TRAIN,
    Call,
    Party,
    client_party_id,
)
from securefgl.fedstruct import edge_dp
from securefgl.fedstruct.abar_build import (
    ABAR,
    RELAY,
    SECURE_HOP,
    AbarBuildReport,
    HopContext,
    HopSum,
    PlainHopSum,
    build_abar,
)
from securefgl.fedstruct.abar_central import central_abar
from securefgl.fedstruct.abar_client import AdjacencyClient, AdjacencyRelay, SparseRows
from securefgl.fedstruct.abar_secure import SecureHopSum, hop_sum_for
from securefgl.fedstruct.edge_dp import EDGE_DP
from securefgl.fedstruct.model import AbarRows, FedStructModel, local_propagation
from securefgl.fedstruct.nsf import node_structure_features
from securefgl.fedstruct.settings import EdgeDP, FedStructSettings
from securefgl.models import get_flat, set_flat

__all__ = [
    "MODEL_TAG",
    "NSF_ALL_TAG",
    "NSF_TAG",
    "FedStruct",
    "FedStructClient",
    "FedStructServer",
    "build_fedstruct_model",
    "oracle_abar_rows",
    "pooled_edges",
]

log = logging.getLogger(__name__)

MODEL_TAG = "fedstruct/model"
ABAR_SUMS = "Ā hop sums (pre-training)"
NSF_EXCHANGE = "node structure features (pre-training)"
#: What FedStruct's edge-DP ε protects (and what it does not).
EDGE_DP_COVERS = (
    "every edge, once, before Ā and the structural NSFs are built (edge-level, against "
    "everyone who did not know the edge); NOT the feature branch, which trains on the true "
    "internal edges"
)
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


class FedStructClient(ClientHeldModel, Party):
    """Client ``i``: its view, Ā^[i], the replica of S, the model and its protocol side.

    Its sub-parties: ``train`` (this object), ``agg`` (aggregation), ``abar`` (its side of
    Algorithm 3, an :class:`~securefgl.fedstruct.abar_client.AdjacencyClient`), the secure
    hop sums hosted by it, and ``edge_dp`` (edge DP on Ā's inputs, when hosted).
    """

    SUBPARTIES: ClassVar[dict[str, str]] = {
        TRAIN: "",
        AGG: "agg",
        ABAR: "adjacency",
        SECURE_HOP: "adjacency.secure_hop",
        SUMS: "adjacency.secure_hop.sum_party",
        EDGE_DP: "perturber",
    }

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

    def host_edge_dp(self, mechanism: str, epsilon: float) -> None:
        """Start this client's edge perturbation (:mod:`securefgl.fedstruct.edge_dp`), with
        noise from its own secret randomness."""
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
            if env.tag == MODEL_TAG:
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

    def local_update(self, round_idx: int, mu: float = 0.0) -> float:
        """Gradient of the mean CE over the labelled nodes; hands ``-∇`` to the protocol."""
        del mu  # FedSGD: no proximal term
        if self._train_abar is None:
            raise RuntimeError(f"{self.party_id}: Ā^[i] is not set")
        self._sync()
        self.model.train()
        self.model.zero_grad(set_to_none=True)
        self.s.grad = None
        loss = 0.0
        if self.train_rows.size:
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
        self.agg.begin_round(round_idx, update, max(self.weight, 1e-12))
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
            s: (self.view.y[m].numpy(), pred[m].numpy())
            for s in SPLITS
            if (m := getattr(self.view, f"{s}_mask")) is not None
        }


class FedStructServer(FedAvgServer):
    """Holds (θ ‖ S) when the protocol lets it see the aggregate; relays NSFs (and, with
    ``abar_relay``, the Ā blocks)."""

    SUBPARTIES: ClassVar[dict[str, str]] = {
        TRAIN: "",
        AGG: "agg",
        RELAY: "relay",
        SECURE_HOP: "relay.secure_hop",
        SUMS: "relay.secure_hop.sum_party",
    }
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


# -- simulator-side helpers (not federated) ------------------------------------------------


def pooled_edges(views: list[ClientGraph]) -> np.ndarray:
    """SIMULATOR SIDE: every view's edges in opaque-id space (``[2, E]``), i.e. the global
    graph under the opaque ids. Needs ``cross_edges="known"`` views."""
    parts = []
    for v in views:
        ids = v.node_ids.numpy()
        parts.append(ids[v.edge_index.numpy()])
        ext = v.external_edges.numpy()
        parts.append(np.stack([ids[ext[0]], ext[1]]))
    return np.concatenate(parts, axis=1) if parts else np.zeros((2, 0), np.int64)


def oracle_abar_rows(
    views: list[ClientGraph], settings: FedStructSettings
) -> dict[int, sp.csr_matrix]:
    """SIMULATOR SIDE, NOT PRIVATE: Ā^[i] of every client cut from ``central_abar`` of the
    pooled structure (the official code's server-side computation, global top-``p·n``
    pruning whenever ``settings.prune != "none"``)."""
    if any(v.cross_edges != "known" for v in views):
        raise ConfigError("FedStruct's Ā needs cross_edges='known' client views")
    n = views[0].num_global_nodes
    prune = None if settings.prune == "none" else settings.prune_p
    hops, beta = settings.structure_hops, settings.hop_weights
    abar = central_abar(pooled_edges(views), n, hops, beta, prune)
    return {v.client_id: sp.csr_matrix(abar[v.node_ids.numpy()]) for v in views}


def _hop_sum(
    settings: FedStructSettings, experiment_id: str, auth: dict[str, Any] | None = None
) -> HopSum:
    """The per-hop sum of the Ā build: ``plain`` (the paper's), ``masked`` or ``ckks``
    (:mod:`~securefgl.fedstruct.abar_secure`; they run through the server). ``auth``: the
    stack's threat model and key registry (``ProtocolStack.sum_options``)."""
    if settings.abar_sum == "plain":
        return PlainHopSum()
    options: dict[str, Any] = {
        "max_round_bytes": settings.max_round_bytes,
        "min_senders": settings.abar_min_senders,
    }
    if settings.abar_collusion_threshold is not None:
        options["collusion_threshold"] = settings.abar_collusion_threshold
    if settings.abar_sum == "masked":
        options.update(
            word_bits=settings.abar_ring_bits,
            degree_bound=settings.abar_degree_bound,
            pair_masks=settings.abar_pair_masks,
        )
    try:
        hop = hop_sum_for(
            settings.abar_sum, experiment_id, settings.abar_support, **options  # type: ignore[arg-type]
        )
    except ValueError as err:
        raise ConfigError(f"abar_sum: {err}") from None
    if auth and isinstance(hop, SecureHopSum):
        hop.spec = hop.spec.authenticated(auth)
    return hop


class FedStruct(FedAvg):
    """FedStruct with a decoupled-GCN NFE and NSFs ``settings.nsf`` (see module docstring).

    ``settings`` default to :meth:`ExperimentConfig.fedstruct_settings`. ``abar_rows``
    (client id → ``Ā^[i]``) skips the Ā build: a simulator shortcut for tests and ablations.
    """

    name = "fedstruct"
    runs_on_ray = False  # parties built in the driver (no recipes yet)
    needs_cross_edges = True
    mu_used = False

    def __init__(
        self,
        config: ExperimentConfig,
        settings: FedStructSettings | None = None,
        abar_rows: Mapping[int, sp.spmatrix] | None = None,
    ) -> None:
        super().__init__(config)
        self.settings = settings if settings is not None else config.fedstruct_settings()
        self.abar_rows = abar_rows
        self.abar_report: AbarBuildReport | None = None

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg, st = self.config, self.settings
        self.federation = federation
        self.rng = np.random.default_rng(federation.seed)
        views = federation.views
        if self.abar_rows is None and any(v.cross_edges != "known" for v in views):
            raise ConfigError("fedstruct needs cross_edges = 'known' (clients know their edges)")
        protocol = federation.stack.protocol
        if protocol.output_role is Role.CLIENT and cfg.client_fraction < 1:
            raise ConfigError(
                f"{protocol.name} delivers the aggregate only to the clients of the round: "
                "use client_fraction = 1 with it"
            )
        ids = [client_party_id(v.client_id) for v in views]
        num_features, num_classes = views[0].num_features, views[0].num_classes
        n = views[0].num_global_nodes
        with torch.random.fork_rng():
            torch.manual_seed(federation.seed)
            theta = get_flat(build_fedstruct_model(st, num_features, num_classes))
        nsf_dim = st.nsf_dim if st.structure_mlp else num_classes
        self.dim = theta.size + (n * nsf_dim if st.learnable_nsf else 0)  # θ ‖ vec(S)
        self.agg_parties = protocol.create_parties(SERVER, ids, self.dim)
        self.clients = {
            cid: FedStructClient(
                v, st, self.agg_parties.clients[cid], cfg, federation.seed, federation.noise_seed
            )
            for cid, v in zip(ids, views, strict=True)
        }
        holds = protocol.output_role is Role.SERVER
        self.server = FedStructServer(
            theta, self.agg_parties.server, holds, st, cfg.server_optimizer, n, ids
        )
        self._host(federation, ids)  # one-off setup: Ā, NSFs, protocol keys, initial model
        self._build_abar(ids)
        self._share_nsf(ids)
        self._setup_and_start(federation, protocol, ids)

    def _perturb_edges(self, ids: list[str]) -> None:
        """Edge DP on every block before Algorithm 3 (``settings.edge_dp``)."""
        dp, ex = self.settings.edge_dp, self.executor
        if dp is None:
            return
        if self.abar_rows is not None or self.settings.abar != "federated":
            raise ConfigError("edge DP perturbs the federated Ā build: use abar = 'federated'")
        views = self.federation.views
        host = (dp.mechanism, dp.epsilon)
        ex.call([Call(c, TRAIN, "host_edge_dp", host) for c in ids])
        ctx = HopContext(ids, ex, self.federation.channel, SERVER)
        pairs = [(v.client_id, c) for v, c in zip(views, ids, strict=True)]
        edge_dp.perturb_views(pairs, ctx)
        ex.map(ids, TRAIN, "adopt_perturbed_view", len(ids))

    def protection(self) -> dict[str, str]:
        st = self.settings
        if self.abar_rows is not None or st.abar == "oracle":
            abar = "none: computed by the simulator (not federated, not private)"
        elif st.abar_sum == "plain":
            abar = "plain (every B_ik in the clear" + (", relayed)" if st.abar_relay else ")")
        else:
            abar = f"{st.abar_sum} ({st.abar_support} support)"
        nsf = (
            "inside the model updates (Hop2Vec)"
            if st.learnable_nsf
            else "plain (every client learns S: the paper's acknowledged leak)"
        )
        return {
            **super().protection(),
            ABAR_SUMS: abar,
            NSF_EXCHANGE: nsf,
            **({"Ā inputs": f"{st.edge_dp.mechanism} edge DP"} if st.edge_dp else {}),
        }

    def model_label(self) -> str:
        return f"FedStruct ({self.settings.nsf} NSFs, decoupled GCN)"

    def privacy(self) -> dict[str, Any]:
        dp = self.settings.edge_dp
        if dp is None:
            return {}
        return {
            "edge_dp": dp.mechanism,
            "edge_epsilon": dp.epsilon,
            "edge_dp_covers": EDGE_DP_COVERS,
        }

    def _build_abar(self, ids: list[str]) -> None:
        st, ex = self.settings, self.executor
        views = self.federation.views
        self._perturb_edges(ids)
        if self.abar_rows is None and st.abar == "federated":
            try:
                self.abar_report = build_abar(
                    ids,
                    self.federation.channel,
                    ex,
                    st.structure_hops,
                    st.hop_weights,
                    None if st.prune == "none" else st.prune,  # type: ignore[arg-type]
                    st.prune_p,
                    _hop_sum(
                        st,
                        f"securefgl/fedstruct/abar|seed={self.federation.seed}",
                        self.federation.stack.sum_options(),
                    ),
                    SERVER if st.abar_relay or st.abar_sum != "plain" else None,
                    progress=self.federation.progress,
                )
            except TooFewSendersError as err:
                raise ConfigError(
                    f"Ā build refused ({st.abar_sum} sums): {err}. A client with a single "
                    "neighbouring client k would learn k's block B_ik itself. To allow it, "
                    "set abar_min_senders = 1 in [experiment.fedstruct] (--abar-min-senders 1), "
                    "or use a partition where every client has at least 2 neighbouring clients"
                ) from err
            except SumTooLargeError as err:
                raise ConfigError(
                    f"Ā build refused: {err}. With abar_support = {st.abar_support!r}: "
                    + (
                        "every boundary row is sent dense (|R_i|·n values per sender); "
                        "abar_support = 'union' sends only the summed support (the server "
                        "then sees each block's support pattern), "
                        if st.abar_support == "rows"
                        else ""
                    )
                    + f"or raise abar_max_round_gib ({st.abar_max_round_gib:g} GiB; inf: "
                    "no limit) if the machine has the memory"
                ) from None
            ex.map(ids, TRAIN, "adopt_abar")
            return
        rows = self.abar_rows if self.abar_rows is not None else oracle_abar_rows(views, st)
        ex.call(
            [Call(c, TRAIN, "set_abar", (_rows_payload(rows[v.client_id]),)) for c, v in zip(
                ids, views, strict=True)]
        )  # fmt: skip

    def _share_nsf(self, ids: list[str]) -> None:
        channel, ex = self.federation.channel, self.executor
        sent = [env for batch in ex.map(ids, TRAIN, "share_nsf") for env in batch]
        inbox = [env for env in channel.transmit(sent) if env.receiver == SERVER]
        back = ex.call([Call(SERVER, TRAIN, "assemble_nsf", (inbox, ids))])[0]
        boxes: dict[str, list[Envelope]] = {c: [] for c in ids}
        for env in channel.transmit(back):
            boxes[env.receiver].append(env)
        ex.call([Call(c, TRAIN, "receive_nsf", (boxes[c],)) for c in ids if boxes[c]])


def _rows_payload(rows: sp.spmatrix) -> Payload:
    """``Ā^[i]`` (local rows) in its wire form, as the simulator hands it to the client."""
    rows = sp.csr_matrix(rows, dtype=np.float64)
    return SparseRows(np.arange(rows.shape[0], dtype=np.int64), rows).to_payload()
