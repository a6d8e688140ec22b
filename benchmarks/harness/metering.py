"""One measured run: parties behind a :class:`~securefgl.federation.LocalExecutor` and a
:class:`~securefgl.federation.Channel`.

Time comes from the executor (its clock, CPU seconds by default, per party and call, plus
wall seconds), bytes from the channel's transcript (sizes only, no payloads kept): there is
no second meter beside the federation runtime's own.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

from protocols.base import Envelope
from securefgl.federation import Channel, LocalExecutor, Party, Transcript, TranscriptEntry


def bytes_by_party(
    entries: Iterable[TranscriptEntry],
) -> tuple[dict[str, int], dict[str, int]]:
    """(bytes sent per sender, bytes received per receiver) over transcript ``entries``."""
    sent: defaultdict[str, int] = defaultdict(int)
    received: defaultdict[str, int] = defaultdict(int)
    for e in entries:
        sent[e.sender] += e.nbytes
        received[e.receiver] += e.nbytes
    return dict(sent), dict(received)


class MeteredRun:
    """An executor (``clock``: CPU seconds by default) and a size-only channel."""

    def __init__(
        self, parties: Mapping[str, Party], clock: Callable[[], float] = time.process_time
    ) -> None:
        self.executor = LocalExecutor(parties, clock=clock)
        self.channel = Channel(Transcript(store_payloads=False), clock=clock)
        self.transport_seconds = 0.0  # wall seconds inside transmit (serialisation)

    @property
    def entries(self) -> list[TranscriptEntry]:
        return self.channel.transcript.entries

    def transmit(self, envelopes: list[Envelope]) -> list[Envelope]:
        """``channel.transmit`` one envelope at a time (one serialized copy in flight, not
        a whole phase's), timing the serialisation apart from the parties' work."""
        start = time.perf_counter()
        out: list[Envelope] = []
        for env in envelopes:
            out.extend(self.channel.transmit([env]))
        self.transport_seconds += time.perf_counter() - start
        return out

    def seconds(self, wall: bool = False) -> dict[str, float]:
        """Seconds per party (the executor's clock, or wall clock)."""
        return self.executor.seconds_by_party(wall)

    def bytes(self) -> tuple[dict[str, int], dict[str, int]]:
        """(bytes sent per sender, bytes received per receiver) so far."""
        return bytes_by_party(self.entries)
