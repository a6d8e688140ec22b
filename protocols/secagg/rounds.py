"""The public side of a SecAgg round: parameters, mask graph and threshold.

Every party computes the same :class:`RoundInfo` from public data: the federation's
:class:`SecAggConfig`, the round index and the participant list. SecAgg masks along the
complete graph (Bonawitz et al. 2017); SecAgg+ along the Harary graph H_{k,n} (Bell et al.
2020): clients on a ring ordered by SHA-256(experiment id, round, client), each linked to the
k/2 nearest on either side. The graph is public and predictable (see the package docstring
for what that means for corruptions).

Thresholds: every t must exceed half of the share holders h (t > h/2, so at most
ceil(h/2) - 1 holders may drop). With t <= h/2 a server that sends different dropout lists
to two halves of the holders could collect t shares of both the self-mask seed and the mask
key of one client and unmask its input (Bonawitz et al. 2017, Sec. 4: t > n/2 against an
active server); such thresholds are refused. Deviation: the default degree
k = 2 ceil(log2 n) and threshold t = floor(h/2) + 1 are heuristics, not Bell et al.'s
derivation from the corrupt and dropout fractions.

Minimum cohort: the participant list is the server's choice, so every party refuses a list
shorter than ``SecAggConfig.min_cohort`` (a public parameter of the experiment, never taken
from a server message), and every round's threshold is at least ``threshold_floor``, the
threshold of a round of exactly ``min_cohort`` clients: it never falls with the server's
list. A client unmasks only when at least t of its share holders survive, so every sum the
server can unmask holds at least ``threshold_floor`` inputs (for SecAgg+, every connected
part of the survivors on the ring does).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from protocols.base import ProtocolError
from protocols.fixedpoint import FixedPointCodec


@dataclass(frozen=True)
class SecAggConfig:
    """Public parameters every party of a federation agrees on.

    ``codec``: the ring Z_2^w of the masked values (w = 32 or 64 bits: the width of every
    masked word on the wire and of every mask) and its fixed-point encoding; both are bound
    into every derived key and signed statement (:attr:`ring`), so parties that disagree on
    them never combine masks read at different widths.
    """

    experiment_id: str
    codec: FixedPointCodec
    k: int | None = None  # None: complete graph (SecAgg)
    threshold: int | float | None = None
    threat_model: str = "honest-but-curious"  # or "malicious" (signed keys, consistency)
    #: the smallest participant list any party accepts (from the experiment, not the server)
    min_cohort: int = 2

    @property
    def malicious(self) -> bool:
        return self.threat_model == "malicious"

    @property
    def threshold_floor(self) -> int:
        """The threshold of a round of exactly ``min_cohort`` clients: no round goes below it,
        so no sum the server unmasks holds fewer inputs (:func:`resolve_threshold`; an
        integer threshold is its own floor)."""
        if isinstance(self.threshold, int):
            return self.threshold
        return resolve_threshold(self.threshold, holders_for(self.k, max(self.min_cohort, 2)))

    @property
    def ring(self) -> str:
        """The ring and encoding as bound into keys and statements, e.g. ``Z_2^32/f22``."""
        return f"Z_2^{self.codec.word_bits}/f{self.codec.frac_bits}"

    def context(self, round_idx: int, step: str, *parts: str) -> bytes:
        """HKDF info / AEAD associated data: experiment, ring, round, protocol step, parties."""
        return json.dumps(
            ["securefgl/secagg/v1", self.experiment_id, self.ring, round_idx, step, *parts],
            separators=(",", ":"),
        ).encode()

    def pair_context(self, round_idx: int, step: str, a: str, b: str) -> bytes:
        return self.context(round_idx, step, *sorted((a, b)))


def default_degree(n: int) -> int:
    """SecAgg+ default neighbourhood size: 2 ceil(log2 n) (even, O(log n))."""
    return 2 * max(1, math.ceil(math.log2(max(n, 2))))


def holders_for(k: int | None, participants: int) -> int:
    """Share holders per client in a round of ``participants`` clients (as :class:`MaskGraph`:
    everyone for SecAgg or when k >= n - 1, else the client and its k neighbours)."""
    return participants if k is None or k >= participants - 1 else k + 1


def min_threshold(holders: int) -> int:
    """The smallest admissible Shamir threshold for ``holders`` share holders: floor(h/2) + 1
    (t > h/2; Bonawitz et al. 2017)."""
    return holders // 2 + 1


def check_fraction(threshold: float) -> None:
    """A fractional threshold must lie in (1/2, 1]: ceil(f h) > h/2 for every h only then."""
    if not 0.5 < threshold <= 1:
        raise ValueError(
            f"a fractional secagg threshold must be in (0.5, 1] (t > n/2 of the share "
            f"holders), got {threshold}"
        )


def check_threshold(t: int, holders: int) -> None:
    """Refuse ``t <= holders / 2`` with a :class:`ValueError` naming the minimum."""
    if 2 * t <= holders:
        raise ValueError(
            f"secagg threshold t={t} is at most half of the {holders} share holders: a server "
            "that sends different dropout lists to different clients could collect both the "
            "self-mask and the mask-key shares of one client; the minimum is "
            f"t={min_threshold(holders)} (t > n/2)"
        )


def resolve_threshold(threshold: int | float | None, holders: int) -> int:
    """Shamir threshold for ``holders`` share holders (the client and its neighbours).

    ``None`` = floor(h/2) + 1 (the minimum); a float in (1/2, 1] = that fraction of h
    (rounded up, at least 2); an int as is. Raises :class:`ValueError` when t <= h/2 (an
    active server lying about dropouts could unmask a client; the message names the
    minimum) and :class:`ProtocolError` when t > h (too few holders in this round). The
    dropout tolerance is then h - t < h/2 holders per neighbourhood.
    """
    if threshold is None:
        t = min_threshold(holders)
    elif isinstance(threshold, float):
        check_fraction(threshold)
        t = max(2, math.ceil(threshold * holders))
    else:
        t = threshold
    check_threshold(t, holders)
    if t > holders:
        raise ProtocolError(
            f"secagg threshold {t} exceeds the {holders} share holders of a neighbourhood"
        )
    return t


class MaskGraph:
    """Who masks with (and holds shares of) whom in one round.

    Complete graph for SecAgg; for SecAgg+ the Harary graph H_{k,n}: clients on a ring in a
    pseudorandom order, each linked to the k/2 nearest on either side (Bell et al. 2020).
    """

    def __init__(self, participants: Sequence[str], k: int | None, seed: bytes) -> None:
        self.participants = tuple(participants)
        n = len(self.participants)
        self.complete = k is None or k >= n - 1
        self.degree = n - 1 if k is None or self.complete else int(k)
        order = sorted(self.participants, key=lambda c: hashlib.sha256(seed + c.encode()).digest())
        self._ring = order
        self._pos = {c: i for i, c in enumerate(order)}

    @property
    def holders_per_client(self) -> int:
        return self.degree + 1

    def distance(self, a: str, b: str) -> int:
        """Ring distance between two participants (0 for the complete graph's members)."""
        if self.complete:
            return 0
        n, gap = len(self._ring), abs(self._pos[a] - self._pos[b])
        return min(gap, n - gap)

    def neighbours(self, cid: str) -> tuple[str, ...]:
        if self.complete:
            return tuple(c for c in self.participants if c != cid)
        n, i, half = len(self._ring), self._pos[cid], self.degree // 2
        return tuple(self._ring[(i + off) % n] for off in range(-half, half + 1) if off)


@dataclass(frozen=True)
class RoundInfo:
    """Everything public about one round, computed identically by every party."""

    round_idx: int
    graph: MaskGraph
    t: int
    x: dict[str, int]  # Shamir x-coordinate of each participant

    @classmethod
    def build(cls, config: SecAggConfig, round_idx: int, participants: Sequence[str]) -> RoundInfo:
        ids = list(participants)
        if not all(isinstance(c, str) for c in ids) or len(set(ids)) != len(ids):
            raise ProtocolError("secagg: participants must be distinct string ids")
        if len(ids) < 2:
            raise ProtocolError(f"secagg needs at least 2 participants, got {len(ids)}")
        if len(ids) < config.min_cohort:
            raise ProtocolError(
                f"secagg: {len(ids)} participants, below the minimum cohort of "
                f"{config.min_cohort} that every client enforces (a server that chose small "
                "cohorts would learn sums of a few clients)"
            )
        seed = hashlib.sha256(config.context(round_idx, "graph")).digest()
        graph = MaskGraph(ids, config.k, seed)
        h = graph.holders_per_client
        t = max(resolve_threshold(config.threshold, h), config.threshold_floor)
        if t > h:
            raise ProtocolError(
                f"secagg threshold {t} (never below the minimum cohort's) exceeds the {h} "
                "share holders of a neighbourhood"
            )
        return cls(round_idx, graph, t, {c: i + 1 for i, c in enumerate(sorted(ids))})
