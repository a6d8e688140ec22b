"""Executors run party methods. The local executor calls them in turn in this process.

The interface only passes party ids, method names and wire-serializable arguments
(envelopes, ints), so a Ray executor can hold the parties as remote actors.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from protocols.base import Envelope

Call = tuple[str, str, tuple[Any, ...]]  # (party id, method, arguments)


class Executor(ABC):
    @abstractmethod
    def call(self, calls: Sequence[Call]) -> list[Any]:
        """Run each ``party.method(*args)``; results in ``calls`` order."""

    def map(self, party_ids: Sequence[str], method: str, *args: Any) -> list[Any]:
        """The same call on several parties."""
        return self.call([(pid, method, args) for pid in party_ids])

    def invoke(self, party_id: str, method: str, inbox: list[Envelope]) -> list[Envelope]:
        """One protocol phase on one party (the ``Invoke`` hook of protocols.run_phases).

        Parties expose ``protocol_phase(method, inbox)``, which runs the phase on the
        protocol state they hold.
        """
        return self.call([(party_id, "protocol_phase", (method, inbox))])[0]


class LocalExecutor(Executor):
    def __init__(self, parties: Mapping[str, Any]) -> None:
        self.parties = dict(parties)

    def call(self, calls: Sequence[Call]) -> list[Any]:
        return [getattr(self.parties[pid], method)(*args) for pid, method, args in calls]
