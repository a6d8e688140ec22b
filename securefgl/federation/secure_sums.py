"""Hosted secure sums: one driver for every algorithm whose parties sum to one receiver.

FedGCN's neighbour sums and FedStruct's Ā hop sums are batches of
:mod:`protocols.secure_sum` jobs run between client parties and a relaying server, each
party holding its own state as its :data:`~securefgl.federation.party.SUMS` sub-party.
The mode travels to the parties as a :class:`SumSpec` (plain data, no secrets); each party
creates its own state from it (:func:`hosted_state`). :class:`SecureSumDriver` runs the
mode's key set-up once and then, per round: ``begin_round`` on every party, the
algorithm's *prepare* call on each client (hand its blocks and its own request to its
state), an optional exchange (e.g. FedStruct's union supports), the round phases through
the executor and the channel, and the algorithm's *finish* call on each client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocols.base import Role, run_phases
from protocols.registry import make_secure_sum
from protocols.secure_sum import SecureSum, SecureSumClient, SecureSumServer
from securefgl.federation.channel import Channel
from securefgl.federation.executor import Executor
from securefgl.federation.party import SUMS, Call


@dataclass(frozen=True)
class SumSpec:
    """A secure-sum mode and its options (``protocols.registry.make_secure_sum``)."""

    mode: str
    experiment_id: str
    options: dict[str, Any] = field(default_factory=dict)

    def protocol(self) -> SecureSum:
        return make_secure_sum(self.mode, self.experiment_id, **self.options)

    def authenticated(self, options: dict[str, Any]) -> SumSpec:
        """This spec in a threat model (``ProtocolStack.sum_options()``: the threat model
        and the experiment's key registry); ``plain`` has no keys to sign."""
        if self.mode == "plain" or not options:
            return self
        return SumSpec(self.mode, self.experiment_id, {**self.options, **options})

    def to_wire(self) -> dict[str, Any]:
        return {"mode": self.mode, "experiment_id": self.experiment_id, "options": self.options}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> SumSpec:
        return cls(data["mode"], data["experiment_id"], dict(data.get("options", {})))


def hosted_state(
    spec: dict[str, Any], party_id: str, server_id: str, client_ids: Sequence[str]
) -> SecureSumClient | SecureSumServer:
    """This party's fresh secure-sum state for the mode ``spec`` (a :meth:`SumSpec.to_wire`).

    Every party's initial state is secret-free; keys are made in the set-up phases.
    """
    parties = SumSpec.from_wire(spec).protocol().create_parties(server_id, list(client_ids))
    return parties.server if party_id == server_id else parties.clients[party_id]


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

    def setup(self, host: Callable[[str], Call]) -> int:
        """``host(party_id)`` on every party (each creates its state, e.g. with
        :func:`hosted_state`), then the mode's key exchange; returns its bytes."""
        start = len(self.channel.transcript.entries)
        self.executor.call([host(p) for p in (*self.clients, self.server)])
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
        self.executor.map([self.server, *self.clients], SUMS, "begin_round", round_idx)
        prepared = self.executor.call([prepare(c) for c in self.clients])
        if exchange is not None:
            prepared = exchange(prepared)
        self._run(self.protocol.round_phases)
        return prepared, self.executor.call([finish(c) for c in self.clients])

    def _run(self, phases: Sequence[Any]) -> None:
        run_phases(phases, self.roles, self.executor.phases(SUMS), self.channel.transmit)
