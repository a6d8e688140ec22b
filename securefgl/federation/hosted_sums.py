"""Hosted secure sums: one role and one driver for every algorithm whose parties sum to one
receiver (FedGCN's neighbour sums, FedStruct's Ā hop sums, GPFL's personalised sums).

Each party that takes part hosts a :class:`HostedSum`: its own state of a
:mod:`protocols.secure_sum` mode (a client's or the relaying server's side), made in its own
process from a :class:`SumSpec` (plain data, no secrets: the mode ``sum_mode``, the
experiment id bound into every key, and the mode's options). :class:`SecureSumDriver` runs
the mode's key set-up once and then, per round: ``begin_round`` on every party, the
algorithm's *prepare* call on each client (hand its blocks and its own request to its
state), an optional exchange (e.g. FedStruct's union supports), the round phases through
the executor and the channel, and the algorithm's *finish* call on each client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocols.base import Role, run_phases
from protocols.registry import make_secure_sum
from protocols.secure_sum import SecureSum, SecureSumClient, SecureSumServer, SumRequest
from securefgl.federation.audit import max_abs_error
from securefgl.federation.channel import Channel
from securefgl.federation.executor import Executor
from securefgl.federation.party import Call, Party, PartyError


@dataclass(frozen=True)
class SumSpec:
    """A secure-sum mode (``protocols.registry.SECURE_SUMS``) and its options."""

    sum_mode: str
    experiment_id: str
    options: dict[str, Any] = field(default_factory=dict)

    def protocol(self) -> SecureSum:
        return make_secure_sum(self.sum_mode, self.experiment_id, **self.options)

    def authenticated(self, options: dict[str, Any]) -> SumSpec:
        """This spec in a threat model (``ProtocolStack.sum_options()``: the threat model
        and the experiment's key registry); ``plain`` has no keys to sign."""
        if self.sum_mode == "plain" or not options:
            return self
        return SumSpec(self.sum_mode, self.experiment_id, {**self.options, **options})

    def to_wire(self) -> dict[str, Any]:
        return {"sum_mode": self.sum_mode, "experiment_id": self.experiment_id,
                "options": self.options}  # fmt: skip

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> SumSpec:
        return cls(data["sum_mode"], data["experiment_id"], dict(data.get("options", {})))


class HostedSum:
    """A party's side of hosted secure sums: empty until :meth:`host` makes its state for a
    mode (every state starts secret-free; keys are made in the set-up phases)."""

    def __init__(self, party_id: str) -> None:
        self.party_id = party_id
        self.state: SecureSumClient | SecureSumServer | None = None
        self.spec: SumSpec | None = None
        self.protocol: SecureSum | None = None  # the mode's public configuration
        #: this round's weighted sum as handed over, (column weights, vector, own weight):
        #: the party's own data, read only by the simulator's audit (weighted_sum_error)
        self.last_weighted: tuple[dict[str, float], np.ndarray, float] | None = None

    def host(self, spec: dict[str, Any], server_id: str, client_ids: Sequence[str]) -> None:
        """Make this party's state for the mode ``spec`` (a :meth:`SumSpec.to_wire`)."""
        self.spec = SumSpec.from_wire(spec)
        self.protocol = self.spec.protocol()
        parties = self.protocol.create_parties(server_id, list(client_ids))
        if self.party_id == server_id:
            self.state = parties.server
        elif self.party_id in parties.clients:
            self.state = parties.clients[self.party_id]
        else:
            raise PartyError(f"{self.party_id} is neither the server nor a client of the sums")

    def roles(self) -> Iterable[object | None]:
        """This role and its state (the state answers the protocol's phases)."""
        return (self, self.state)

    @property
    def client(self) -> SecureSumClient:
        if not isinstance(self.state, SecureSumClient):
            raise PartyError(f"{self.party_id}: no client secure-sum state hosted")
        return self.state

    def weighted_sum(
        self, row: dict[str, float], column: dict[str, float], vector: np.ndarray
    ) -> int:
        """A personalised weighted sum (GPFL, FED-PUB): contribute ``column[i] · vector`` to
        each receiver i and request ``Σ_j row[j] · vector_j`` over the other senders, this
        party's own term added locally; returns how many others send."""
        for receiver, weight in column.items():
            self.client.add_contribution(receiver, weight * vector)
        senders = tuple(s for s in row if s != self.party_id)
        own_weight = row.get(self.party_id, 0.0)
        if senders:
            self.client.expect_sum(SumRequest(senders, vector.shape), local=own_weight * vector)
        self.last_weighted = (dict(column), vector, own_weight)
        return len(senders)

    @property
    def server(self) -> SecureSumServer:
        if not isinstance(self.state, SecureSumServer):
            raise PartyError(f"{self.party_id}: no server secure-sum state hosted")
        return self.state


def weighted_sum_error(hosted: Mapping[str, HostedSum | None]) -> float | None:
    """The simulator's audit of a round of :meth:`HostedSum.weighted_sum`: the largest
    absolute error of any receiver's total against the float64 sum of the terms its senders
    handed over (and its own); None when a party is not held here or no sum was made."""
    errors = []
    for receiver, mine in hosted.items():
        if mine is None or mine.last_weighted is None:
            return None
        result = mine.client.result()
        if result is None:
            continue
        _, vector, own_weight = mine.last_weighted
        expected = np.asarray(own_weight * vector if result.includes_local else 0.0, np.float64)
        for sender in result.senders:
            theirs = hosted.get(sender)
            if theirs is None or theirs.last_weighted is None:
                return None
            column, v, _ = theirs.last_weighted
            expected = expected + np.asarray(column[receiver] * v, dtype=np.float64)
        errors.append(max_abs_error(result.total, expected))
    return max(errors, default=None)


class SecureSumDriver:
    """Runs hosted secure sums between ``clients`` and the relaying ``server``."""

    def __init__(
        self,
        executor: Executor,
        channel: Channel,
        spec: SumSpec,
        clients: Sequence[str],
        server: str,
    ) -> None:
        self.executor, self.channel, self.spec = executor, channel, spec
        self.clients, self.server = list(clients), server
        self.protocol = spec.protocol()  # configuration only: its phases
        self.roles = {Role.SERVER: [server], Role.CLIENT: self.clients}

    def setup(self) -> int:
        """Every party hosts its state, then the mode's key exchange; returns its bytes."""
        start = len(self.channel.transcript.entries)
        spec = self.spec.to_wire()
        self.executor.call(
            [Call.to(p, HostedSum.host, spec, self.server, self.clients)
             for p in (*self.clients, self.server)]
        )  # fmt: skip
        self._run(self.protocol.setup_phases)
        return sum(e.nbytes for e in self.channel.transcript.entries[start:])

    def round(
        self,
        round_idx: int,
        prepare: Callable[[str], Call],
        finish: Callable[[str], Call],
        exchange: Callable[[list[Any]], list[Any]] | None = None,
    ) -> tuple[list[Any], list[Any]]:
        """One batch of sums (``round_idx`` fresh per batch); returns what the clients'
        prepare calls (after ``exchange``, if given) and finish calls returned."""
        self.executor.call(
            [Call.to(self.server, SecureSumServer.begin_round, round_idx)]
            + [Call.to(c, SecureSumClient.begin_round, round_idx) for c in self.clients]
        )
        prepared = self.executor.call([prepare(c) for c in self.clients])
        if exchange is not None:
            prepared = exchange(prepared)
        self._run(self.protocol.round_phases)
        return prepared, self.executor.call([finish(c) for c in self.clients])

    def _run(self, phases: Sequence[Any]) -> None:
        run_phases(phases, self.roles, self.executor.phases(self.protocol), self.channel.transmit)


class SumRelay(Party):
    """A party that only relays (or adds) hosted secure sums: the server of a stand-alone
    run of sums (attacks, tests)."""

    def __init__(self, party_id: str) -> None:
        self.party_id = party_id
        self.sums = HostedSum(party_id)

    def roles(self) -> Iterable[object | None]:
        return self.sums.roles()
