"""Secure hop sums for FedStruct's federated Ā: Algorithm 3 over hosted secure sums.

At every hop client ``i`` needs only ``Σ_{k≠i} B_ik`` (FedStruct, Aliakbari et al. 2025,
App. D, Eq. 36), yet the paper's exchange (:class:`PlainHopSum`) hands it, and a relaying
server, every ``B_ik``. :class:`SecureHopSum` runs one batch of hosted secure sums per hop
instead (:class:`~securefgl.federation.secure_sums.SecureSumDriver`): receiver ``i``'s
senders are its neighbouring clients, shape ``(n, n)`` (rows: opaque ids); ``B_ii`` never
leaves ``i``. ``masked``: the server learns nothing, ``i`` only the sum; ``ckks``: under
``i``'s key, broken by a server colluding with ``i``.

Public coordinates: ``support="rows"`` (``i``'s boundary nodes × all columns: the server and
``i``'s senders learn the boundary nodes; pruning saves no bytes) or ``"union"`` (the union
of the senders' supports: the server learns each sender's support, never a value). A
receiver with one neighbouring client would learn that client's block: refused by default
(``min_senders=2``; ``min_senders=1`` allows it, counted per hop). In full:
``docs/algorithms/fedstruct.md``.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import scipy.sparse as sp

from protocols.base import Envelope, Inbox, ProtocolError
from protocols.fixedpoint import FixedPointOverflowError
from protocols.secure_sum import CKKSSum, SecureSumClient, SecureSumServer, SumRequest, Support
from protocols.wire import Payload
from securefgl.algorithms.fedstruct.abar_build import (
    ABAR,
    RELAY,
    SECURE_HOP,
    HopContext,
    HopSum,
    PlainHopSum,
)
from securefgl.federation import Call
from securefgl.federation.secure_sums import SecureSumDriver, SumSpec, hosted_state

if TYPE_CHECKING:
    from protocols.ckks import CKKSParams
    from securefgl.algorithms.fedstruct.abar_client import AdjacencyClient

__all__ = [
    "ADJACENCY_MODES",
    "PATTERN_TAG",
    "SUPPORTS",
    "UNION_TAG",
    "CKKSHopSum",
    "MaskedHopSum",
    "SecureHopClient",
    "SecureHopServer",
    "SecureHopSum",
    "hop_sum_for",
]

logger = logging.getLogger(__name__)

PATTERN_TAG = "fedstruct/abar/pattern"  # sender -> server: supp(B_ik) ("union" support)
UNION_TAG = "fedstruct/abar/union"  # server -> receiver: U_i
SUPPORTS = ("rows", "union")
SupportKind = Literal["rows", "union"]
ADJACENCY_MODES = ("plain", "masked", "ckks")
DEFAULT_EXPERIMENT_ID = "securefgl/fedstruct/abar"


def _check_support(support: str) -> SupportKind:
    if support not in SUPPORTS:
        raise ValueError(f"support must be one of {SUPPORTS}, got {support!r}")
    return support  # type: ignore[return-value]


class SecureHopClient:
    """Client ``i``'s side: its :class:`SecureSumClient` and its own inputs per hop.

    Hosted by its :class:`~securefgl.algorithms.fedstruct.abar_client.AdjacencyClient`
    (``host_secure_hop``); holds only that client's state (its blocks until sent, its sum).
    """

    def __init__(
        self,
        adjacency: AdjacencyClient,
        spec: dict[str, Any],
        server_id: str,
        client_ids: Sequence[str],
        support: str,
        noise_floor: float = 0.0,
    ) -> None:
        self.adjacency = adjacency
        self.party_id = adjacency.party_id
        self.server_id = server_id
        self.support = _check_support(support)
        self.noise_floor = float(noise_floor)
        state = hosted_state(spec, self.party_id, server_id, client_ids)
        assert isinstance(state, SecureSumClient)
        self.sum_party = state
        # Z_2^32 masked sums: the public bound every sum must respect (checked in expect)
        protocol = SumSpec.from_wire(spec).protocol()
        self.sum_bound: float | None = getattr(protocol, "sum_bound", None)
        self._hop = 0
        self._round = -1

    def prepare(self, hop: int, round_idx: int) -> list[Envelope]:
        """Hand every ``B_ik`` (``[n, n]``, opaque rows) to the sum party. With ``"union"``
        support also returns ``supp(B_ik)`` for the server, per receiver."""
        adj, n = self.adjacency, self.adjacency.num_global_nodes
        self._hop, self._round = hop, round_idx
        out = []
        for receiver, total in adj.global_contributions(hop).items():
            self.sum_party.add_contribution(receiver, total)  # canonical: flat ids sorted
            if self.support == "union":
                pattern = Support((n, n), flat=total.row * n + total.col)  # sorted, unique
                meta = {"hop": hop, "round": round_idx, "to": receiver, "n": n}
                payload = Payload(pattern.to_fields(), meta)
                out.append(Envelope(self.party_id, self.server_id, PATTERN_TAG, payload))
        return out

    def expect(self, hop: int, inbox: Inbox) -> int:
        """Announce this client's own sum (senders = its neighbouring clients) on the public
        support; returns the number of senders (0: no sum, 1: the "sum" is one block)."""
        adj, n = self.adjacency, self.adjacency.num_global_nodes
        if hop != self._hop:
            raise ProtocolError(f"{self.party_id}: expect for hop {hop}, prepared {self._hop}")
        senders = tuple(adj.neighbours)
        if self.support == "rows" or not senders:
            if inbox:
                raise ProtocolError(f"{self.party_id}: unexpected {[e.tag for e in inbox]}")
            support = Support.product((n, n), rows=adj.boundary_rows()) if senders else None
        else:
            if len(inbox) != 1 or inbox[0].sender != self.server_id or inbox[0].tag != UNION_TAG:
                raise ProtocolError(f"{self.party_id}: expected one union support from the server")
            meta = inbox[0].payload.meta
            if meta.get("hop") != hop or meta.get("round") != self._round:
                raise ProtocolError(f"{self.party_id}: union support is for another hop/round")
            if meta.get("senders") != sorted(senders):
                raise ProtocolError(f"{self.party_id}: union is not over my neighbouring clients")
            support = Support.from_fields((n, n), inbox[0].payload)
            if support is None or support.rows is not None:
                raise ProtocolError(f"{self.party_id}: the union support must be a pattern")
        if senders:
            self._check_sum_bound(hop)
            self.sum_party.expect_sum(SumRequest(senders, (n, n), support, sparse_result=True))
        if len(senders) == 1:  # the orchestrator warns once per hop for all such receivers
            logger.info(
                "%s: one neighbouring client (%s): its secure 'sum' at hop %d is that "
                "client's block B_ik itself (hidden from the server only)",
                self.party_id, senders[0], hop,
            )  # fmt: skip
        return len(senders)

    def _check_sum_bound(self, hop: int) -> None:
        """With ``MaskedSum(sum_bound=D)`` the sum must stay within ``D`` entrywise: entries of
        ``Σ_k B_ik`` in row ``v`` are at most ``D̃_vv`` (:class:`MaskedHopSum`), which only
        this receiver knows. Checked before it requests anything: the build aborts before
        any value has left any client."""
        peak = self.adjacency.boundary_degree_peak()
        if self.sum_bound is not None and peak > self.sum_bound:
            raise FixedPointOverflowError(
                f"{self.party_id}: a boundary node of degree {peak:g} exceeds the masked "
                f"ring's public degree_bound {self.sum_bound:g} at hop {hop}: raise "
                "degree_bound (coarser fixed point) or use word_bits=64"
            )

    def finish(self, hop: int) -> int:
        """Complete the hop from the received sum; returns ``nnz`` of that sum."""
        adj = self.adjacency
        if hop != self._hop:
            raise ProtocolError(f"{self.party_id}: finish for hop {hop}, prepared {self._hop}")
        result = self.sum_party.result()
        if result is None:  # no neighbouring client: nothing to receive
            if adj.neighbours:
                raise ProtocolError(f"{self.party_id}: no secure sum arrived at hop {hop}")
            adj.complete_hop(hop, sp.csr_matrix((adj.num_nodes, adj.num_global_nodes)))
            return 0
        total = sp.csr_matrix(result.total, dtype=np.float64)
        # the true sum is >= 0 entrywise; below the floor is encoding noise (CKKS)
        total.data[total.data <= self.noise_floor] = 0.0
        total.eliminate_zeros()
        adj.complete_hop_global(hop, total)
        return int(total.nnz)


class SecureHopServer:
    """The server's side: its :class:`SecureSumServer` and, for ``"union"`` support, the
    union of the senders' patterns per receiver (it sees every individual pattern)."""

    def __init__(self, party_id: str, spec: dict[str, Any], client_ids: Sequence[str]) -> None:
        self.party_id = party_id
        self.clients = frozenset(client_ids)
        state = hosted_state(spec, party_id, party_id, client_ids)
        assert isinstance(state, SecureSumServer)
        self.sum_party = state

    def union(self, hop: int, round_idx: int, inbox: Inbox) -> list[Envelope]:
        """``U_i = ∪_k supp(B_ik)`` to every receiver ``i`` that some sender named."""
        self._round = round_idx
        parts: dict[str, dict[str, np.ndarray]] = {}
        sizes: set[int] = set()
        for env in inbox:
            meta, k = env.payload.meta, env.sender
            r, n = meta.get("to"), meta.get("n")
            if (
                env.tag != PATTERN_TAG
                or k not in self.clients
                or r not in self.clients
                or r == k
                or meta.get("hop") != hop
                or meta.get("round") != self._round
                or not isinstance(n, int)
            ):
                raise ProtocolError(f"{self.party_id}: unexpected {env.tag!r} from {k!r}")
            try:
                pattern = Support.from_fields((n, n), env.payload)
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
            union = _sorted_unique(np.concatenate(list(by_sender.values())))
            fields = Support((n, n), flat=union).to_fields()
            meta = {"hop": hop, "round": self._round, "senders": sorted(by_sender)}
            out.append(Envelope(self.party_id, r, UNION_TAG, Payload(fields, meta)))
        return out


class SecureHopSum(HopSum):
    """Each hop's ``Σ_{k≠i} B_ik`` as one batch of hosted secure sums (module docstring).

    ``spec``: the secure-sum mode (a :class:`~securefgl.federation.secure_sums.SumSpec`,
    ``masked`` or ``ckks``; ``plain`` works too, as a cost baseline of the machinery), sent
    to every party, which creates its own state from it. ``support``: ``"rows"`` or
    ``"union"``. Needs the relay server (``build_abar(..., server_id=...)``).
    """

    name: ClassVar[str] = "secure"

    def __init__(self, spec: SumSpec, support: SupportKind = "rows") -> None:
        if not isinstance(spec, SumSpec):
            raise TypeError(f"spec must be a secure_sums.SumSpec, not {spec!r}")
        self.spec = spec
        self.protocol = spec.protocol()  # configuration only (validates the options)
        self.support = _check_support(support)
        rb = self.protocol.params.round_bits if isinstance(self.protocol, CKKSSum) else None
        self.noise_floor = 2.0**-rb if rb is not None else 0.0
        self._rounds = itertools.count()  # fresh round_idx per hop, across builds
        self._ctx: HopContext | None = None
        self._driver: SecureSumDriver | None = None
        self._notes: dict[int, dict[str, int]] = {}
        self.single_sender: dict[int, list[str]] = {}  # hop -> receivers with one sender

    @property
    def mode(self) -> str:
        return self.spec.mode

    def hop_notes(self, hop: int) -> dict[str, int]:
        return dict(self._notes.get(hop, {}))

    def run_hop(self, hop: int, ctx: HopContext) -> None:
        server = ctx.server_id
        if server is None:
            raise ValueError(
                "secure hop sums run through the server (it adds the masked/encrypted blocks): "
                "build_abar(..., server_id=<the server party>)"
            )
        entries = ctx.channel.transcript.entries
        start = len(entries)
        if hop == 2 or ctx is not self._ctx:
            self._setup(ctx)
        setup = entries[start:]
        assert self._driver is not None
        ex, transmit, r = ctx.executor, ctx.channel.transmit, next(self._rounds)

        def union_supports(patterns_per_client: list[Any]) -> list[Any]:
            """``"union"``: the senders' patterns to the server, ``U_i`` back; then every
            client requests its sum. Returns each client's number of senders."""
            inbox: dict[str, list[Envelope]] = {c: [] for c in ctx.clients}
            patterns = [env for batch in patterns_per_client for env in batch]
            if patterns:
                union = Call(server, SECURE_HOP, "union", (hop, r, transmit(patterns)))
                for env in transmit(ex.call([union])[0]):
                    if env.receiver not in inbox:
                        raise ProtocolError(f"union support for unknown party {env.receiver!r}")
                    inbox[env.receiver].append(env)
            return ex.call([Call(c, SECURE_HOP, "expect", (hop, inbox[c])) for c in ctx.clients])

        counts, nnz = self._driver.round(
            r,
            prepare=lambda c: Call(c, SECURE_HOP, "prepare", (hop, r)),
            finish=lambda c: Call(c, SECURE_HOP, "finish", (hop,)),
            exchange=union_supports,
        )
        single = [c for c, k in zip(ctx.clients, counts, strict=True) if k == 1]
        if single:
            logger.warning(
                "Ā hop %d (%s): %d receiver(s) with a single neighbouring client learn that "
                "client's block itself: %s", hop, self.mode, len(single), single,
            )  # fmt: skip
        self.single_sender[hop] = single
        self._notes[hop] = {
            "round_idx": r,
            "receivers": sum(1 for k in counts if k > 0),
            "single_sender_receivers": len(single),
            "setup_bytes": sum(e.nbytes for e in setup),
            "setup_messages": len(setup),
            "sum_nnz": int(sum(nnz)),
        }

    def _setup(self, ctx: HopContext) -> None:
        """Every party hosts fresh state; the mode's key exchange runs through the channel."""
        assert ctx.server_id is not None
        server, clients, spec = ctx.server_id, list(ctx.clients), self.spec.to_wire()
        floor = self.noise_floor

        def host(pid: str) -> Call:
            if pid == server:
                return Call(pid, RELAY, "host_secure_hop", (spec, clients))
            return Call(pid, ABAR, "host_secure_hop", (spec, server, clients, self.support, floor))

        self._driver = SecureSumDriver(ctx.executor, ctx.channel, self.spec, clients, server)
        self._driver.setup(host)
        self._ctx, self._notes, self.single_sender = ctx, {}, {}


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique`` for int64 (sort + mask: faster than numpy's hash-based unique)."""
    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if a.size else a


class MaskedHopSum(SecureHopSum):
    """:class:`SecureHopSum` over :class:`~protocols.secure_sum.MaskedSum` (fixed point
    ``2^-frac_bits``; exact up to that rounding). ``collusion_threshold``: None masks every
    pair of a receiver's senders; t masks on a circulant graph that tolerates t colluding
    senders (``protocols.secure_sum.masked``), ``O(t)`` instead of ``O(K)``
    mask streams per sender and receiver. ``pair_masks=False``: receiver masks only, one
    stream per sender and receiver; private unless the server colludes with the receiver
    (the trust of :class:`CKKSHopSum`).

    Ring: Z_2^64 by default (``frac_bits`` default 32: Ā exact to ~1e-10). ``word_bits=32``
    halves the keystream, the bytes and the additions of every hop (measured on Cora,
    L_s = 10: -21 % CPU at K = 10, -26 % at K = 20) at a precision cost. It fits because
    receiver ``i`` knows a bound on its own sum: ``[Σ_{k≠i} B_ik]_vw = Σ_{u∉V_i} Ã_vu
    [Â^{ℓ-1}]_uw <= D̃_vv`` (rows of ``Â^{ℓ-1}`` are stochastic, pruned ones smaller, all
    entries >= 0). ``degree_bound`` is a PUBLIC bound on the degree ``D̃_vv`` (self-loop
    included) of any boundary node; every receiver checks its own before requesting a sum
    (a violation aborts the build before any value is sent; the abort itself tells every
    party that this receiver has a boundary node above the bound), so the masked sums
    never wrap (``MaskedSum(sum_bound=...)``). The default 2047 (above the 1435 of Amazon
    Photo, the largest of our datasets) gives ``2^-20`` steps: each hop adds at most ``2^-21``
    (4.8e-7) to an entry of ``[Â^ℓ]`` (the rounding of at most ``D̃_vv - 1`` non-zero
    summands, divided by ``D̃_vv``), so errors reach ``(L_s - 1)·2^-21``: measured on Cora
    (unpruned, K = 10 and 20) 4.8e-7 at L_s = 3 and 1.1e-6 at L_s = 10, above the 1e-6 that
    Z_2^64 keeps. A tighter public degree bound gives finer steps (``2^-23`` for 255).
    """

    name: ClassVar[str] = "masked"

    def __init__(
        self,
        experiment_id: str = DEFAULT_EXPERIMENT_ID,
        support: SupportKind = "rows",
        *,
        word_bits: int = 64,
        degree_bound: int = 2047,
        frac_bits: int | None = None,
        min_senders: int = 2,
        collusion_threshold: int | None = None,
        pair_masks: bool = True,
        max_round_bytes: float | None = None,
    ) -> None:
        if word_bits == 32:
            if frac_bits is not None:
                raise ValueError("in Z_2^32 frac_bits follows from degree_bound; pass one of them")
            if not isinstance(degree_bound, int) or degree_bound < 1:
                raise ValueError(f"degree_bound must be a positive int, got {degree_bound!r}")
            ring: dict[str, Any] = {"sum_bound": float(degree_bound), "frac_bits": None}
        else:
            ring = {"frac_bits": 32 if frac_bits is None else frac_bits}
        options = {
            "word_bits": word_bits,
            "min_senders": min_senders,
            "collusion_threshold": collusion_threshold,
            "pair_masks": pair_masks,
            "max_round_bytes": max_round_bytes,
            **ring,
        }
        super().__init__(SumSpec("masked", experiment_id, options), support)


class CKKSHopSum(SecureHopSum):
    """:class:`SecureHopSum` over :class:`~protocols.secure_sum.CKKSSum` (default parameters
    N = 4096, scale 2^40, sums rounded to 2^-24)."""

    name: ClassVar[str] = "ckks"

    def __init__(
        self,
        support: SupportKind = "rows",
        *,
        params: CKKSParams | None = None,
        min_senders: int = 2,
        max_round_bytes: float | None = None,
    ) -> None:
        options: dict[str, Any] = {"min_senders": min_senders, "max_round_bytes": max_round_bytes}
        if params is not None:
            options["params"] = dataclasses.asdict(params)
        super().__init__(SumSpec("ckks", DEFAULT_EXPERIMENT_ID, options), support)


def hop_sum_for(
    mode: str,
    experiment_id: str = DEFAULT_EXPERIMENT_ID,
    support: SupportKind = "rows",
    **kwargs: Any,
) -> HopSum:
    """The Ā builder's user-facing modes: ``adjacency="plain"|"masked"|"ckks"``.

    ``plain``: :class:`~securefgl.algorithms.fedstruct.abar_build.PlainHopSum` (the paper's scheme, no
    protection; ``support`` is ignored). ``masked``: :class:`MaskedHopSum` (``experiment_id``
    is bound into every mask seed; ``word_bits``, ``frac_bits``, ``min_senders``,
    ``collusion_threshold``, ``pair_masks``). ``ckks``: :class:`CKKSHopSum` (``params``,
    ``min_senders``). Both take ``max_round_bytes``: the relay refuses a hop whose sums
    exceed it (:class:`~protocols.secure_sum.SumTooLargeError`, before anything is sent).
    """
    _check_support(support)
    if mode == "plain":
        if kwargs:
            raise TypeError(f"plain mode takes no options, got {sorted(kwargs)}")
        return PlainHopSum()
    if mode == "masked":
        return MaskedHopSum(experiment_id, support, **kwargs)
    if mode == "ckks":
        return CKKSHopSum(support, **kwargs)
    raise ValueError(f"adjacency mode must be one of {ADJACENCY_MODES}, got {mode!r}")
