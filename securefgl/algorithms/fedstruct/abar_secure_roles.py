"""The parties' sides of FedStruct's secure hop sums (Algorithm 3 over hosted secure sums):
client ``i``'s (:class:`SecureHops`, a mix-in of its Ā builder) and the relaying server's
union of the senders' supports (:class:`UnionRelay`). Each holds only its own party's
state; :mod:`~securefgl.algorithms.fedstruct.abar_secure` runs them hop by hop.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Literal

import numpy as np
import scipy.sparse as sp

from protocols.base import Envelope, Inbox, ProtocolError
from protocols.bundles import bundle, unbundle
from protocols.fixedpoint import FixedPointOverflowError
from protocols.secure_sum import SumRequest, Support
from protocols.wire import Payload
from securefgl.federation.hosted_sums import HostedSum

logger = logging.getLogger(__name__)

PATTERN_TAG = "fedstruct/abar/pattern"  # sender -> server: every supp(B_ik), one bundle ("union")
UNION_TAG = "fedstruct/abar/union"  # server -> receiver: U_i
SUPPORTS = ("rows", "union")
SupportKind = Literal["rows", "union"]

def check_support(support: str) -> SupportKind:
    if support not in SUPPORTS:
        raise ValueError(f"support must be one of {SUPPORTS}, got {support!r}")
    return support  # type: ignore[return-value]


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique`` for int64 (sort + mask: faster than numpy's hash-based unique)."""
    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if a.size else a


class SecureHops(ABC):
    """Client ``i``'s side of the secure hop sums, a mix-in of
    :class:`~securefgl.algorithms.fedstruct.abar_client.AdjacencyClient`: its hosted sums
    (:class:`~securefgl.federation.hosted_sums.HostedSum`) and, per hop, its own blocks
    ``B_ik`` and its request for ``Σ_{k≠i} B_ik``. Holds only that client's state."""

    party_id: str
    num_nodes: int
    num_global_nodes: int
    sums: HostedSum
    hop_support: SupportKind = "rows"
    noise_floor: float = 0.0
    _sum_hop: int = 0
    _sum_round: int = -1

    @property
    @abstractmethod
    def neighbours(self) -> list[str]: ...

    @abstractmethod
    def global_contributions(self, hop: int) -> dict[str, sp.coo_array]: ...

    @abstractmethod
    def boundary_rows(self) -> np.ndarray: ...

    @abstractmethod
    def boundary_degree_peak(self) -> float: ...

    @abstractmethod
    def complete_hop(self, hop: int, remote_sum: sp.spmatrix | sp.sparray) -> None: ...

    @abstractmethod
    def complete_hop_global(self, hop: int, total: sp.spmatrix | sp.sparray) -> None: ...

    def configure_secure_hops(self, support: str, noise_floor: float = 0.0) -> None:
        """The public support of the sums (``rows`` or ``union``) and the value below which
        a received entry is encoding noise (CKKS)."""
        self.hop_support = check_support(support)
        self.noise_floor = float(noise_floor)

    def prepare_secure_hop(self, hop: int, round_idx: int) -> list[Envelope]:
        """Hand every ``B_ik`` (``[n, n]``, opaque rows) to the hosted sums. With ``"union"``
        support also returns every ``supp(B_ik)`` for the server, in one bundle."""
        n, server = self.num_global_nodes, self.sums.client.server_id
        self._sum_hop, self._sum_round = hop, round_idx
        patterns = {}
        for receiver, total in self.global_contributions(hop).items():
            self.sums.client.add_contribution(receiver, total)  # canonical: flat ids sorted
            if self.hop_support == "union":
                pattern = Support((n, n), flat=total.row * n + total.col)  # sorted, unique
                patterns[receiver] = Payload(pattern.to_fields(), {})
        if not patterns:
            return []
        payload = bundle(patterns, hop=hop, round=round_idx, n=n)
        return [Envelope(self.party_id, server, PATTERN_TAG, payload)]

    def expect_secure_hop(self, hop: int, inbox: Inbox) -> int:
        """Announce this client's own sum (senders = its neighbouring clients) on the public
        support; returns the number of senders (0: no sum, 1: the "sum" is one block)."""
        n, server = self.num_global_nodes, self.sums.client.server_id
        if hop != self._sum_hop:
            raise ProtocolError(f"{self.party_id}: expect for hop {hop}, prepared {self._sum_hop}")
        senders = tuple(self.neighbours)
        if self.hop_support == "rows" or not senders:
            if inbox:
                raise ProtocolError(f"{self.party_id}: unexpected {[e.tag for e in inbox]}")
            support = Support.product((n, n), rows=self.boundary_rows()) if senders else None
        else:
            if len(inbox) != 1 or inbox[0].sender != server or inbox[0].tag != UNION_TAG:
                raise ProtocolError(f"{self.party_id}: expected one union support from the server")
            meta = inbox[0].payload.meta
            if meta.get("hop") != hop or meta.get("round") != self._sum_round:
                raise ProtocolError(f"{self.party_id}: union support is for another hop/round")
            if meta.get("senders") != sorted(senders):
                raise ProtocolError(f"{self.party_id}: union is not over my neighbouring clients")
            support = Support.from_fields((n, n), inbox[0].payload)
            if support is None or support.rows is not None:
                raise ProtocolError(f"{self.party_id}: the union support must be a pattern")
        if senders:
            self._check_sum_bound(hop)
            self.sums.client.expect_sum(SumRequest(senders, (n, n), support, sparse_result=True))
        if len(senders) == 1:  # the orchestrator warns once per hop for all such receivers
            logger.info(
                "%s: one neighbouring client (%s): its secure 'sum' at hop %d is that "
                "client's block B_ik itself (hidden from the server only)",
                self.party_id, senders[0], hop,
            )  # fmt: skip
        return len(senders)

    def _check_sum_bound(self, hop: int) -> None:
        """With ``MaskedSum(sum_bound=D)`` the sum must stay within ``D`` entrywise: entries of
        ``Σ_k B_ik`` in row ``v`` are at most ``D̃_vv`` (:class:`~.abar_secure.MaskedHopSum`),
        which only this receiver knows. Checked before it requests anything: the build aborts before
        any value has left any client."""
        peak = self.boundary_degree_peak()
        bound = getattr(self.sums.protocol, "sum_bound", None)
        if bound is not None and peak > bound:
            raise FixedPointOverflowError(
                f"{self.party_id}: a boundary node of degree {peak:g} exceeds the masked "
                f"ring's public degree_bound {bound:g} at hop {hop}: raise "
                "degree_bound (coarser fixed point) or use word_bits=64"
            )

    def finish_secure_hop(self, hop: int) -> int:
        """Complete the hop from the received sum; returns ``nnz`` of that sum."""
        if hop != self._sum_hop:
            raise ProtocolError(f"{self.party_id}: finish for hop {hop}, prepared {self._sum_hop}")
        result = self.sums.client.result()
        if result is None:  # no neighbouring client: nothing to receive
            if self.neighbours:
                raise ProtocolError(f"{self.party_id}: no secure sum arrived at hop {hop}")
            self.complete_hop(hop, sp.csr_matrix((self.num_nodes, self.num_global_nodes)))
            return 0
        total = sp.csr_matrix(result.total, dtype=np.float64)
        # the true sum is >= 0 entrywise; below the floor is encoding noise (CKKS)
        total.data[total.data <= self.noise_floor] = 0.0
        total.eliminate_zeros()
        self.complete_hop_global(hop, total)
        return int(total.nnz)


class UnionRelay:
    """The server's side for ``"union"`` support, a mix-in of the relay party: the union of
    the senders' patterns per receiver (it sees every individual pattern)."""

    party_id: str
    clients: frozenset[str]
    _union_round: int = -1

    def union(self, hop: int, round_idx: int, inbox: Inbox) -> list[Envelope]:
        """``U_i = ∪_k supp(B_ik)`` to every receiver ``i`` that some sender named."""
        self._union_round = round_idx
        parts: dict[str, dict[str, np.ndarray]] = {}
        sizes: set[int] = set()
        for env in inbox:
            meta, k = env.payload.meta, env.sender
            n = meta.get("n")
            if (
                env.tag != PATTERN_TAG
                or k not in self.clients
                or meta.get("hop") != hop
                or meta.get("round") != self._union_round
                or not isinstance(n, int)
            ):
                raise ProtocolError(f"{self.party_id}: unexpected {env.tag!r} from {k!r}")
            for r, part in unbundle(env.payload, self.party_id).items():
                if r not in self.clients or r == k:
                    raise ProtocolError(f"{self.party_id}: a pattern from {k!r} for {r!r}")
                try:
                    pattern = Support.from_fields((n, n), part)
                except ProtocolError as err:
                    raise ProtocolError(f"{self.party_id}: bad pattern from {k!r}: {err}") from err
                if pattern is None or pattern.rows is not None:
                    raise ProtocolError(f"{self.party_id}: the pattern from {k!r} is not a pattern")
                if k in parts.setdefault(r, {}):
                    raise ProtocolError(f"{self.party_id}: two patterns from {k!r} for {r!r}")
                parts[r][k] = pattern.index
            sizes.add(n)
        if len(sizes) > 1:
            raise ProtocolError(f"{self.party_id}: senders disagree on n: {sorted(sizes)}")
        out = []
        for r, by_sender in parts.items():
            (n,) = sizes
            union = sorted_unique(np.concatenate(list(by_sender.values())))
            fields = Support((n, n), flat=union).to_fields()
            meta = {"hop": hop, "round": self._union_round, "senders": sorted(by_sender)}
            out.append(Envelope(self.party_id, r, UNION_TAG, Payload(fields, meta)))
        return out
