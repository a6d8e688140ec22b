"""FedStruct training (Aliakbari et al., ICLR 2025, Alg. 1 and Alg. 2) on securefgl's runtime.

Pre-training, through the channel (set-up bytes): edge DP on Ā's inputs if configured
(:mod:`~securefgl.algorithms.fedstruct.edge_dp`); Ā^[i] for every client by Algorithm 3
(``abar="federated"``, :mod:`~securefgl.algorithms.fedstruct.abar_build`, plain or secure hop
sums) or by the simulator (``abar="oracle"``: NOT private, what the official code does); the
NSFs, through the server (``fedstruct/nsf``, ``fedstruct/nsf-all``; Hop2Vec's S travels with the
model); the initial model θ = (θ_f ‖ θ_s), plus S for Hop2Vec.

Rounds: FedSGD, as the official code, reusing
:class:`~securefgl.algorithms.fedavg.algorithm.FedAvg`'s loop. Each client uploads ``-∇`` of its
cross-entropy over its labelled nodes w.r.t. θ (and its replica of S for Hop2Vec, Prop. 2) with
weight ``|Ṽ_i|`` (Eq. 5; ``loss_weighting="nodes"``: n_i, the official code) through the
configured stack; Adam (λ = λ_s) is applied to (θ ‖ S) by whoever holds the aggregate (the
server, or every client under ``ckks``). With ``structure_grads="output"`` clients upload
``(∇_θf ‖ ∂L/∂g(S))`` instead and every client expands and applies the aggregate
(:mod:`~securefgl.algorithms.fedstruct.output_grads`). Deviation: Alg. 2 applies the
S-gradient one round late; like the official code we step θ and S together.

Leaks: the server learns each client's opaque ids and NSFs; every client learns S of every
node (App. G.1; not for Hop2Vec); over ``plain`` the server reads each upload, whose S part
reveals the client's L_s-hop reach. In full: ``securefgl/algorithms/fedstruct/README.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch_geometric.data import Data

from protocols.base import Envelope, Role
from protocols.secure_sum import SumTooLargeError, TooFewSendersError
from protocols.wire import Payload
from securefgl.algorithms.fedavg.algorithm import FedAvg
from securefgl.algorithms.fedstruct import edge_dp
from securefgl.algorithms.fedstruct.abar_build import (
    AbarBuildReport,
    HopContext,
    HopSum,
    PlainHopSum,
    build_abar,
)
from securefgl.algorithms.fedstruct.abar_central import central_abar
from securefgl.algorithms.fedstruct.abar_client import SparseRows
from securefgl.algorithms.fedstruct.abar_secure import SecureHopSum, hop_sum_for
from securefgl.algorithms.fedstruct.output_grads import upload_dim
from securefgl.algorithms.fedstruct.parties import (
    FedStructClient,
    FedStructServer,
    build_fedstruct_model,
    fedstruct_client,
    fedstruct_server,
)
from securefgl.algorithms.fedstruct.settings import FedStructSettings
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import SERVER, Call, client_party_id
from securefgl.federation.builders import view_payload
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import recipe
from securefgl.federation.transcript import STRUCTURE
from securefgl.models import get_flat

__all__ = ["FedStruct", "oracle_abar_rows", "pooled_edges"]

log = logging.getLogger(__name__)

ABAR_SUMS = "Ā hop sums (pre-training)"
NSF_EXCHANGE = "node structure features (pre-training)"
#: What FedStruct's edge-DP ε protects (and what it does not).
EDGE_DP_COVERS = (
    "cross-client edges (perturbed once, before Ā and the structural NSFs are built: "
    "against everyone who did not know the edge); internal edges only as they enter Ā and "
    "the NSFs: the feature branch trains on the true internal edges, so the model and its "
    "updates carry them unprotected"
)


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
    (:mod:`~securefgl.algorithms.fedstruct.abar_secure`; they run through the server). ``auth``: the
    stack's threat model and key registry (``ProtocolStack.sum_options``)."""
    if settings.sum_mode == "plain":
        return PlainHopSum()
    options: dict[str, Any] = {
        "max_round_bytes": settings.max_round_bytes,
        "min_senders": settings.abar_min_senders,
    }
    if settings.abar_collusion_threshold is not None:
        options["collusion_threshold"] = settings.abar_collusion_threshold
    if settings.sum_mode == "masked":
        options.update(
            word_bits=settings.abar_ring_bits,
            degree_bound=settings.abar_degree_bound,
            pair_masks=settings.abar_pair_masks,
        )
    try:
        hop = hop_sum_for(
            settings.sum_mode, experiment_id, settings.abar_support, **options  # type: ignore[arg-type]
        )
    except ValueError as err:
        raise ConfigError(f"sum_mode: {err}") from None
    if auth and isinstance(hop, SecureHopSum):
        hop.spec = hop.spec.authenticated(auth)
    return hop


class FedStruct(FedAvg):
    instead_of = {
        "model": "its decoupled model", "layers": "see --feature-hidden, --structure-hidden",
        "hidden": "see --feature-hidden, --structure-hidden",
        "local_epochs": "FedSGD: one full-batch gradient a round", "client_lr": "FedSGD",
        "mu": "FedSGD: no proximal term",
    }  # fmt: skip
    """FedStruct with a decoupled-GCN NFE and NSFs ``settings.nsf`` (see module docstring).

    ``settings`` (default: the configuration's section) are resolved against ``config``.
    ``abar_rows``
    (client id → ``Ā^[i]``) skips the Ā build: a simulator shortcut for tests and ablations.
    """

    name = "fedstruct"
    needs_cross_edges = True
    mu_used = False

    def __init__(
        self,
        config: ExperimentConfig,
        settings: FedStructSettings | None = None,
        abar_rows: Mapping[int, sp.spmatrix] | None = None,
    ) -> None:
        super().__init__(config)
        self.settings = (settings or config.section(FedStructSettings)).resolve(config)
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
            model = build_fedstruct_model(st, num_features, num_classes)
            theta = get_flat(model)
        nsf_dim = st.nsf_dim if st.structure_mlp else num_classes
        self.dim = (
            upload_dim(model, n, num_classes)  # θ_f ‖ vec(E)
            if st.structure_grads == "output"
            else theta.size + (n * nsf_dim if st.learnable_nsf else 0)  # θ ‖ vec(S)
        )
        holds = protocol.output_role is Role.SERVER
        settings, seed, noise = st.to_json(), federation.seed, federation.noise_seed
        self._make_parties(  # one-off setup: Ā, NSFs, protocol keys, initial model
            federation,
            ids,
            lambda stack: recipe(
                fedstruct_server, theta=theta, stack=stack, settings=settings,
                holds_model=holds, num_nodes=n, client_ids=ids,
            ),  # fmt: skip
            lambda view, stack: recipe(
                fedstruct_client, view=view_payload(view), stack=stack, settings=settings,
                seed=seed, noise_seed=noise,
            ),  # fmt: skip
        )
        with federation.channel.transcript.family_scope(STRUCTURE):
            self._build_abar(ids)
            self._share_nsf(ids)
        self._setup_and_start(federation, protocol, ids)

    def _perturb_edges(self, ids: list[str]) -> None:
        """Edge DP on every block before Algorithm 3 (``settings.edge_privacy``)."""
        dp, ex = self.settings.edge_privacy, self.executor
        if dp is None:
            return
        if self.abar_rows is not None or self.settings.abar != "federated":
            raise ConfigError("edge DP perturbs the federated Ā build: use abar = 'federated'")
        views = self.federation.views
        host = (dp.mechanism, dp.epsilon)
        ex.map(ids, FedStructClient.host_edge_dp, *host)
        ctx = HopContext(ids, ex, self.federation.channel, SERVER)
        pairs = [(v.client_id, c) for v, c in zip(views, ids, strict=True)]
        edge_dp.perturb_views(pairs, ctx)
        ex.map(ids, FedStructClient.adopt_perturbed_view, len(ids))

    def protection(self) -> dict[str, str]:
        st = self.settings
        if self.abar_rows is not None or st.abar == "oracle":
            abar = "none: computed by the simulator (not federated, not private)"
        elif st.sum_mode == "plain":
            abar = "plain (every B_ik in the clear" + (", relayed)" if st.abar_relay else ")")
        else:
            abar = f"{st.sum_mode} ({st.abar_support} support)"
        nsf = (
            "inside the model updates (Hop2Vec)"
            if st.learnable_nsf
            else "plain (every client learns S: the paper's acknowledged leak)"
        )
        return {
            **super().protection(),
            ABAR_SUMS: abar,
            NSF_EXCHANGE: nsf,
            **({"Ā inputs": f"{st.edge_dp} edge DP"} if st.edge_dp else {}),
        }

    def model_label(self) -> str:
        return f"FedStruct ({self.settings.nsf} NSFs, decoupled GCN)"

    def local_work(self) -> str:
        return "1 full-batch gradient (FedSGD)"

    def privacy(self) -> dict[str, Any]:
        dp = self.settings.edge_privacy
        if dp is None:
            return {}
        claim = {"epsilon": dp.epsilon, "delta": 0.0,
                 "unit": f"edge-level ({dp.mechanism}; cross-client edges)",
                 "adversary": "everyone", "covers": EDGE_DP_COVERS}  # fmt: skip
        return {
            "edge_dp": dp.mechanism,
            "edge_epsilon": dp.epsilon,
            "edge_dp_covers": EDGE_DP_COVERS,
            "guarantees": [claim],
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
                    SERVER if st.abar_relay or st.sum_mode != "plain" else None,
                    progress=self.federation.progress,
                )
            except TooFewSendersError as err:
                raise ConfigError(
                    f"Ā build refused ({st.sum_mode} sums): {err}. A client with a single "
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
            ex.map(ids, FedStructClient.adopt_abar)
            return
        rows = self.abar_rows if self.abar_rows is not None else oracle_abar_rows(views, st)
        ex.call(
            [Call.to(c, FedStructClient.set_abar, _rows_payload(rows[v.client_id]))
             for c, v in zip(ids, views, strict=True)]
        )  # fmt: skip

    def _share_nsf(self, ids: list[str]) -> None:
        channel, ex = self.federation.channel, self.executor
        sent = [env for batch in ex.map(ids, FedStructClient.share_nsf) for env in batch]
        inbox = [env for env in channel.transmit(sent) if env.receiver == SERVER]
        back = ex.call([Call.to(SERVER, FedStructServer.assemble_nsf, inbox, ids)])[0]
        boxes: dict[str, list[Envelope]] = {c: [] for c in ids}
        for env in channel.transmit(back):
            boxes[env.receiver].append(env)
        ex.call([Call.to(c, FedStructClient.receive_nsf, boxes[c]) for c in ids if boxes[c]])


def _rows_payload(rows: sp.spmatrix) -> Payload:
    """``Ā^[i]`` (local rows) in its wire form, as the simulator hands it to the client."""
    rows = sp.csr_matrix(rows, dtype=np.float64)
    return SparseRows(np.arange(rows.shape[0], dtype=np.int64), rows).to_payload()
