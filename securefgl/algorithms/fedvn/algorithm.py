"""FedVN (Fu et al., "Virtual Nodes Can Help: Tackling Distribution Shifts in Federated
Graph Learning", AAAI 2025, Algorithm 1) through the protocol layer.

Per round: every client trains ω, then θ and Q (:mod:`securefgl.algorithms.fedvn.parties`);
θ ‖ Q is averaged by training graphs through the configured protocol stack (FedAvg's round
loop: plain, secagg, secagg+, ckks, clip_noise, LDP); with ``s_global = "mean"`` every
client then contributes its mean edge-score vector to a secure sum (HostedSum roles, the
``sums`` mode), from which each client takes s_global = (1/K) Σ_k s_local^(k) for the next
round. ω is personal and never sent. Deviations and who learns what:
securefgl/algorithms/fedvn/README.md.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data

from protocols.base import Role
from securefgl.algorithms.base import Evaluators
from securefgl.algorithms.common.graph.learner import GraphAlgorithm
from securefgl.algorithms.common.graph.settings import GraphTaskSettings
from securefgl.algorithms.common.training import party_torch_rng
from securefgl.algorithms.fedavg.algorithm import MODEL_BROADCAST, MODEL_UPDATES, FedAvg
from securefgl.algorithms.fedavg.parties import RoundClient
from securefgl.algorithms.fedvn.parties import (
    FedVNClient,
    build_vn_model,
    fedvn_client,
    fedvn_server,
    fedvn_settings,
    shared_vector,
)
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data.graph_views import GraphClientView
from securefgl.federation import SERVER, Call, client_party_id
from securefgl.federation.builders import graph_view_payload
from securefgl.federation.federation import Federation
from securefgl.federation.hosted_sums import SecureSumDriver, SumSpec
from securefgl.federation.recipes import recipe

SCORES = "mean edge-score vectors s_local (clients -> clients, for s_global)"
EDGE_GENERATOR = "edge generator ω"


class FedVN(GraphAlgorithm, FedAvg):
    name = "fedvn"
    all_clients = True  # s_global is a sum over every client

    @classmethod
    def check_stack(cls, config: ExperimentConfig) -> None:
        super().check_stack(config)
        s = fedvn_settings(config)
        if s.s_global == "mean" and s.sums != "plain" and config.clients - 1 < s.min_senders:
            raise ConfigError(
                f"fedvn: a client's s_global sum needs min_senders = {s.min_senders} other "
                f"clients, and {config.clients} clients leave {config.clients - 1} (lower "
                "--fedvn-min-senders or add clients)"
            )

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        self.s = s = fedvn_settings(cfg)
        self.federation = federation
        self.rng = np.random.default_rng(federation.seed)
        views: list[GraphClientView] = federation.views  # type: ignore[assignment]
        if s.s_global == "mean" and len(views) < 3:
            raise ConfigError("fedvn's s_global sum needs at least 3 clients")
        with party_torch_rng(federation.seed, SERVER, "init"):
            model = build_vn_model(views[0].num_features, views[0].num_classes, cfg)
        Q = torch.zeros(s.virtual_nodes, cfg.section(GraphTaskSettings).hidden)  # the code: 0
        params = shared_vector(model, Q).astype(np.float32)
        self.dim = int(params.size)
        ids = [client_party_id(v.client_id) for v in views]
        holds = federation.stack.protocol.output_role is Role.SERVER
        fed = federation
        self._make_parties(
            federation,
            ids,
            lambda stack: recipe(fedvn_server, params=params, stack=stack, holds=holds),
            lambda view, stack: recipe(
                fedvn_client, view=graph_view_payload(view), stack=stack, seed=fed.seed,
                noise_seed=fed.noise_seed,
            ),  # fmt: skip
        )
        self._setup_and_start(federation, federation.stack.protocol, ids)
        self.ids = ids
        self.driver: SecureSumDriver | None = None
        if s.s_global == "mean":
            spec = SumSpec(str(s.sums), f"{cfg.name or 'run'}|fedvn|seed={federation.seed}",
                           {"min_senders": s.min_senders if s.sums != "plain" else 1})
            spec = spec.authenticated(federation.stack.sum_options())
            self.driver = SecureSumDriver(self.executor, federation.channel, spec, ids, SERVER)
            self.driver.setup()

    def train_round(self, round_idx: int) -> float:
        loss = super().train_round(round_idx)  # ω, then θ and Q; θ ‖ Q aggregated
        if self.driver is not None:
            ids, k = self.ids, len(self.ids)
            self.driver.round(
                round_idx,
                prepare=lambda c: Call.to(c, FedVNClient.prepare_scores,
                                          [o for o in ids if o != c]),
                finish=lambda c: Call.to(c, FedVNClient.finish_scores, k),
            )  # fmt: skip
        return loss

    def evaluators(self) -> Evaluators:
        return Evaluators(list(self.clients), RoundClient.predict)

    def protection(self) -> dict[str, str]:
        stack = "+".join(self.federation.stack.names) or "plain"
        s = self.s
        if s.s_global == "constant":
            scores = "never sent (s_global = 1/M, the authors' code)"
        elif s.sums == "plain":
            scores = "plain (the server and every client see each s_local)"
        else:
            scores = f"{s.sums} secure sum (each client learns only the mean)"
        return {
            f"{MODEL_UPDATES}: θ and Q": stack,
            MODEL_BROADCAST: "plain (every client holds θ and Q)",
            SCORES: scores,
            EDGE_GENERATOR: "never sent (personal)",
        }

    def model_label(self) -> str:
        return (f"GIN-BN with {self.s.virtual_nodes} shared virtual nodes and a personal "
                "edge generator (FedVN)")  # fmt: skip
