"""The Channel: the only way parties exchange data.

Every envelope is serialized with the no-pickle wire format, its size counted and recorded
in the :class:`Transcript`, and the receiver gets a copy decoded from those bytes, so no
Python object is ever shared between two parties. A payload held in another process
(:class:`~securefgl.federation.codec.DeferredPayload`, the Ray executor's) is recorded by
its size and digest and passed on as it is: its bytes go from the sender's process to the
receiver's, and come here only when the transcript keeps payloads.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable

from protocols.base import Envelope
from protocols.wire import DEFAULT_MAX_MESSAGE_BYTES, Payload, WireFormatError
from securefgl.federation.codec import DeferredPayload
from securefgl.federation.transcript import Transcript


class Channel:
    """Carries envelopes between parties, round by round (``round``), recording each on its
    :class:`Transcript`; a message over ``max_message_bytes`` is refused.

    With a ``clock`` (e.g. the executor's), :attr:`overlap_seconds` accumulates the
    serialisation that parties on separate machines would do concurrently: per
    :meth:`transmit`, the senders encode and then the receivers decode in parallel, so all
    of it but the busiest sender's encoding and the busiest receiver's decoding (a relaying
    server decodes every message it is sent, one after another)."""

    def __init__(
        self,
        transcript: Transcript | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.transcript = transcript if transcript is not None else Transcript()
        self.max_message_bytes = max_message_bytes
        self.round = 0
        self.clock = clock
        self.overlap_seconds = 0.0

    def transmit(self, envelopes: list[Envelope]) -> list[Envelope]:
        """Send ``envelopes`` in the current round; returns what the receivers get."""
        # a broadcast payload is encoded once; other bytes are dropped as soon as decoded
        encoded: dict[int, tuple[bytes, Payload]] = {}
        uses = Counter(id(env.payload) for env in envelopes)
        delivered = []
        clock = self.clock or _no_clock
        encoding: Counter[str] = Counter()  # seconds per sender
        decoding: Counter[str] = Counter()  # seconds per receiver
        for env in envelopes:
            if isinstance(env.payload, DeferredPayload):
                delivered.append(self._pass_on(env, env.payload))
                continue
            key = id(env.payload)
            t0 = clock()
            if key in encoded:
                data, decoded = encoded[key]
            else:
                data = env.payload.to_bytes()
                t1 = clock()
                encoding[env.sender] += t1 - t0
                t0 = t1
                decoded = Payload.from_bytes(data, self.max_message_bytes)
                if uses[key] > 1:
                    encoded[key] = (data, decoded)
            # a decoded payload is fresh; only a broadcast's receivers need copies of it
            mine = _copy(decoded) if uses[key] > 1 else decoded
            decoding[env.receiver] += clock() - t0
            self.transcript.record(self.round, env, data)
            delivered.append(Envelope(env.sender, env.receiver, env.tag, mine))
            del data, decoded
        if self.clock is not None and encoding:
            total = sum(encoding.values()) + sum(decoding.values())
            self.overlap_seconds += total - max(encoding.values()) - max(decoding.values())
        return delivered

    def _pass_on(self, env: Envelope, payload: DeferredPayload) -> Envelope:
        if payload.nbytes > self.max_message_bytes:
            raise WireFormatError(f"a message of {payload.nbytes} bytes is over the "
                                  f"{self.max_message_bytes}-byte limit")  # fmt: skip
        keeps = self.transcript.keeps(self.round, env.tag)
        self.transcript.record(self.round, env, payload.to_bytes() if keeps else None,
                               payload.nbytes, payload.digest)  # fmt: skip
        return env

    def send(self, sender: str, receiver: str, tag: str, payload: Payload) -> Envelope:
        """Transmit one envelope."""
        return self.transmit([Envelope(sender, receiver, tag, payload)])[0]


def _no_clock() -> float:
    return 0.0


def _copy(payload: Payload) -> Payload:
    """Each receiver gets its own arrays and meta (a broadcast must not alias between
    receivers, nested lists of the meta included)."""
    return Payload(
        {k: v.copy() if hasattr(v, "copy") else v for k, v in payload.fields.items()},
        copy.deepcopy(payload.meta),
    )
