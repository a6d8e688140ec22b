"""Protocol state machines: parties, phases, envelopes and the phase driver.

An aggregation protocol is a fixed sequence of :class:`Phase` s. In each phase every live
party of the phase's role runs one method on the envelopes it has received and returns
envelopes to send. The driver hands those envelopes to a ``transmit`` callable (the
federation runtime's Channel: it serializes, counts and records them, and returns the
decoded copies) and files the results in the receivers' inboxes. Parties therefore never
call each other, and every byte they exchange is on the transcript.

Every aggregation computes the weighted mean ``sum_i w_i x_i / sum_i w_i`` over the clients
that survive the round (the weights travel inside the protected sum).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

import numpy as np

from protocols.wire import Payload


class Role(StrEnum):
    """What a party is to a protocol."""

    SERVER = "server"
    CLIENT = "client"
    AUTHORITY = "authority"  # key authority / trusted third party, never the server


class ProtocolError(RuntimeError):
    """A protocol run cannot complete correctly (e.g. too few survivors): abort the round."""


@dataclass(frozen=True)
class Envelope:
    """One message between two parties."""

    sender: str
    receiver: str
    tag: str
    payload: Payload


@dataclass(frozen=True)
class Phase:
    """One step of a protocol run: ``method`` is called on every party of ``role``
    (:func:`run_phases`)."""

    role: Role
    method: str


@dataclass(frozen=True)
class AggregateResult:
    """Weighted mean over the surviving clients, as recovered by the output holder."""

    mean: np.ndarray
    total_weight: float
    participants: tuple[str, ...]


Inbox = list[Envelope]
Transmit = Callable[[list[Envelope]], list[Envelope]]
Invoke = Callable[[str, str, Inbox], list[Envelope]]


class ProtocolParty(ABC):  # noqa: B024 - a marker base with shared state
    """One party's side of a protocol. Holds only that party's secrets."""

    def __init__(self, party_id: str) -> None:
        self.party_id = party_id


class AggregationClient(ProtocolParty):
    """Client side: gets its update with :meth:`begin_round`."""

    @abstractmethod
    def begin_round(self, round_idx: int, vector: np.ndarray, weight: float) -> None: ...

    def result(self) -> AggregateResult | None:
        """The aggregate when the protocol delivers it to clients (e.g. CKKS), else None."""
        return None


class AggregationServer(ProtocolParty):
    """Server side: learns which clients take part with :meth:`begin_round`."""

    @abstractmethod
    def begin_round(self, round_idx: int, participants: Sequence[str]) -> None: ...

    def result(self) -> AggregateResult | None:
        """The aggregate when the protocol delivers it to the server, else None."""
        return None


class AggregationAuthority(ProtocolParty):  # noqa: B024 - a marker base
    """A third party of an aggregation protocol (e.g. CKKS's key authority), never the
    server."""


@dataclass
class AggregationParties:
    """The parties a protocol creates for one federation."""

    server: AggregationServer
    clients: dict[str, AggregationClient]
    others: dict[str, ProtocolParty] = field(default_factory=dict)  # e.g. a key authority

    def by_id(self) -> dict[str, ProtocolParty]:
        return {self.server.party_id: self.server, **self.clients, **self.others}


class AggregationProtocol(ABC):
    """A way to compute the weighted mean of client vectors (plain, secagg, ckks, ...)."""

    name: ClassVar[str]
    output_role: ClassVar[Role]
    setup_phases: ClassVar[tuple[Phase, ...]] = ()
    round_phases: ClassVar[tuple[Phase, ...]]
    #: the survivors' mean is still delivered when clients drop out mid-round
    tolerates_dropouts: ClassVar[bool] = False
    #: the role interfaces of its parties: a phase method runs on the party's role that is
    #: an instance of one of them (an executor resolves it so)
    party_types: ClassVar[tuple[type[ProtocolParty], ...]] = (
        AggregationClient, AggregationServer, AggregationAuthority,
    )  # fmt: skip

    @abstractmethod
    def create_parties(
        self, server_id: str, client_ids: Sequence[str], dim: int
    ) -> AggregationParties:
        """Make each party's state for vectors of length ``dim``."""

    def min_summands(self, n_clients: int) -> int | None:
        """The fewest clients' inputs in any aggregate its output holder can obtain, as the
        clients of a federation of ``n_clients`` enforce it whatever the server sends; None:
        no such floor (the cohort is the driver's, trusted only by an honest-but-curious
        model)."""
        return None

    def min_participants(self, n_clients: int) -> int:
        """The fewest clients a round of a federation of ``n_clients`` can aggregate (fewer:
        the round cannot run, e.g. a Poisson draw that only one client joined)."""
        return 1


def default_invoke(parties: Mapping[str, ProtocolParty]) -> Invoke:
    """Call phase methods in-process (the sequential local executor)."""

    def invoke(party_id: str, method: str, inbox: Inbox) -> list[Envelope]:
        return getattr(parties[party_id], method)(inbox)

    return invoke


def run_phases(
    phases: Sequence[Phase],
    roles: Mapping[Role, Sequence[str]],
    invoke: Invoke,
    transmit: Transmit,
    dropped: Mapping[str, str] | None = None,
) -> None:
    """Run ``phases`` in order.

    ``roles`` maps each role to its party ids; ``dropped`` maps a party id to the phase
    method before which it goes silent (it runs no later phase, and what is sent to it
    after that is discarded). An ``invoke`` with a ``batch(method, [(party, inbox), ...])``
    attribute gets each phase's parties in one call (an executor may run them in
    parallel); it returns their outgoing envelopes in the same order, or ``None`` for a
    party that went silent (crashed, timed out): it is dropped from then on, as if listed
    in ``dropped``, and the protocol's dropout handling decides whether the run completes.
    """
    dropped = dict(dropped or {})
    known = {m for m in (p.method for p in phases)}
    for pid, method in dropped.items():
        if method not in known:
            raise ValueError(f"party {pid!r} drops before unknown phase {method!r}")
    gone: set[str] = set()
    inboxes: dict[str, Inbox] = {}
    for phase in phases:
        gone |= {pid for pid, method in dropped.items() if method == phase.method}
        live = [pid for pid in roles.get(phase.role, ()) if pid not in gone]
        requests = [(pid, inboxes.pop(pid, [])) for pid in live]
        batch = getattr(invoke, "batch", None)  # the parties of a phase, run together
        if batch is not None:
            results = batch(phase.method, requests)
        else:
            results = [invoke(pid, phase.method, inbox) for pid, inbox in requests]
        gone |= {pid for (pid, _), out in zip(requests, results, strict=True) if out is None}
        outgoing = [env for out in results if out is not None for env in out]
        for env in transmit(outgoing):
            if env.receiver not in gone:
                inboxes.setdefault(env.receiver, []).append(env)


def no_transport(envelopes: list[Envelope]) -> list[Envelope]:
    """A transmit that serializes and decodes each payload, recording nothing (for tests)."""
    return [
        Envelope(e.sender, e.receiver, e.tag, Payload.from_bytes(e.payload.to_bytes()))
        for e in envelopes
    ]


def setup_parties(
    protocol: AggregationProtocol,
    parties: AggregationParties,
    transmit: Transmit,
    invoke: Invoke | None = None,
) -> None:
    """Run the protocol's one-off setup phases (e.g. key distribution)."""
    run_phases(
        protocol.setup_phases,
        roles_of(parties),
        invoke or default_invoke(parties.by_id()),
        transmit,
    )


def roles_of(parties: AggregationParties) -> dict[Role, list[str]]:
    return {
        Role.SERVER: [parties.server.party_id],
        Role.CLIENT: list(parties.clients),
        Role.AUTHORITY: list(parties.others),
    }


def aggregate(
    protocol: AggregationProtocol,
    parties: AggregationParties,
    round_idx: int,
    inputs: Mapping[str, tuple[np.ndarray, float]],
    transmit: Transmit = no_transport,
    dropped: Mapping[str, str] | None = None,
    invoke: Invoke | None = None,
) -> AggregateResult:
    """One aggregation round over the clients in ``inputs``; returns the output holder's result.

    In-process convenience: inputs are handed to each client's state directly (in a
    distributed run each client calls ``begin_round`` itself).
    """
    for cid, (vector, weight) in inputs.items():
        parties.clients[cid].begin_round(round_idx, np.asarray(vector, dtype=np.float64), weight)
    parties.server.begin_round(round_idx, list(inputs))
    roles = roles_of(parties)
    roles[Role.CLIENT] = list(inputs)
    run_phases(
        protocol.round_phases, roles, invoke or default_invoke(parties.by_id()), transmit, dropped
    )
    return output_of(protocol, parties, [c for c in inputs if c not in (dropped or {})])


def output_of(
    protocol: AggregationProtocol, parties: AggregationParties, survivors: Sequence[str]
) -> AggregateResult:
    """The aggregate as held by the protocol's output role."""
    holders = (
        [parties.server]
        if protocol.output_role is Role.SERVER
        else [parties.clients[c] for c in survivors]
    )
    for holder in holders:
        result = holder.result()
        if result is not None:
            return result
    raise ProtocolError(f"{protocol.name}: no party holds an aggregate after the round")
