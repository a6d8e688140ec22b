"""The transcript: what every party received, so "what did the server see?" is a query.

Each entry records (round, sender, receiver, tag), the message family it belongs to and the
serialized size; the serialized payload itself is kept unless payload storage is switched
off (sizes are always counted). Attacks consume a :class:`PartyView`: the messages one
party received, decoded.

Message families (:data:`FAMILIES`), set by whoever drives the parties
(:meth:`Transcript.family_scope`): ``setup`` (keys, contexts, the initial model),
``structure`` (the graph's cross-client structure before training: FedStruct's Ā and NSFs,
FedGCN's neighbour sums, FedSage+'s neighbour generation), ``rounds`` (per-round model
traffic, the default) and ``evaluation`` (messages sent to evaluate a model).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from protocols.base import Envelope
from protocols.wire import Payload

SETUP, STRUCTURE, ROUNDS, EVALUATION = "setup", "structure", "rounds", "evaluation"
FAMILIES = (SETUP, STRUCTURE, ROUNDS, EVALUATION)


@dataclass(frozen=True)
class TranscriptEntry:
    """One envelope as the channel carried it: round, sender, receiver, tag, size, bytes."""

    round: int
    sender: str
    receiver: str
    tag: str
    nbytes: int
    data: bytes | None  # the serialized payload, None when storage is off
    family: str = ROUNDS  # the message family (module docstring)
    digest: str | None = None  # SHA-256 of the payload, where its bytes never came here

    def payload(self) -> Payload:
        if self.data is None:
            raise LookupError("payload storage was switched off for this transcript")
        return Payload.from_bytes(self.data)

    def envelope(self) -> Envelope:
        return Envelope(self.sender, self.receiver, self.tag, self.payload())


@dataclass(frozen=True)
class PartyView:
    """What one party received (its own data is held by the party itself)."""

    party: str
    entries: tuple[TranscriptEntry, ...]

    def messages(self, tag: str | None = None, round: int | None = None) -> Iterator[Envelope]:
        for e in self.entries:
            if (tag is None or e.tag == tag) and (round is None or e.round == round):
                yield e.envelope()

    def tags(self) -> set[str]:
        return {e.tag for e in self.entries}


class Transcript:
    """Append-only log of every message that crossed the channel."""

    def __init__(
        self,
        store_payloads: bool = True,
        payload_rounds: int | None = None,
        keep_tags: frozenset[str] = frozenset(),
    ) -> None:
        self.store_payloads = store_payloads
        self.payload_rounds = payload_rounds  # keep payloads only up to this round (None: all)
        self.keep_tags = frozenset(keep_tags)  # ... and these tags' payloads in every round
        self.entries: list[TranscriptEntry] = []
        self.family = ROUNDS  # the family of the entries recorded now

    @contextmanager
    def family_scope(self, family: str) -> Iterator[None]:
        """Record the messages sent inside the ``with`` block under ``family``."""
        if family not in FAMILIES:
            raise ValueError(f"message family must be one of {FAMILIES}, got {family!r}")
        previous, self.family = self.family, family
        try:
            yield
        finally:
            self.family = previous

    def record(
        self, round: int, envelope: Envelope, data: bytes | None,
        nbytes: int | None = None, digest: str | None = None,
    ) -> TranscriptEntry:  # fmt: skip
        """One envelope: its serialized payload (kept if :meth:`keeps`), or only its size
        and digest when the bytes stayed in other processes."""
        entry = TranscriptEntry(
            round,
            envelope.sender,
            envelope.receiver,
            envelope.tag,
            len(data) if nbytes is None and data is not None else int(nbytes or 0),
            data if data is not None and self.keeps(round, envelope.tag) else None,
            self.family,
            digest,
        )
        self.entries.append(entry)
        return entry

    def keeps(self, round: int, tag: str = "") -> bool:
        """Whether a payload of this round and tag is stored."""
        if not self.store_payloads:
            return False
        return self.payload_rounds is None or round <= self.payload_rounds or tag in self.keep_tags

    def view(self, party: str) -> PartyView:
        return PartyView(party, tuple(e for e in self.entries if e.receiver == party))

    def sent_by(self, party: str) -> list[TranscriptEntry]:
        return [e for e in self.entries if e.sender == party]

    def total_bytes(self, round: int | None = None) -> int:
        return sum(e.nbytes for e in self.entries if round is None or e.round == round)

    def bytes_by_family(self) -> dict[str, int]:
        """Bytes of every message family (each of :data:`FAMILIES`, 0 if none); they sum to
        :meth:`total_bytes`."""
        out = dict.fromkeys(FAMILIES, 0)
        for e in self.entries:
            out[e.family] = out.get(e.family, 0) + e.nbytes
        return out

    def bytes_by_direction(self, servers: Iterable[str], since: int = 0) -> dict[str, int]:
        """Bytes ``up`` (to a server), ``down`` (from one) and ``p2p`` in ``entries[since:]``."""
        servers = set(servers)
        out = {"up": 0, "down": 0, "p2p": 0}
        for e in self.entries[since:]:
            key = "up" if e.receiver in servers else "down" if e.sender in servers else "p2p"
            out[key] += e.nbytes
        return out

    def save(self, folder: str | Path) -> Path:
        """Write ``index.jsonl`` (one entry per line) and ``payloads.bin`` (concatenated),
        both mode 0600 like checkpoints (payloads are what the parties exchanged); a folder
        created here is 0700."""
        folder = Path(folder)
        if not folder.is_dir():
            folder.parent.mkdir(parents=True, exist_ok=True)
            folder.mkdir(mode=0o700)
        offset = 0
        with (
            _private(folder / "index.jsonl", "w") as index,
            _private(folder / "payloads.bin", "wb") as blob,
        ):
            for e in self.entries:
                stored = e.data is not None
                index.write(
                    json.dumps(
                        {
                            "round": e.round,
                            "sender": e.sender,
                            "receiver": e.receiver,
                            "tag": e.tag,
                            "nbytes": e.nbytes,
                            "family": e.family,
                            "digest": e.digest,
                            "offset": offset if stored else None,
                        }
                    )
                    + "\n"
                )
                if stored:
                    blob.write(e.data)
                    offset += e.nbytes
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> Transcript:
        folder = Path(folder)
        blob = (folder / "payloads.bin").read_bytes()
        transcript = cls()
        with open(folder / "index.jsonl") as index:
            for line in index:
                r = json.loads(line)
                data = (
                    None if r["offset"] is None else blob[r["offset"] : r["offset"] + r["nbytes"]]
                )
                transcript.entries.append(
                    TranscriptEntry(
                        r["round"], r["sender"], r["receiver"], r["tag"], r["nbytes"], data,
                        r.get("family", ROUNDS), r.get("digest"),
                    )
                )
        transcript.store_payloads = all(e.data is not None for e in transcript.entries)
        return transcript


def _private(path: Path, mode: str) -> IO[Any]:
    """Open ``path`` for writing with permissions 0600 (also when it already exists)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, mode)
