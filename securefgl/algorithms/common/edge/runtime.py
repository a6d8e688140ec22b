"""The edge runtime's round loop (SpreadFGL, Zhong et al., Algorithm 1; also FedSage+'s).

``N`` edge servers (``server_topology``; one unless ``multi_server``), server
``S_j`` covering a block of clients; every round each client trains from its server's
model, each server aggregates its own clients through its own instance of the configured
protocol stack (a DP mechanism's distributed noise is sized for ``M_j`` clients; every
client is charged once per round), then (:meth:`EdgeFGL.between_rounds`) neighbour servers
mix their aggregates (Eq. 16). Every party is a
:class:`~securefgl.federation.party.Party` run by the federation's executor; every message
crosses the channel. ``ckks`` leaves the aggregate with the clients, so it is accepted only
with one server. Deviation: the server model advances by the mean delta with step 1 (the
uniform mean of the clients' models when all take part, as in Algorithm 1); every client
takes part.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
from torch_geometric.data import Data

from protocols.base import Envelope, Role, run_phases
from protocols.registry import TRANSPORTS
from securefgl.algorithms.base import Algorithm, Evaluators
from securefgl.algorithms.common.edge.client import EdgeClient, LocalTraining
from securefgl.algorithms.common.edge.model import SageNet
from securefgl.algorithms.common.edge.parties import edge_client, edge_server
from securefgl.algorithms.common.edge.server import EdgeServer
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.config.topology import EdgeTopology, edge_server_id
from securefgl.data import ClientGraph
from securefgl.federation import Call, Target, client_party_id
from securefgl.federation.audit import AggregateAudit, holder_result
from securefgl.federation.builders import protocol_host, stack_args, view_payload
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import Recipe, recipe
from securefgl.federation.stack import ProtocolStack, build_stack
from securefgl.models import get_flat

MODEL_UPDATES = "model updates (clients -> edge server)"
MODEL_BROADCAST = "model (edge server -> clients)"
SERVER_MODELS = "per-server aggregates (edge server <-> edge server, Eq. 16)"


class EdgeFGL(Algorithm):
    """The edge-client round loop (module docstring); a family sets :meth:`training` and
    may extend the parties (:meth:`client_recipe`, :meth:`server_recipe`), the set-up
    (:meth:`before_training`) and what happens after each aggregation
    (:meth:`between_rounds`)."""

    all_clients = True

    @abstractmethod
    def training(self) -> LocalTraining:
        """How the clients train."""

    def local_work(self) -> str:
        n = self.training().steps
        return f"{n} local Adam step{'s' * (n != 1)}"

    def num_servers(self) -> int:
        return int(self.config.edge_servers) if self.multi_server else 1

    @classmethod
    def check_stack(cls, config: ExperimentConfig) -> None:
        """Also: each edge server's block of clients can run the stack's rounds, and with
        several servers the aggregate stays with the server (Eq. 16 exchanges it)."""
        super().check_stack(config)
        servers = int(config.edge_servers) if cls.multi_server else 1
        smallest = config.clients // servers  # contiguous blocks (EdgeTopology.build)
        try:
            config.protocol.check_cohort(smallest)
            config.protocol.cohort_floor(smallest)
        except ValueError as err:
            raise ConfigError(f"{cls.name}: {servers} edge server(s), the smallest with "
                              f"{smallest} clients: {err}") from None  # fmt: skip
        transport = config.protocol.transport
        if servers > 1 and TRANSPORTS[transport].output_role is not Role.SERVER:
            raise ConfigError(
                f"{transport} leaves each server's aggregate with its clients, so edge "
                "servers cannot exchange it (Eq. 16): use secagg / secagg+ (the server learns "
                "only its clients' mean) or one edge server"
            )

    def mix_interval(self) -> int:
        """Rounds between two Eq. 16 exchanges of the servers' aggregates."""
        return 1

    # ----------------------------------------------------------------- set-up
    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
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
            authorities = list(stack.parties(sid, members, self.dim_params).others)
            self.stacks[sid], self.members[sid], self.authorities[sid] = stack, members, authorities
            args = stack_args(stack, federation.noise_seed, cfg, sid, members, self.dim_params)
            neighbours = {self.server_list[r]: len(self.topology.clients_of(r))
                          for r in self.topology.neighbours(j)}  # fmt: skip
            recipes[sid] = self.server_recipe(init.copy(), args, neighbours, holds, c, d)
            for cid in members:
                recipes[cid] = self.client_recipe(views[ids.index(cid)], args, train)
            recipes.update({pid: recipe(protocol_host, party_id=pid, stack=args)
                            for pid in authorities})  # fmt: skip
        # the federation's PKI too: a secure evaluation spans every edge server's clients
        self.executor = federation.make_executor(recipes, [*self.stacks.values(), federation.stack])
        self.clients = {cid: self.executor.held(cid) for cid in ids}  # None: elsewhere
        self.servers = {sid: self.executor.held(sid) for sid in self.server_list}
        self.audit = AggregateAudit()
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
        return recipe(edge_client, view=view_payload(view), stack=stack, training=asdict(train),
                      seed=self.federation.seed)  # fmt: skip

    def server_recipe(
        self, params: np.ndarray, stack: dict[str, Any], neighbours: dict[str, int],
        holds: bool, num_classes: int, num_features: int,
    ) -> Recipe:  # fmt: skip
        return recipe(edge_server, params=params, stack=stack, neighbours=neighbours,
                      holds_model=holds)  # fmt: skip

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
        ex, channel = self.executor, self.federation.channel
        channel.round = round_idx
        ids = list(self.clients)
        losses = ex.map(ids, EdgeClient.local_update, round_idx)
        for sid in self.server_list:
            ex.call([Call.to(sid, EdgeServer.begin_aggregation, round_idx)])
            protocol = self.stacks[sid].protocol
            run_phases(protocol.round_phases, self._roles(sid), ex.phases(protocol),
                       channel.transmit)  # fmt: skip
            self._audit_aggregate(sid)
        ex.call([Call.to(s, EdgeServer.apply_result, round_idx) for s in self.server_list]
                + [Call.to(c, EdgeClient.apply_result, round_idx) for c in ids])  # fmt: skip
        self.between_rounds(round_idx)
        self._broadcast(round_idx)
        for sid, stack in self.stacks.items():
            stack.account_round(1.0, len(self.members[sid]), self.dim_params)
        return float(np.mean(losses))

    def _audit_aggregate(self, sid: str) -> None:
        """The simulator's audit of server ``sid``'s aggregate (:meth:`aggregate_error`)."""
        server, members = self.servers[sid], self.members[sid]
        first = self.clients[members[0]]
        result = holder_result(self.stacks[sid], server and server.agg, first and first.agg)
        held = {c: self.clients[c] for c in members}
        self.audit.check(result, {c: p.last_input for c, p in held.items() if p is not None})

    def between_rounds(self, round_idx: int) -> None:
        """After the aggregation, before the broadcast: Eq. 16 every :meth:`mix_interval`
        rounds when there are several servers."""
        if self.topology.servers > 1 and round_idx % self.mix_interval() == 0:
            self.mix_models(round_idx)

    def mix_models(self, round_idx: int) -> None:
        ex = self.executor
        sent = [e for s in ex.map(self.server_list, EdgeServer.share_model, round_idx)
                for e in s]  # fmt: skip
        self._deliver(sent, EdgeServer.mix_models)

    def evaluators(self) -> Evaluators:
        return Evaluators(list(self.clients), EdgeClient.predict, self.server_list[0])

    def predict_global(self, graph: Data) -> list[float]:
        """Each client's accuracy on ``graph`` (e.g. FedEgo's global test; simulator oracle)."""
        x, ei = graph.x.numpy().astype(np.float32), graph.edge_index.numpy()
        return self.executor.map(list(self.clients), EdgeClient.predict_on, x, ei,
                                 graph.y.numpy())  # fmt: skip

    # ----------------------------------------------------------------- reporting
    def privacy(self) -> dict[str, Any]:
        """The worst server's ledger."""
        reports = [r for r in (s.privacy() for s in self.stacks.values()) if r]
        return dict(max(reports, key=lambda r: r.get("epsilon") or 0.0)) if reports else {}

    def protection(self) -> dict[str, str]:
        stack = next(iter(self.stacks.values()))
        out = {MODEL_UPDATES: "+".join(stack.names) or "plain", MODEL_BROADCAST: "plain"}
        if self.topology.servers > 1:
            out[SERVER_MODELS] = "plain (per-server aggregates with M_r)"
        return out
