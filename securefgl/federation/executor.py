"""Executors run calls on parties. The local executor runs them in turn in this process.

The interface passes only :class:`~securefgl.federation.party.Call` s: a party id, a
sub-party name, a method name and wire-serialisable arguments (envelopes, arrays, numbers),
so an executor can hold the parties in other processes or machines. Parties are given as
built objects or as :class:`~securefgl.federation.recipes.Recipe` s (built where they live).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from protocols.base import Envelope, Inbox, Invoke
from securefgl.federation.party import Call, Party, PartyError, check_wire_value
from securefgl.federation.recipes import Recipe, build


class Executor(ABC):
    @abstractmethod
    def call(self, calls: Sequence[Call]) -> list[Any]:
        """Run each call; results in ``calls`` order."""

    #: parties that went silent (their process died or did not answer in time)
    silent: frozenset[str] = frozenset()

    def call_survivors(self, calls: Sequence[Call]) -> list[Any | None]:
        """As :meth:`call`, but a party that goes silent gives ``None`` (and joins
        :attr:`silent`) instead of failing the batch. In-process parties never do."""
        return self.call(calls)

    def held(self, party_id: str) -> Party | None:
        """The party object if it lives in this process (attacks and tests read it), else
        None."""
        return None

    def shutdown(self) -> None:  # noqa: B027 - nothing to release for in-process parties
        """Release remote workers (nothing for parties in this process)."""

    def map(self, party_ids: Sequence[str], sub: str, method: str, *args: Any) -> list[Any]:
        """The same call on several parties."""
        return self.call([Call(pid, sub, method, args) for pid in party_ids])

    def invoke(self, party_id: str, sub: str, method: str, inbox: Inbox) -> list[Envelope]:
        """One protocol phase: ``method(inbox)`` on the sub-party ``sub``."""
        return self.call([Call(party_id, sub, method, (inbox,))])[0]

    def phases(self, sub: str) -> Invoke:
        """The ``invoke`` hook of :func:`protocols.base.run_phases` for sub-party ``sub``."""

        def invoke(party_id: str, method: str, inbox: Inbox) -> list[Envelope]:
            return self.invoke(party_id, sub, method, inbox)

        def batch(method: str, requests: list[tuple[str, Inbox]]) -> list[list[Envelope] | None]:
            return self.call_survivors(
                [Call(pid, sub, method, (inbox,)) for pid, inbox in requests]
            )

        invoke.batch = batch  # type: ignore[attr-defined]  # a phase's parties together
        return invoke


class LocalExecutor(Executor):
    """Runs the calls of a batch one after another.

    Every argument is checked to be wire-serialisable, as a remote executor would need.
    :attr:`overlap_seconds` accumulates the time that parties on separate machines would
    have run concurrently: per :meth:`call` batch, and per protocol phase (consecutive
    :meth:`invoke` of one method on distinct parties, as ``protocols.run_phases`` issues
    them), the sum minus the max of the call times. A run's wall time minus it estimates
    the parallel critical path (network time excluded).

    Per-call accounting: :attr:`seconds_by_call` sums the clock seconds of every call per
    ``(party, sub-party, method)``, :attr:`wall_seconds_by_call` the same in wall-clock
    seconds (equal when ``clock`` is ``time.perf_counter``); :meth:`seconds_by_party` sums
    either over a party's calls.
    """

    def __init__(
        self,
        parties: Mapping[str, Party | Recipe],
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        built = {pid: build(p) if isinstance(p, Recipe) else p for pid, p in parties.items()}
        for pid, party in built.items():
            if not isinstance(party, Party):
                raise TypeError(f"party {pid!r} is a {type(party).__name__}, not a Party")
        self.parties = built
        self.clock = clock  # e.g. time.process_time: CPU time, immune to other jobs' load
        self._overlap = 0.0
        self._phase: tuple[tuple[str, str], set[str], float, float] | None = None
        self.seconds_by_call: defaultdict[tuple[str, str, str], float] = defaultdict(float)
        self.wall_seconds_by_call: defaultdict[tuple[str, str, str], float] = defaultdict(float)

    @property
    def overlap_seconds(self) -> float:
        return self._overlap + (self._phase[2] - self._phase[3] if self._phase else 0.0)

    def seconds_by_party(self, wall: bool = False) -> dict[str, float]:
        """Seconds of each party's calls (the executor's clock, or wall-clock seconds)."""
        table = self.wall_seconds_by_call if wall else self.seconds_by_call
        out: defaultdict[str, float] = defaultdict(float)
        for (pid, _, _), dt in table.items():
            out[pid] += dt
        return dict(out)

    def held(self, party_id: str) -> Party | None:
        return self.parties.get(party_id)

    def _close_phase(self) -> None:
        if self._phase is not None:
            self._overlap += self._phase[2] - self._phase[3]
            self._phase = None

    def _timed(self, call: Call) -> tuple[Any, float]:
        pid, sub, method, args = call
        where = f"{pid}.{sub}.{method}"
        if pid not in self.parties:
            raise PartyError(f"no party {pid!r} in this executor")
        if method.startswith("_"):
            raise PartyError(f"{where}: private methods cannot be called")
        check_wire_value(args, f"{where} arguments")
        fn = getattr(self.parties[pid].sub(sub), method, None)
        if not callable(fn):
            raise PartyError(f"{where}: no such method")
        t, wall = self.clock(), time.perf_counter()
        out = fn(*args)
        dt = self.clock() - t
        self.seconds_by_call[pid, sub, method] += dt
        self.wall_seconds_by_call[pid, sub, method] += time.perf_counter() - wall
        return out, dt

    def call(self, calls: Sequence[Call]) -> list[Any]:
        self._close_phase()
        out, longest, total = [], 0.0, 0.0
        for call in calls:
            result, dt = self._timed(call)
            out.append(result)
            longest, total = max(longest, dt), total + dt
        self._overlap += total - longest
        return out

    def invoke(self, party_id: str, sub: str, method: str, inbox: Inbox) -> list[Envelope]:
        phase, key = self._phase, (sub, method)
        if phase is None or phase[0] != key or party_id in phase[1]:
            self._close_phase()
            phase = (key, set(), 0.0, 0.0)
        out, dt = self._timed(Call(party_id, sub, method, (inbox,)))
        phase[1].add(party_id)
        self._phase = (key, phase[1], phase[2] + dt, max(phase[3], dt))
        return out
