"""FedAvg (McMahan et al. 2017) and FedProx (Li et al. 2020) on client subgraphs.

Each round the server broadcasts the global parameters, every sampled client trains
``local_epochs`` full-batch SGD steps (``client_lr``) on its own subgraph (internal edges
only: the "FedAvg/FedSGD GNN" baselines of FedStruct, Table 6) and the clients' parameter
*deltas* are averaged, weighted by their number of training nodes, through the configured
aggregation protocol. The mean delta updates the global model through a server optimizer
(FedOpt; default Adam with ``lr`` and ``weight_decay``, see ``server_optimizer.py``).
When the protocol delivers the aggregate to the clients (e.g. CKKS) the server never
learns the model: every client applies the same optimizer step to the decrypted mean.

Deviation: FedAvg proper uses plain averaging (server SGD with lr 1); a fresh local Adam
per round degenerates to sign-SGD and trains poorly, so local steps are SGD.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from torch_geometric.data import Data

from protocols.base import AggregationProtocol, Envelope, ProtocolError, Role, run_phases
from securefgl.algorithms.base import Algorithm, Evaluators
from securefgl.algorithms.fedavg.parties import (
    FedAvgServer,
    RoundClient,
    fedavg_client,
    fedavg_server,
)
from securefgl.config import ConfigError
from securefgl.data import ClientGraph
from securefgl.federation import SERVER, Call, client_party_id
from securefgl.federation.audit import AggregateAudit, holder_result
from securefgl.federation.builders import protocol_host, stack_args, view_payload
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import Recipe, recipe
from securefgl.models import build_model, get_flat

log = logging.getLogger(__name__)

MODEL_UPDATES = "model updates (clients -> server)"
MODEL_BROADCAST = "model (server -> clients)"


class FedAvg(Algorithm):
    name = "fedavg"
    mu_used = False

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        self.federation = federation
        self.rng = np.random.default_rng(federation.seed)
        views = federation.views
        num_classes = views[0].num_classes
        ids = [client_party_id(v.client_id) for v in views]
        init = build_model(
            cfg.model, self.model_inputs(views[0]), cfg.hidden, num_classes, cfg.layers,
            cfg.dropout,
        )  # fmt: skip
        protocol = federation.stack.protocol
        if protocol.output_role is Role.CLIENT and cfg.client_fraction < 1:
            raise ConfigError(
                f"{protocol.name} delivers the aggregate only to the clients of the round, so "
                "client sampling would leave the others with stale models: use "
                "client_fraction = 1 with it"
            )
        self.dim = sum(p.numel() for p in init.parameters())
        holds = protocol.output_role is Role.SERVER
        self._make_parties(
            federation,
            ids,
            lambda stack: self.server_recipe(get_flat(init), stack, holds),
            self.client_recipe,
        )
        self.before_training(ids)
        self._setup_and_start(federation, protocol, ids)

    def model_inputs(self, view: ClientGraph) -> int:
        """The model's input width for clients like ``view``."""
        return view.num_features

    def server_recipe(self, params: np.ndarray, stack: dict[str, Any], holds: bool) -> Recipe:
        return recipe(fedavg_server, params=params, stack=stack, holds_model=holds)

    def client_recipe(self, view: ClientGraph, stack: dict[str, Any]) -> Recipe:
        fed = self.federation
        return recipe(
            fedavg_client, view=view_payload(view), stack=stack, noise_seed=fed.noise_seed,
            seed=fed.seed,
        )  # fmt: skip

    def before_training(self, ids: list[str]) -> None:
        """Pre-training between the parties, once they exist (nothing for FedAvg)."""

    def _make_parties(
        self,
        federation: Federation,
        ids: list[str],
        server: Callable[[dict[str, Any]], Recipe],
        client: Callable[[ClientGraph, dict[str, Any]], Recipe],
    ) -> None:
        """The server, the clients and the protocol's other parties built from recipes
        (``server(stack)``, ``client(view, stack)``; ``stack``: :func:`stack_args`) where
        the executor keeps them; the channel set to the one-off set-up round (-1)."""
        stack_ = federation.stack
        authorities = list(stack_.parties(SERVER, ids, self.dim).others)
        stack = stack_args(stack_, federation.noise_seed, self.config, SERVER, ids, self.dim)
        recipes = {
            SERVER: server(stack),
            **{cid: client(v, stack) for cid, v in zip(ids, federation.views, strict=True)},
            **{pid: recipe(protocol_host, party_id=pid, stack=stack) for pid in authorities},
        }
        self.executor = federation.make_executor(recipes)
        self.clients = {cid: self.executor.held(cid) for cid in ids}  # None: not in this process
        self.audit = AggregateAudit()
        self.server = self.executor.held(SERVER)
        self.roles = {Role.SERVER: [SERVER], Role.CLIENT: ids, Role.AUTHORITY: authorities}
        federation.channel.round = -1  # one-off setup: protocol keys, the initial model

    def _setup_and_start(
        self, federation: Federation, protocol: AggregationProtocol, ids: list[str]
    ) -> None:
        """The protocol's set-up phases, then the initial model to every client."""
        phases = protocol.setup_phases
        run_phases(phases, self.roles, self.executor.phases(protocol), federation.channel.transmit)
        self._start(ids)

    def _start(self, ids: list[str]) -> None:
        """The initial model to every client; every client's weight in the mean."""
        self._broadcast(-1)
        weights = self.executor.map(ids, RoundClient.training_weight)
        self._weights = dict(zip(ids, weights, strict=True))

    def _live(self) -> list[str]:
        """The clients still answering (a client whose process died has gone silent)."""
        return [c for c in self.clients if c not in self.executor.silent]

    def _broadcast(self, round_idx: int, before: Sequence[Call] = ()) -> None:
        """The server sends the global model (if it holds one) to every client; the calls
        ``before`` run first, in the same batch (one round trip fewer on remote parties)."""
        ids = self._live()
        batch = [*before, Call.to(SERVER, FedAvgServer.broadcast, round_idx, ids)]
        sent = self.executor.call(batch)[-1]
        inbox: dict[str, list[Envelope]] = {c: [] for c in ids}
        for env in self.federation.channel.transmit(sent):
            inbox[env.receiver].append(env)
        self.executor.call(
            [Call.to(c, RoundClient.receive_model, inbox[c]) for c in ids if inbox[c]]
        )

    def _sample(self, round_idx: int) -> list[str]:
        """``fixed``: the server draws ``client_fraction·K`` clients (it knows who takes
        part either way); ``poisson``: each client flips its own secret coin."""
        ids, q = self._live(), self.config.client_fraction
        if self.config.client_sampling == "poisson":
            joins = self.executor.map(ids, RoundClient.joins_round, round_idx, q)
            return [c for c, join in zip(ids, joins, strict=True) if join]
        k = max(1, round(q * len(ids)))
        if k == len(ids):
            return ids
        return sorted(self.rng.choice(ids, size=k, replace=False).tolist())

    def train_round(self, round_idx: int) -> float:
        channel, ex = self.federation.channel, self.executor
        channel.round = round_idx
        sampled = self._sample(round_idx)
        stack, q = self.federation.stack, self.config.client_fraction
        fewest = stack.protocol.min_participants(len(self.clients))
        if sampled and len(sampled) < fewest:  # Poisson: too few joined to aggregate
            log.warning("round %d: %d client(s) joined, fewer than the %d %s sums: no "
                        "update this round", round_idx, len(sampled), fewest,
                        stack.protocol.name)  # fmt: skip
            sampled = []
        if not sampled:  # Poisson: nobody joined; central noise is still released
            ex.call([Call.to(SERVER, FedAvgServer.apply_empty_round, round_idx, self.dim)])
            self._broadcast(round_idx)
            stack.account_round(q, 0, self.dim)
            return float("nan")
        mu = self.config.mu if self.mu_used else 0.0
        answers = ex.call_survivors(
            [Call.to(c, RoundClient.local_update, round_idx, mu) for c in sampled]
        )
        trained = {c: loss for c, loss in zip(sampled, answers, strict=True) if loss is not None}
        sampled = list(trained)
        ex.call([Call.to(SERVER, FedAvgServer.begin_aggregation, round_idx, sampled)])
        self._aggregate(round_idx, sampled)
        survivors = [c for c in sampled if c not in ex.silent]
        apply = [Call.to(SERVER, FedAvgServer.apply_result, round_idx)] + [
            Call.to(c, RoundClient.apply_result, round_idx) for c in self._live()
        ]
        self._broadcast(round_idx, apply)  # every client holds the current model after a round
        stack.account_round(q, len(survivors), self.dim)
        weights = np.array([self._weights[c] for c in survivors])
        losses = [trained[c] for c in survivors]
        return float(np.average(losses, weights=weights)) if weights.sum() else 0.0

    def _aggregate(self, round_idx: int, sampled: list[str]) -> None:
        """The protocol's round phases over ``sampled``. A client that goes silent is a
        dropped client: the protocol recovers the survivors' sum (SecAgg above its
        threshold) or the round is aborted, saying why."""
        ex, protocol = self.executor, self.federation.stack.protocol
        roles = {**self.roles, Role.CLIENT: sampled}
        try:
            run_phases(
                protocol.round_phases, roles, ex.phases(protocol), self.federation.channel.transmit
            )
        except ProtocolError as err:
            lost = sorted(set(sampled) & ex.silent)
            if not lost:
                raise
            raise ProtocolError(
                f"round {round_idx} aborted: {', '.join(lost)} went silent and {protocol.name} "
                f"could not complete without them ({err})"
            ) from err
        lost = sorted(set(sampled) & ex.silent)
        if lost and not protocol.tolerates_dropouts:
            raise ProtocolError(
                f"round {round_idx} aborted: {protocol.name} needs every client of the round, "
                f"and {', '.join(lost)} went silent"
            )
        if lost:
            log.warning("round %d: %s went silent; the survivors' sum was used", round_idx,
                        ", ".join(lost))  # fmt: skip
        self._audit_aggregate(sampled)

    def _audit_aggregate(self, sampled: list[str]) -> None:
        """The simulator's audit of the transport (:meth:`aggregate_error`,
        :mod:`securefgl.federation.audit`)."""
        server = _role(self.server, FedAvgServer)
        first = _role(self.clients.get(sampled[0]), RoundClient)
        result = holder_result(self.federation.stack, server and server.agg, first and first.agg)
        held = {cid: _role(self.clients.get(cid), RoundClient) for cid in sampled}
        self.audit.check(result, {c: p.last_input for c, p in held.items() if p is not None})

    def evaluators(self) -> Evaluators:
        return Evaluators(self._live(), RoundClient.predict)

    def protection(self) -> dict[str, str]:
        stack = self.federation.stack
        return {
            MODEL_UPDATES: "+".join(stack.names) or "plain",
            MODEL_BROADCAST: "plain (every client holds the model)",
        }


def _role(party: Any, kind: type) -> Any:
    """``party`` if it is a ``kind``, else its role that is one (e.g. FedGCN's client holds
    a FedAvg client once training starts), else None."""
    if party is None or isinstance(party, kind):
        return party
    roles = party.roles() if hasattr(party, "roles") else ()
    return next((role for role in roles if isinstance(role, kind)), None)


class FedProx(FedAvg):
    """FedAvg with a proximal term ``mu/2 ||w - w_global||^2`` in each local objective."""

    name = "fedprox"
    mu_used = True
