"""FedGL and SpreadFGL (Zhong et al., §III, Algorithm 1) and their baselines (§IV-A).

* ``spreadfgl``: ``edge_servers`` edge servers (``server_topology``, ring by default),
  Eq. 15's trace regulariser, within-server aggregation every round and Eq. 16 between
  neighbour servers every K rounds, imputation per server over its own clients' nodes;
* ``fedgl``: one edge server covering every client, Eq. 7's loss (no regulariser unless
  ``trace_weight`` is set), imputation every K rounds;
* ``fedavg-fusion``: FedGL without imputation (uniform FedAvg of the same classifier);
* ``localfgl``: the same classifier trained by each client alone.

Every party is a :class:`~securefgl.federation.party.Party` (clients, ``edge-j`` servers)
run by the federation's executor; every message crosses the channel. Each server runs its
own instance of the configured protocol stack with its own clients (a DP mechanism's
distributed noise is sized for ``M_j`` clients; every client is charged once per round).
``ckks`` leaves the aggregate with the clients, so it is accepted only with one server.
Deviation: the server model advances by the mean delta with step 1 (the uniform mean of
the clients' models when all take part, as in Algorithm 1); every client takes part.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any, ClassVar

import numpy as np
from torch_geometric.data import Data

from protocols.base import Envelope, Role, run_phases
from securefgl.algorithms.base import Algorithm, SplitPredictions
from securefgl.algorithms.spreadfgl.client import EdgeClient, LocalTraining
from securefgl.algorithms.spreadfgl.h_release import H_ADVERSARY
from securefgl.algorithms.spreadfgl.model import SageNet
from securefgl.algorithms.spreadfgl.parties import edge_client, edge_server, local_client
from securefgl.algorithms.spreadfgl.server import EdgeServer
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.config.topology import EdgeTopology, edge_server_id
from securefgl.data import ClientGraph
from securefgl.federation import Call, Target, client_party_id
from securefgl.federation.builders import protocol_host, stack_args, view_payload
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import Recipe, recipe
from securefgl.federation.stack import ProtocolStack, build_stack
from securefgl.models import get_flat

MODEL_UPDATES = "model updates (clients -> edge server)"
MODEL_BROADCAST = "model (edge server -> clients)"
SERVER_MODELS = "per-server aggregates (edge server <-> edge server, Eq. 16)"
H_UPLOADS = "H, soft predictions (clients -> edge server)"
PATCHES = "generated neighbour features (edge server -> clients)"


def local_training(config: ExperimentConfig, default_trace: float) -> LocalTraining:
    """The clients' training of the ``spreadfgl`` section and the generic fields."""
    st = config.spreadfgl
    trace = st.trace_weight if st.trace_weight is not None else default_trace
    return LocalTraining(
        st.local_steps, st.aggregator, trace, st.loss_reduction, config.hidden, config.dropout,
        config.lr, config.weight_decay,
    )  # fmt: skip


class EdgeFGL(Algorithm):
    """The edge-client round loop shared by the family (see the module docstring)."""

    name = "fedgl"
    impute: ClassVar[bool] = True
    multi_server: ClassVar[bool] = False  # False: one edge server covering every client
    default_trace: ClassVar[float] = 0.0

    @property
    def settings(self):  # noqa: ANN201 - SpreadFGLSettings
        return self.config.spreadfgl

    def num_servers(self) -> int:
        return int(self.config.edge_servers) if self.multi_server else 1

    def training(self) -> LocalTraining:
        return local_training(self.config, self.default_trace)

    # ----------------------------------------------------------------- set-up
    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        if cfg.client_fraction < 1:
            raise ConfigError(f"{self.name} trains every client every round: client_fraction = 1")
        self.federation = federation
        views = federation.views
        ids = [client_party_id(v.client_id) for v in views]
        self.topology = EdgeTopology.build(len(ids), self.num_servers(), cfg.server_topology)
        self.server_list = [edge_server_id(j) for j in range(self.topology.servers)]
        self.server_ids = frozenset(self.server_list)  # type: ignore[misc]
        train = self.training()
        d, c = views[0].num_features, views[0].num_classes
        self.dim_params = get_flat(SageNet([d, train.hidden, c], train.aggregator)).size
        init = get_flat(SageNet([d, train.hidden, c], train.aggregator, train.dropout))
        self.stacks: dict[str, ProtocolStack] = {}
        self.members: dict[str, list[str]] = {}
        self.authorities: dict[str, list[str]] = {}
        recipes: dict[str, Recipe] = {}
        for j, sid in enumerate(self.server_list):
            members = [ids[i] for i in self.topology.clients_of(j)]
            stack = build_stack(cfg, len(members), f"spreadfgl|seed={federation.seed}|{sid}",
                                seed=federation.noise_seed)  # fmt: skip
            holds = stack.protocol.output_role is Role.SERVER
            if not holds and self.topology.servers > 1:
                raise ConfigError(
                    f"{stack.protocol.name} leaves each server's aggregate with its clients, so "
                    "edge servers cannot exchange it (Eq. 16): use secagg / secagg+ (the server "
                    "learns only its clients' mean) or one edge server"
                )
            authorities = list(stack.parties(sid, members, self.dim_params).others)
            self.stacks[sid], self.members[sid], self.authorities[sid] = stack, members, authorities
            args = stack_args(stack, federation.noise_seed, cfg, sid, members, self.dim_params)
            neighbours = {self.server_list[r]: len(self.topology.clients_of(r))
                          for r in self.topology.neighbours(j)}  # fmt: skip
            recipes[sid] = recipe(
                edge_server, params=init.copy(), stack=args, neighbours=neighbours,
                impute=self.impute, num_classes=c, num_features=d, seed=federation.seed,
                holds_model=holds,
            )  # fmt: skip
            for cid in members:
                recipes[cid] = self.client_recipe(views[ids.index(cid)], args, train)
            recipes.update({pid: recipe(protocol_host, party_id=pid, stack=args)
                            for pid in authorities})  # fmt: skip
        self.executor = federation.make_executor(recipes, list(self.stacks.values()))
        self.clients = {cid: self.executor.held(cid) for cid in ids}  # None: elsewhere
        self.servers = {sid: self.executor.held(sid) for sid in self.server_list}
        federation.channel.round = -1  # keys and the initial model
        for sid, stack in self.stacks.items():
            run_phases(stack.protocol.setup_phases, self._roles(sid),
                       self.executor.phases(stack.protocol),
                       federation.channel.transmit)  # fmt: skip
        self.before_training()
        self._broadcast(-1)

    def client_recipe(
        self, view: ClientGraph, stack: dict[str, Any], train: LocalTraining
    ) -> Recipe:
        fed = self.federation
        return recipe(
            edge_client, view=view_payload(view), stack=stack, training=asdict(train),
            impute=self.impute, noise_seed=fed.noise_seed, seed=fed.seed,
        )  # fmt: skip

    def before_training(self) -> None:
        """Set-up traffic between the parties before the first model (FedSage+'s NeighGen)."""

    def _roles(self, sid: str) -> dict[Role, list[str]]:
        return {
            Role.SERVER: [sid],
            Role.CLIENT: self.members[sid],
            Role.AUTHORITY: self.authorities[sid],
        }

    def _deliver(
        self, sent: list[Envelope], method: Callable[..., Any], to: list[str] | None = None
    ) -> list[Any]:
        """Transmit ``sent``; ``method(inbox)`` (given as ``Class.method``) on each receiver
        (and on every party of ``to``, empty inbox included)."""
        inbox: dict[str, list[Envelope]] = {r: [] for r in to or []}
        for env in self.federation.channel.transmit(sent):
            inbox.setdefault(env.receiver, []).append(env)
        target = Target.of(method)
        return self.executor.call([Call(r, target, (box,)) for r, box in inbox.items()])

    def _broadcast(self, round_idx: int) -> None:
        sent = [e for s in self.executor.map(self.server_list, EdgeServer.broadcast, round_idx)
                for e in s]  # fmt: skip
        self._deliver(sent, EdgeClient.receive_model)

    # ----------------------------------------------------------------- rounds
    def train_round(self, round_idx: int) -> float:
        ex, channel, st = self.executor, self.federation.channel, self.settings
        channel.round = round_idx
        ids = list(self.clients)
        losses = ex.map(ids, EdgeClient.local_update, round_idx)
        for sid in self.server_list:
            ex.call([Call.to(sid, EdgeServer.begin_aggregation, round_idx)])
            protocol = self.stacks[sid].protocol
            run_phases(protocol.round_phases, self._roles(sid), ex.phases(protocol),
                       channel.transmit)  # fmt: skip
        ex.call([Call.to(s, EdgeServer.apply_result, round_idx) for s in self.server_list]
                + [Call.to(c, EdgeClient.apply_result, round_idx) for c in ids])  # fmt: skip
        if round_idx % st.interval == 0:
            if self.impute:
                self._impute(round_idx)
            if self.topology.servers > 1:
                sent = [e for s in ex.map(self.server_list, EdgeServer.share_model, round_idx)
                        for e in s]  # fmt: skip
                self._deliver(sent, EdgeServer.mix_models)
        self._broadcast(round_idx)
        for sid, stack in self.stacks.items():
            stack.account_round(1.0, len(self.members[sid]), self.dim_params)
        return float(np.mean(losses))

    def _impute(self, round_idx: int) -> None:
        sent = [e for s in self.executor.map(list(self.clients), EdgeClient.upload_h, round_idx)
                for e in s]  # fmt: skip
        by_server: dict[str, list[Envelope]] = {sid: [] for sid in self.server_list}
        for env in self.federation.channel.transmit(sent):
            by_server[env.receiver].append(env)
        calls = [Call.to(sid, EdgeServer.impute, round_idx, box) for sid, box in by_server.items()]
        patches = [e for out in self.executor.call(calls) for e in out]
        self._deliver(patches, EdgeClient.receive_patch)

    def predict(self) -> list[SplitPredictions]:
        return self.executor.map(list(self.clients), EdgeClient.predict)

    # ----------------------------------------------------------------- reporting
    def h_guarantee(self) -> dict[str, Any]:
        """The worst client's H guarantee (all charge alike), with what it covers."""
        if not self.impute:
            return {}
        reports = self.executor.map(list(self.clients), EdgeClient.h_privacy)
        eps = [r["h_epsilon"] for r in reports if r.get("h_epsilon") is not None]
        out = {k: v for k, v in reports[0].items() if k != "h_epsilon"}
        if eps:
            unit = "per node row of H (local DP), composed over uploads"
            out.update({"h_epsilon": max(eps), "h_adversary": H_ADVERSARY, "h_unit": unit})
        return out

    def privacy(self) -> dict[str, Any]:
        reports = [s.privacy() for s in self.stacks.values()]
        reports = [r for r in reports if r]
        out: dict[str, Any] = {}
        if reports:  # the worst server's ledger is the headline
            out = dict(max(reports, key=lambda r: r.get("epsilon") or 0.0))
        h = self.h_guarantee()
        out.update(h)
        if "epsilon" not in out and h.get("h_epsilon") is not None:
            out.update({"epsilon": h["h_epsilon"], "delta": h.get("h_delta"),
                        "accountant": h.get("h_accountant"), "adversary": H_ADVERSARY})  # fmt: skip
        return out

    def protection(self) -> dict[str, str]:
        stack = next(iter(self.stacks.values()))
        out = {MODEL_UPDATES: "+".join(stack.names) or "plain", MODEL_BROADCAST: "plain"}
        if self.topology.servers > 1:
            out[SERVER_MODELS] = "plain (per-server aggregates with M_r)"
        if self.impute:
            st = self.settings
            mech = {"none": "none", "gaussian": f"gaussian (σ = {st.h_noise}, C = {st.h_clip})",
                    "rr": f"rr (ε = {st.h_epsilon})"}[st.h_mechanism]  # fmt: skip
            out[H_UPLOADS] = mech + (f", {st.h_rows:.0%} of rows" if st.h_rows < 1 else "")
            out[PATCHES] = "plain (functions of the uploaded H)"
        return out

    def model_label(self) -> str:
        kind = "GraphSAGE-GCN" if self.settings.aggregator == "gcn" else "GraphSAGE"
        return f"{kind} (2 layers)" + (" on the patched subgraph" if self.impute else "")


class FedGL(EdgeFGL):
    name = "fedgl"


class SpreadFGL(EdgeFGL):
    name = "spreadfgl"
    multi_server = True
    default_trace = 1.0


class FedAvgFusion(EdgeFGL):
    """SpreadFGL's FedAvg-fusion baseline: uniform FedAvg, no imputation (§IV-A)."""

    name = "fedavg-fusion"
    impute = False


class LocalFGL(Algorithm):
    """SpreadFGL's LocalFGL baseline: each client's classifier alone, no message (§IV-A)."""

    name = "localfgl"

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        train = asdict(local_training(self.config, 0.0))
        views = {client_party_id(v.client_id): v for v in federation.views}
        self.executor = federation.make_executor({
            pid: recipe(local_client, view=view_payload(v), training=train, seed=federation.seed)
            for pid, v in views.items()
        })  # fmt: skip
        self.clients = {pid: self.executor.held(pid) for pid in views}

    def train_round(self, round_idx: int) -> float:
        ids = list(self.clients)
        return float(np.mean(self.executor.map(ids, EdgeClient.train_steps, round_idx)))

    def predict(self) -> list[SplitPredictions]:
        return self.executor.map(list(self.clients), EdgeClient.predict)

    def model_label(self) -> str:
        return "GraphSAGE-GCN (2 layers), local"
