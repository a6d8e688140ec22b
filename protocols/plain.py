"""Plaintext aggregation: the reference the protected protocols are checked against.

Threat model: none. The server sees every client's (weighted) update in the clear.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from protocols.base import (
    AggregateResult,
    AggregationClient,
    AggregationParties,
    AggregationProtocol,
    AggregationServer,
    Envelope,
    Inbox,
    Phase,
    ProtocolError,
    Role,
)
from protocols.wire import Payload

TAG = "plain/update"
#: Updates travel as float32, the models' precision (the server sums them in float64):
#: half the bytes of float64 for the same model.
WIRE_DTYPE = np.dtype(np.float32)


class PlainClient(AggregationClient):
    def __init__(self, party_id: str, server_id: str) -> None:
        super().__init__(party_id)
        self.server_id = server_id
        self._message: Payload | None = None

    def begin_round(self, round_idx: int, vector: np.ndarray, weight: float) -> None:
        self._message = Payload(
            {"weighted": (np.asarray(vector, np.float64) * weight).astype(WIRE_DTYPE)},
            {"weight": float(weight)},
        )

    def send_update(self, inbox: Inbox) -> list[Envelope]:
        if self._message is None:
            raise ProtocolError(f"{self.party_id}: begin_round was not called")
        message, self._message = self._message, None
        return [Envelope(self.party_id, self.server_id, TAG, message)]


class PlainServer(AggregationServer):
    def __init__(self, party_id: str, dim: int) -> None:
        super().__init__(party_id)
        self.dim = dim
        self._result: AggregateResult | None = None

    def begin_round(self, round_idx: int, participants: Sequence[str]) -> None:
        self._result = None

    def collect(self, inbox: Inbox) -> list[Envelope]:
        updates = [e for e in inbox if e.tag == TAG]
        if not updates:
            raise ProtocolError("plain aggregation: no client update arrived")
        total = np.zeros(self.dim)
        weight = 0.0
        for env in updates:
            vec = env.payload.array("weighted")
            if vec.shape != (self.dim,) or vec.dtype != WIRE_DTYPE:
                raise ProtocolError(
                    f"update from {env.sender} is {vec.dtype} {vec.shape}, not {WIRE_DTYPE} "
                    f"({self.dim},)"
                )
            w = env.payload.meta.get("weight")
            if isinstance(w, bool) or not isinstance(w, int | float) or not 0 <= w < math.inf:
                raise ProtocolError(f"update from {env.sender} has no valid weight: {w!r}")
            total += vec
            weight += float(w)
        if weight <= 0:
            raise ProtocolError("plain aggregation: total weight is not positive")
        self._result = AggregateResult(total / weight, weight, tuple(e.sender for e in updates))
        return []

    def result(self) -> AggregateResult | None:
        return self._result


class PlainAggregation(AggregationProtocol):
    """The server receives every client's weighted update in the clear and averages them."""

    name = "plain"
    output_role = Role.SERVER
    round_phases = (Phase(Role.CLIENT, "send_update"), Phase(Role.SERVER, "collect"))
    tolerates_dropouts = True  # the mean of the updates that arrived

    def create_parties(
        self, server_id: str, client_ids: Sequence[str], dim: int
    ) -> AggregationParties:
        return AggregationParties(
            server=PlainServer(server_id, dim),
            clients={c: PlainClient(c, server_id) for c in client_ids},
        )
