"""FedEgo (Zhang et al., ACM TKDD 2023, Algorithm 1) through the protocol layer, and the
baselines of its Tables 2-3 on the same model.

Per round: every client loads the mean of the shared reduction layer, trains 5 local
epochs of mini-batches of 2-hop ego-graphs, hands its shared layer's update to the
configured aggregation protocol (``--protocol secagg``: the server learns only the mean)
and uploads its mixed ego-graphs (§4.3; optionally DP); the server trains its own
personalised layers on them (§4.4) and sends them with the mean soft label p_g; each
client mixes them into its own with λ_k = (EMD(p_k, p_g)/2)^0.5 computed locally.
Baselines: ``fedego-fedavg`` / ``fedego-fedprox`` (the whole model averaged),
``fedego-local``. Deviations and the channel: securefgl/algorithms/fedego/README.md.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np
from torch_geometric.data import Data

from protocols.base import ProtocolError, Role, run_phases
from protocols.dp.accounting import PrivacyAccountant
from securefgl.algorithms.base import Algorithm, Evaluators, SplitPredictions
from securefgl.algorithms.common.graph.learner import deliver
from securefgl.algorithms.common.training import party_torch_rng
from securefgl.algorithms.fedego.model import EgoNet
from securefgl.algorithms.fedego.parties import (
    EgoClient,
    EgoServer,
    ego_client,
    ego_server,
    ego_settings,
    flat_of,
)
from securefgl.federation import SERVER, Call, client_party_id
from securefgl.federation.audit import AggregateAudit, holder_result
from securefgl.federation.builders import protocol_host, stack_args, view_payload
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import recipe

log = logging.getLogger(__name__)

SHARED = "shared layers' updates (clients -> server)"
SHARED_MEAN = "shared layers' mean (server -> clients)"
MIXED = "mixed ego-graphs (clients -> server)"
PERSONAL = "server's personalised layers and p_g (server -> clients)"


class EgoFL(Algorithm):
    """The round loop shared by FedEgo and its baselines (``variant``)."""

    variant: ClassVar[str] = "fedego"
    all_clients = True
    instead_of = {
        "model": "its model is Linear + 2×SAGE", "layers": "its model is Linear + 2×SAGE",
        "hidden": "see --fedego-hidden", "lr": "see --fedego-lr", "client_lr": "see --fedego-lr",
        "local_epochs": "see --fedego-local-epochs", "mu": "see --fedego-mu",
        "dropout": "its model's dropout is 0.5 (the authors' code)",
        "weight_decay": "no weight decay",
        "server_optimizer": "the shared layers are a plain mean",
    }  # fmt: skip

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        self.s = s = ego_settings(cfg)
        self.federation = federation
        views = federation.views
        self.ids = ids = [client_party_id(v.client_id) for v in views]
        v0 = views[0]
        with party_torch_rng(federation.seed, "fedego-init"):
            init = EgoNet(v0.num_features, s.hidden, v0.num_classes, 0.5)
        shared_names = EgoNet.SHARED + (() if self.variant == "fedego" else EgoNet.PERSONAL)
        shared = flat_of(init.parts(shared_names)) if self.variant != "local" else np.zeros(1)
        self.dim = dim = int(shared.size)
        stack_ = federation.stack
        protocol = stack_.protocol
        authorities = list(stack_.parties(SERVER, ids, dim).others)
        stack = stack_args(stack_, federation.noise_seed, cfg, SERVER, ids, dim)
        holds = protocol.output_role is Role.SERVER
        recipes = {
            SERVER: recipe(ego_server, params=shared, personal=flat_of(init.parts(EgoNet.PERSONAL)),
                           in_dim=v0.num_features, classes=v0.num_classes, stack=stack,
                           holds=holds, seed=federation.seed),
            **{pid: recipe(ego_client, view=view_payload(v), stack=stack, variant=self.variant,
                           seed=federation.seed, noise_seed=federation.noise_seed)
               for pid, v in zip(ids, views, strict=True)},
            **{pid: recipe(protocol_host, party_id=pid, stack=stack) for pid in authorities},
        }  # fmt: skip
        self.executor = ex = federation.make_executor(recipes)
        self.clients = {c: ex.held(c) for c in ids}
        self.server = ex.held(SERVER)
        self.audit = AggregateAudit()
        self.roles = {Role.SERVER: [SERVER], Role.CLIENT: ids, Role.AUTHORITY: authorities}
        federation.channel.round = -1
        run_phases(protocol.setup_phases, self.roles, ex.phases(protocol),
                   federation.channel.transmit)  # fmt: skip
        self._broadcast(-1)
        kind = cfg.protocol.dp_accountant
        self.accountant = None
        if s.dp_noise > 0 and self.variant == "fedego":
            self.accountant = PrivacyAccountant(kind, s.delta)
        elif s.dp_noise > 0:  # nothing is released through the mixup's noise: no ε to claim
            log.warning("%s sends no mixed ego-graphs: dp_noise = %g does not apply to it",
                        self.name, s.dp_noise)  # fmt: skip

    def _broadcast(self, round_idx: int) -> None:
        sent = self.executor.call([Call.to(SERVER, EgoServer.broadcast, round_idx, self.ids)])[0]
        if sent:
            deliver(self.executor, self.federation.channel, sent, EgoClient.receive_shared)

    def train_round(self, round_idx: int) -> float:
        ex, channel, t = self.executor, self.federation.channel, round_idx
        channel.round = t
        losses = ex.map(self.ids, EgoClient.local_update, t)
        if self.variant != "local":
            ex.call([Call.to(SERVER, EgoServer.begin_aggregation, t, self.ids)])
            protocol = self.federation.stack.protocol
            try:
                run_phases(protocol.round_phases, self.roles, ex.phases(protocol),
                           channel.transmit)  # fmt: skip
            except ProtocolError as err:
                raise ProtocolError(f"round {t} aborted: {err}") from err
            self._audit_aggregate()
            ex.call([Call.to(SERVER, EgoServer.apply_result, t)]
                    + [Call.to(c, EgoClient.apply_result, t) for c in self.ids])  # fmt: skip
            self._broadcast(t)
            self.federation.stack.account_round(1.0, len(self.ids), self.dim)
        if self.variant == "fedego":
            sent = [e for out in ex.map(self.ids, EgoClient.send_mixed, t) for e in out]
            back = ex.call([Call.to(SERVER, EgoServer.train_on_mixed, t,
                                    channel.transmit(sent))])[0]  # fmt: skip
            deliver(ex, channel, back, EgoClient.receive_personal, t)
            if self.accountant is not None:
                self.accountant.step(self.s.dp_noise, 1.0)  # each ego-graph once per round
        return float(np.mean(losses))

    def _audit_aggregate(self) -> None:
        """The simulator's audit of the shared layer's aggregate (:meth:`aggregate_error`)."""
        first = self.clients[self.ids[0]]
        result = holder_result(self.federation.stack, self.server and self.server.agg,
                               first and first.agg)  # fmt: skip
        held = {c: p.last_input for c, p in self.clients.items() if p is not None}
        self.audit.check(result, held)

    def evaluators(self) -> Evaluators:
        return Evaluators(self.ids, EgoClient.predict)

    def predict(self, draw: int = 0) -> list[SplitPredictions]:
        """Every client's predictions; ``draw`` > 0 samples other evaluation trees."""
        return self.executor.map(self.ids, EgoClient.predict, draw)

    def predict_global(self, graph: Data, draw: int = 0) -> list[float]:
        """Each client's micro-F1 on ``graph`` (FedEgo's global test; simulator oracle)."""
        y = graph.y.numpy()
        x, ei = graph.x.numpy().astype(np.float32), graph.edge_index.numpy()
        return self.executor.map(self.ids, EgoClient.predict_on, x, ei, y, draw)

    def privacy(self) -> dict[str, Any]:
        """The mixup's ledger (against the server, unit one ego-graph), beside the stack's;
        the mixup's is the headline ε when the stack has none."""
        out: dict[str, Any] = {}
        if self.accountant is not None:
            unit = "one ego-graph (a centre and its sampled 2-hop tree)"
            eps = self.accountant.epsilon()
            kind = self.accountant.kind
            ledger = {"epsilon": eps, "delta": self.s.delta, "accountant": kind,
                      "adversary": "server", "mechanism": "Gaussian on the mixed ego-graphs",
                      "unit": unit}  # fmt: skip
            out["guarantees"] = [ledger]
            out.update({"mixup_epsilon": eps, "mixup_delta": self.s.delta, "mixup_unit": unit,
                        "mixup_accountant": kind})  # fmt: skip
            if "epsilon" not in self.federation.stack.privacy():
                out.update({k: ledger[k] for k in ("epsilon", "delta", "accountant",
                                                   "adversary")})  # fmt: skip
        return out

    def protection(self) -> dict[str, str]:
        stack = self.federation.stack
        if self.variant == "local":
            return {}
        out = {SHARED: "+".join(stack.names) or "plain", SHARED_MEAN: "plain"}
        if self.variant == "fedego":
            s = self.s
            out[MIXED] = ("mixup of " + (f"{s.batch_size}" if s.mixup else "1") + " ego-graphs"
                          + (f", clipped to {s.dp_clip:g} + Gaussian σ = {s.dp_noise:g} "
                             "(RDP-accounted)" if s.dp_noise > 0 else ", no DP"))  # fmt: skip
            out[PERSONAL] = "plain"
        return out

    def model_label(self) -> str:
        return "Linear + 2×SAGE on 2-hop ego-graphs"

    def local_work(self) -> str:
        n = ego_settings(self.config).local_epochs
        return f"{n} local epoch{'s' * (n != 1)} on fresh ego-graphs"


class FedEgo(EgoFL):
    name = "fedego"
    variant = "fedego"


class EgoFedAvg(EgoFL):
    """FedAvg on FedEgo's model: the whole model averaged uniformly (the authors' code)."""

    name = "fedego-fedavg"
    variant = "fedavg"


class EgoFedProx(EgoFL):
    name = "fedego-fedprox"
    variant = "fedprox"


class EgoLocal(EgoFL):
    name = "fedego-local"
    variant = "local"
    setting = "local"


__all__ = ["EgoFL", "EgoFedAvg", "EgoFedProx", "EgoLocal", "FedEgo"]
