"""Executors run calls on parties. The local executor runs them in turn in this process.

The interface passes only :class:`~securefgl.federation.party.Call` s: a party id, a
method by reference (:class:`~securefgl.federation.party.Target`) and wire-serialisable
arguments (envelopes, arrays, numbers), so an executor can hold the parties in other
processes or machines. Parties are given as built objects or as
:class:`~securefgl.federation.recipes.Recipe` s (built where they live).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from protocols.base import Envelope, Inbox, ProtocolParty
from securefgl.federation.party import Call, Party, PartyError, Target, check_wire_value
from securefgl.federation.recipes import Recipe, build

P = ParamSpec("P")
R = TypeVar("R")


class PhasedProtocol(Protocol):
    """What :meth:`Executor.phases` needs of a protocol: its parties' role interfaces."""

    party_types: tuple[type[ProtocolParty], ...]


class Executor(ABC):
    """Runs :class:`~securefgl.federation.party.Call` s on parties, wherever they live."""

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

    def map(
        self,
        party_ids: Sequence[str],
        method: Callable[Concatenate[Any, P], R],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> list[R]:
        """The same method (given as ``Class.method``) on several parties."""
        target = Target.of(method)
        return self.call([Call(pid, target, tuple(args), dict(kwargs)) for pid in party_ids])

    def invoke(self, party_id: str, target: Target[Any], inbox: Inbox) -> list[Envelope]:
        """One protocol phase: ``target(inbox)`` on ``party_id``."""
        return self.call([Call(party_id, target, (inbox,))])[0]

    def phases(self, protocol: PhasedProtocol) -> PhaseCalls:
        """The ``invoke`` hook of :func:`protocols.base.run_phases` for ``protocol``: each
        phase runs on the party's role that is one of ``protocol.party_types``."""
        return PhaseCalls(self, tuple(protocol.party_types))


@dataclass(frozen=True)
class PhaseCalls:
    """Protocol phases as calls: one party (``__call__``) or a phase's parties together
    (``batch``, which an executor may run in parallel; None for a party gone silent)."""

    executor: Executor
    types: tuple[type, ...]  # the protocol's party types, or a role that answers its phases

    def __call__(self, party_id: str, method: str, inbox: Inbox) -> list[Envelope]:
        return self.executor.invoke(party_id, Target.phase(method, self.types), inbox)

    def batch(self, method: str, requests: list[tuple[str, Inbox]]) -> list[list[Envelope] | None]:
        target = Target.phase(method, self.types)
        return self.executor.call_survivors([Call(p, target, (box,)) for p, box in requests])


class LocalExecutor(Executor):
    """Runs the calls of a batch one after another.

    Every argument is checked to be wire-serialisable, as a remote executor would need.
    :attr:`overlap_seconds` accumulates the time that parties on separate machines would
    have run concurrently: per :meth:`call` batch, and per protocol phase (consecutive
    :meth:`invoke` of one method on distinct parties, as ``protocols.run_phases`` issues
    them), the sum minus the max of the call times. A run's wall time minus it estimates
    the parallel critical path (network time excluded).

    Per-call accounting: :attr:`seconds_by_call` sums the clock seconds of every call per
    ``(party, role interface, method)``, :attr:`wall_seconds_by_call` the same in wall-clock
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
        self._phase: tuple[Target[Any], set[str], float, float] | None = None
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
        pid, target, args, kwargs = call
        if pid not in self.parties:
            raise PartyError(f"no party {pid!r} in this executor")
        check_wire_value([args, kwargs], f"{call.label} arguments")
        fn = target.bind(self.parties[pid])
        t, wall = self.clock(), time.perf_counter()
        out = fn(*args, **kwargs)
        dt = self.clock() - t
        key = (pid, *target.label.rsplit(".", 1))
        self.seconds_by_call[key] += dt  # type: ignore[index]
        self.wall_seconds_by_call[key] += time.perf_counter() - wall  # type: ignore[index]
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

    def invoke(self, party_id: str, target: Target[Any], inbox: Inbox) -> list[Envelope]:
        phase = self._phase
        if phase is None or phase[0] != target or party_id in phase[1]:
            self._close_phase()
            phase = (target, set(), 0.0, 0.0)
        out, dt = self._timed(Call(party_id, target, (inbox,)))
        phase[1].add(party_id)
        self._phase = (target, phase[1], phase[2] + dt, max(phase[3], dt))
        return out
