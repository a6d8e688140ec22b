"""Running an honest federation against a lying server, and scoring what the server got.

An active-server attack replaces the server's side of a protocol with a dishonest one and
runs the honest clients unchanged. A client that detects the lie raises
:class:`~protocols.base.ProtocolError`; here that client goes silent (it refuses, as a real
client would) and the round goes on with the others, so an attack is scored on what the
server can actually compute afterwards, not on the first abort.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocols.base import (
    AggregationProtocol,
    Envelope,
    Inbox,
    ProtocolError,
    ProtocolParty,
    Role,
    Transmit,
    no_transport,
    run_phases,
)
from protocols.identity import HONEST_BUT_CURIOUS, THREAT_MODELS

ADVERSARY = "active server"


@dataclass
class Outcome:
    """What one active-server attack achieved under one threat model.

    ``success``: the server recovered a client's input (``recovered``) or the clients
    accepted a result the server corrupted (``corrupted``); otherwise ``refused`` names the
    honest parties' refusals that stopped it.
    """

    attack: str
    protocol: str
    threat_model: str
    success: bool
    outcome: str  # "recovered" | "corrupted" | "refused" | "failed"
    refusals: list[dict[str, str]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """A row of ``benchmarks/results/privacy_audit.json``."""
        return {
            "adversary": ADVERSARY,
            "attack": self.attack,
            "protocol": self.protocol,
            "threat_model": self.threat_model,
            "success": self.success,
            "outcome": self.outcome,
            "refused_by": self.refusals[:3],
            "refusals": len(self.refusals),
            "details": self.details,
            "primary": False,  # not a cell of the trained grid
        }


class Refusals:
    """Wraps client phase methods: a client's ProtocolError is recorded and it goes silent."""

    def __init__(self, parties: Mapping[str, ProtocolParty], server: ProtocolParty) -> None:
        self.parties, self.server = parties, server
        self.log: list[dict[str, str]] = []
        self.silent: set[str] = set()

    def invoke(self, party_id: str, method: str, inbox: Inbox) -> list[Envelope]:
        if party_id == self.server.party_id:
            return getattr(self.server, method)(inbox)
        if party_id in self.silent:
            return []
        try:
            return getattr(self.parties[party_id], method)(inbox)
        except ProtocolError as err:
            self.log.append({"party": party_id, "phase": method, "error": str(err)[:300]})
            self.silent.add(party_id)
            return []


def run_round(
    protocol: AggregationProtocol,
    clients: Mapping[str, Any],
    server: Any,
    round_idx: int,
    inputs: Mapping[str, tuple[np.ndarray, float]],
    transmit: Transmit = no_transport,
    phases: Sequence[Any] | None = None,
) -> Refusals:
    """One round of ``protocol`` between honest ``clients`` and the (lying) ``server``."""
    for cid, (vector, weight) in inputs.items():
        clients[cid].begin_round(round_idx, np.asarray(vector, dtype=np.float64), weight)
    server.begin_round(round_idx, list(inputs))
    refusals = Refusals(clients, server)
    roles = {Role.SERVER: [server.party_id], Role.CLIENT: list(inputs)}
    try:
        run_phases(phases or protocol.round_phases, roles, refusals.invoke, transmit)
    except ProtocolError as err:  # the lying server itself gave up
        refusals.log.append({"party": server.party_id, "phase": "-", "error": str(err)[:300]})
    return refusals


def check_threat_model(threat_model: str) -> str:
    if threat_model not in THREAT_MODELS:
        raise ValueError(f"threat_model must be one of {THREAT_MODELS}")
    return threat_model


def inputs_for(ids: Sequence[str], dim: int, seed: int) -> dict[str, tuple[np.ndarray, float]]:
    rng = np.random.default_rng(seed)
    return {c: (rng.uniform(-1.0, 1.0, dim), float(rng.integers(1, 4))) for c in ids}


def recovered(
    estimate: np.ndarray | None, truth: np.ndarray, tol: float = 1e-4
) -> tuple[bool, float | None]:
    """Whether ``estimate`` equals ``truth`` to ``tol`` (the server's guess of an input)."""
    if estimate is None or estimate.shape != truth.shape:
        return False, None
    err = float(np.max(np.abs(estimate - truth))) if truth.size else 0.0
    return err <= tol, err


def outcome(
    attack: str,
    protocol: str,
    threat_model: str,
    success: bool,
    kind: str,
    refusals: Refusals | list[dict[str, str]],
    **details: Any,
) -> Outcome:
    log = refusals.log if isinstance(refusals, Refusals) else refusals
    return Outcome(attack, protocol, threat_model, success, kind if success else (
        "refused" if log else "failed"), list(log), details)  # fmt: skip


Factory = Callable[[str], AggregationProtocol]
DEFAULT_THREAT_MODEL = HONEST_BUT_CURIOUS
