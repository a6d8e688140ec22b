"""Executors run party methods. The local executor calls them in turn in this process.

The interface only passes party ids, method names and wire-serializable arguments
(envelopes, ints), so a Ray executor can hold the parties as remote actors.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from protocols.base import Envelope

Call = tuple[str, str, tuple[Any, ...]]  # (party id, method, arguments)
ENTRY = ("protocol_phase",)  # how a party runs a protocol phase: party.protocol_phase(m, inbox)


class Executor(ABC):
    @abstractmethod
    def call(self, calls: Sequence[Call]) -> list[Any]:
        """Run each ``party.method(*args)``; results in ``calls`` order."""

    def map(self, party_ids: Sequence[str], method: str, *args: Any) -> list[Any]:
        """The same call on several parties."""
        return self.call([(pid, method, args) for pid in party_ids])

    def invoke(
        self, party_id: str, method: str, inbox: list[Envelope], entry: Sequence[str] = ENTRY
    ) -> list[Envelope]:
        """One protocol phase on one party (the ``Invoke`` hook of protocols.run_phases).

        Parties expose ``protocol_phase(method, inbox)`` (or ``entry[0](*entry[1:], method,
        inbox)``), which runs the phase on the protocol state they hold.
        """
        return self.call([(party_id, entry[0], (*entry[1:], method, inbox))])[0]


class LocalExecutor(Executor):
    """Runs the calls of a batch one after another.

    :attr:`overlap_seconds` accumulates the time that parties on separate machines would
    have run concurrently: per :meth:`call` batch, and per protocol phase (consecutive
    :meth:`invoke` of one method on distinct parties, as ``protocols.run_phases`` issues
    them), the sum minus the max of the call times. A run's wall time minus it estimates
    the parallel critical path (network time excluded).
    """

    def __init__(
        self, parties: Mapping[str, Any], clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.parties = dict(parties)
        self.clock = clock  # e.g. time.process_time: CPU time, immune to other jobs' load
        self._overlap = 0.0
        self._phase: tuple[str, set[str], float, float] | None = None  # method, ids, sum, max

    @property
    def overlap_seconds(self) -> float:
        return self._overlap + (self._phase[2] - self._phase[3] if self._phase else 0.0)

    def _close_phase(self) -> None:
        if self._phase is not None:
            self._overlap += self._phase[2] - self._phase[3]
            self._phase = None

    def _timed(self, pid: str, method: str, args: tuple[Any, ...]) -> tuple[Any, float]:
        t = self.clock()
        out = getattr(self.parties[pid], method)(*args)
        return out, self.clock() - t

    def call(self, calls: Sequence[Call]) -> list[Any]:
        self._close_phase()
        out, longest, total = [], 0.0, 0.0
        for pid, method, args in calls:
            result, dt = self._timed(pid, method, args)
            out.append(result)
            longest, total = max(longest, dt), total + dt
        self._overlap += total - longest
        return out

    def invoke(
        self, party_id: str, method: str, inbox: list[Envelope], entry: Sequence[str] = ENTRY
    ) -> list[Envelope]:
        phase = self._phase
        if phase is None or phase[0] != method or party_id in phase[1]:
            self._close_phase()
            phase = (method, set(), 0.0, 0.0)
        out, dt = self._timed(party_id, entry[0], (*entry[1:], method, inbox))
        phase[1].add(party_id)
        self._phase = (method, phase[1], phase[2] + dt, max(phase[3], dt))
        return out
