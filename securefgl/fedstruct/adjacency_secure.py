"""Secure hop sums for FedStruct's federated Ā: Algorithm 3 over ``protocols.secure_sum``.

At every hop ``ℓ = 2..L_s`` each client ``i`` needs only ``Σ_{k≠i} B_ik`` (App. D, Eq. 36),
yet the paper's scheme (:class:`~securefgl.fedstruct.adjacency.PlainHopSum`) hands it, and a
relaying server, every individual ``B_ik = Ã^[i]_k [Â^[k]]^{ℓ-1}`` (a row of ``i`` with a
single neighbour ``u`` in ``k`` then shows row ``u`` of ``k``'s ``[Â^[k]]^{ℓ-1}``).
:class:`SecureHopSum` replaces that exchange by ONE batch of secure sums per hop (seed §8.17,
anchors_privacy.md §1.5): receiver ``i``'s job has senders = its neighbouring clients,
shape ``(n, n)`` with rows = opaque node ids, each sender ``k`` contributes
``B_ik.in_global_rows(n)``, and ``i`` completes the hop with
:meth:`~securefgl.fedstruct.adjacency.AdjacencyClient.complete_hop_global` (its ``B_ii``
never leaves it). Modes: ``masked`` (:class:`~protocols.secure_sum.MaskedSum`: pairwise
masks + receiver masks; the server learns nothing, ``i`` learns only the sum) and ``ckks``
(:class:`~protocols.secure_sum.CKKSSum`: encrypted under ``i``'s public key, added by the
server; weaker against a server colluding with ``i``). See those modules' threat models.

Public coordinates (``support``), and what each leaks beyond the sum:

* ``"rows"`` (default): ``Support.product((n, n), rows=R_i)``, ``R_i`` = ``i``'s nodes with
  an edge to another client (:meth:`~securefgl.fedstruct.adjacency.AdjacencyClient.boundary_rows`).
  ``i`` publishes ``R_i`` in its request: the server and ``i``'s neighbouring clients learn
  which of ``i``'s nodes are boundary nodes (``|R_i|`` and their opaque ids). Nothing about
  any sender's support leaks (which entries it fills, what sender pruning kept). Cost:
  every sender encodes ``|R_i|·n`` values per hop (8 B masked, 4 B in Z_2^32, ~32 B ckks),
  whatever ``nnz(B_ik)`` is, so pruning no longer saves bytes.
* ``"union"``: each sender ``k`` first sends its pattern ``supp(B_ik)`` (flat indices) to the
  server, which forms ``U_i = ∪_k supp(B_ik)`` and sends it to ``i``; ``i`` requests its sum
  on ``U_i``, so the senders see ``U_i`` too. Leaks: to the SERVER, every individual
  support ``supp(B_ik)`` (for unpruned blocks: which of ``i``'s boundary nodes reach which
  nodes in ``ℓ`` hops through ``k``'s graph; with sender pruning: the positions each sender
  kept), never a value; to ``i``'s SENDERS, ``U_i`` (structure reachable from ``i``'s boundary
  via all its neighbours). To ``i`` it leaks nothing beyond the sum: entries are products of
  non-negative values, so ``U_i`` is the support of ``Σ_k B_ik`` (up to encoding precision).
  Cost ``O(|U_i|)`` per sender (+ 4 B per entry of each pattern and each copy of ``U_i``;
  8 B once ``n^2 >= 2^32``), so pruning keeps its savings.

Single sender: a receiver with exactly one neighbouring client gains nothing (the sum IS
that block); it is still summed securely (the server learns nothing), a warning is logged
and :meth:`SecureHopSum.hop_notes` counts such receivers per hop (``HopStats.notes``). Use
``min_senders=2`` on the protocol to refuse such sums instead (the build then aborts).

Pruning under a secure sum: ``prune="receiver"`` is the meaningful choice (``i`` prunes the
summed ``[Â^[i]]^ℓ``; with ``"rows"`` nothing about individual supports leaks).
``prune="sender"`` works (each sender prunes ``B_ik`` before encoding, with the ``n_i``
announcement of ``adjacency.py``) but the receiver cannot see what was pruned (only the
sum of pruned blocks), with ``"rows"`` it saves no bytes, and with ``"union"`` the server
sees each sender's kept positions.

Orchestration (per build, through the channel and executor; parties host their state via
``AdjacencyClient.secure_hop`` / ``AdjacencyRelay.secure_hop``): setup (key exchange) once,
in the first exchanged hop (counted in that hop's bytes, ``notes["setup_bytes"]``); per hop
a fresh ``round_idx`` (a counter over all builds of this strategy), each client feeds its
own inputs (``begin_round``, ``add_contribution`` per neighbour, ``expect_sum``), then the
five round phases run party by party (``protocols.base.run_phases``; ``run_secure_sums``
would hand every ``B_ik`` out from the orchestrator instead). CKKS noise: decrypted sums are
rounded to ``2^-round_bits``; entries ``<= 2^-round_bits`` (noise on true zeros, or true
values below one rounding step) are dropped, so Ā keeps its exact support up to that
precision.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import scipy.sparse as sp

from protocols.base import Envelope, Inbox, ProtocolError, Role, run_phases
from protocols.fixedpoint import FixedPointOverflowError
from protocols.secure_sum import (
    CKKSSum,
    MaskedSum,
    SecureSum,
    SecureSumClient,
    SecureSumServer,
    SumRequest,
    Support,
)
from protocols.wire import Payload
from securefgl.fedstruct.adjacency import HopContext, HopSum, PlainHopSum

if TYPE_CHECKING:
    from protocols.ckks import CKKSParams
    from securefgl.federation import Executor
    from securefgl.fedstruct.adjacency import AdjacencyClient

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


def _phase_names(protocol: SecureSum) -> frozenset[str]:
    return frozenset(p.method for p in (*protocol.setup_phases, *protocol.round_phases))


class SecureHopClient:
    """Client ``i``'s side: its :class:`SecureSumClient` and its own inputs per hop.

    Hosted by its :class:`~securefgl.fedstruct.adjacency.AdjacencyClient` (``secure_hop``);
    holds only that client's state (its blocks until sent, its own sum).
    """

    def __init__(
        self,
        adjacency: AdjacencyClient,
        protocol: SecureSum,
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
        self.sum_bound: float | None = getattr(protocol, "sum_bound", None)
        # create_parties makes every party's (secret-free) initial state; keep only ours
        self.sum_party: SecureSumClient = protocol.create_parties(
            server_id, list(client_ids)
        ).clients[self.party_id]
        self._phases = _phase_names(protocol)
        self._hop = 0
        self._round = -1

    def phase(self, method: str, inbox: Inbox) -> list[Envelope]:
        """One secure-sum phase (setup or round) on this client's state."""
        if method not in self._phases:
            raise ProtocolError(f"{self.party_id}: {method!r} is not a secure-sum phase")
        return getattr(self.sum_party, method)(inbox)

    def prepare(self, hop: int, round_idx: int) -> list[Envelope]:
        """Start the round; hand every ``B_ik`` (``[n, n]``, opaque rows) to the sum party.
        With ``"union"`` support also returns ``supp(B_ik)`` for the server, per receiver."""
        adj, n = self.adjacency, self.adjacency.num_global_nodes
        self.sum_party.begin_round(round_idx)
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

    def __init__(self, party_id: str, protocol: SecureSum, client_ids: Sequence[str]) -> None:
        self.party_id = party_id
        self.clients = frozenset(client_ids)
        self.sum_party: SecureSumServer = protocol.create_parties(party_id, list(client_ids)).server
        self._phases = _phase_names(protocol)
        self._round = -1

    def phase(self, method: str, inbox: Inbox) -> list[Envelope]:
        if method not in self._phases:
            raise ProtocolError(f"{self.party_id}: {method!r} is not a secure-sum phase")
        return getattr(self.sum_party, method)(inbox)

    def begin_round(self, round_idx: int) -> None:
        self.sum_party.begin_round(round_idx)
        self._round = round_idx

    def union(self, hop: int, inbox: Inbox) -> list[Envelope]:
        """``U_i = ∪_k supp(B_ik)`` to every receiver ``i`` that some sender named."""
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
    """Each hop's ``Σ_{k≠i} B_ik`` as one batch of secure sums (module docstring).

    ``protocol``: a :class:`~protocols.secure_sum.SecureSum` (``MaskedSum``, ``CKKSSum``; a
    ``PlainSum`` works too, as a cost baseline of the protocol machinery). It is a
    configuration (mode and parameters, no secrets) passed to every party, which creates
    its own state from it. ``support``: ``"rows"`` or ``"union"``. Needs the relay server
    (``build_abar(..., server_id=...)``); the server party must expose ``secure_hop``
    (:class:`~securefgl.fedstruct.adjacency.AdjacencyRelay` does).
    """

    name: ClassVar[str] = "secure"

    def __init__(self, protocol: SecureSum, support: SupportKind = "rows") -> None:
        if not isinstance(protocol, SecureSum):
            raise TypeError(f"protocol must be a protocols.secure_sum.SecureSum, not {protocol!r}")
        self.protocol = protocol
        self.support = _check_support(support)
        params = getattr(protocol, "params", None)
        rb = params.round_bits if isinstance(protocol, CKKSSum) else None
        self.noise_floor = 2.0**-rb if rb is not None else 0.0
        self._rounds = itertools.count()  # fresh round_idx per hop, across builds
        self._ctx: HopContext | None = None
        self._notes: dict[int, dict[str, int]] = {}
        self.single_sender: dict[int, list[str]] = {}  # hop -> receivers with one sender

    @property
    def mode(self) -> str:
        return self.protocol.name

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
        ex, transmit, r = ctx.executor, ctx.channel.transmit, next(self._rounds)
        ex.call([(server, "secure_hop", ("begin_round", r))])
        sent = ex.call([(c, "secure_hop", ("prepare", hop, r)) for c in ctx.clients])
        inbox: dict[str, list[Envelope]] = {c: [] for c in ctx.clients}
        patterns = [env for batch in sent for env in batch]
        if patterns:
            unions = ex.call([(server, "secure_hop", ("union", hop, transmit(patterns)))])[0]
            for env in transmit(unions):
                if env.receiver not in inbox:
                    raise ProtocolError(f"union support for unknown party {env.receiver!r}")
                inbox[env.receiver].append(env)
        counts = ex.call([(c, "secure_hop", ("expect", hop, inbox[c])) for c in ctx.clients])
        single = [c for c, k in zip(ctx.clients, counts, strict=True) if k == 1]
        if single:
            logger.warning(
                "Ā hop %d (%s): %d receiver(s) with a single neighbouring client learn that "
                "client's block itself: %s", hop, self.mode, len(single), single,
            )  # fmt: skip
        roles = {Role.SERVER: [server], Role.CLIENT: list(ctx.clients)}
        run_phases(self.protocol.round_phases, roles, _invoke(ex), transmit)
        nnz = ex.call([(c, "secure_hop", ("finish", hop)) for c in ctx.clients])
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
        ex, server, clients = ctx.executor, ctx.server_id, list(ctx.clients)
        host = ("host", self.protocol, server, clients, self.support, self.noise_floor)
        ex.call([(c, "secure_hop", host) for c in clients])
        ex.call([(server, "secure_hop", ("host", self.protocol, clients))])
        roles = {Role.SERVER: [server], Role.CLIENT: clients}
        run_phases(self.protocol.setup_phases, roles, _invoke(ex), ctx.channel.transmit)
        self._ctx, self._notes, self.single_sender = ctx, {}, {}


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique`` for int64 (sort + mask: faster than numpy's hash-based unique)."""
    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if a.size else a


def _invoke(executor: Executor) -> Any:
    """``run_phases``' invoke hook: the phase runs on the party's hosted secure-sum state."""

    def invoke(party_id: str, method: str, inbox: Inbox) -> list[Envelope]:
        return executor.invoke(party_id, method, inbox, entry=("secure_hop", "phase"))

    return invoke


class MaskedHopSum(SecureHopSum):
    """:class:`SecureHopSum` over :class:`~protocols.secure_sum.MaskedSum` (fixed point
    ``2^-frac_bits``; exact up to that rounding). ``collusion_threshold``: None masks every
    pair of a receiver's senders; t masks on a circulant graph that tolerates t colluding
    senders (``protocols.secure_sum.masked``, "Mask graph"), ``O(t)`` instead of ``O(K)``
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
        min_senders: int = 1,
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
        protocol = MaskedSum(
            experiment_id,
            word_bits=word_bits,
            min_senders=min_senders,
            collusion_threshold=collusion_threshold,
            pair_masks=pair_masks,
            max_round_bytes=max_round_bytes,
            **ring,
        )
        super().__init__(protocol, support)


class CKKSHopSum(SecureHopSum):
    """:class:`SecureHopSum` over :class:`~protocols.secure_sum.CKKSSum` (default parameters
    N = 4096, scale 2^40, sums rounded to 2^-24)."""

    name: ClassVar[str] = "ckks"

    def __init__(
        self,
        support: SupportKind = "rows",
        *,
        params: CKKSParams | None = None,
        min_senders: int = 1,
        max_round_bytes: float | None = None,
    ) -> None:
        protocol = CKKSSum(params, min_senders=min_senders, max_round_bytes=max_round_bytes)
        super().__init__(protocol, support)


def hop_sum_for(
    mode: str,
    experiment_id: str = DEFAULT_EXPERIMENT_ID,
    support: SupportKind = "rows",
    **kwargs: Any,
) -> HopSum:
    """The Ā builder's user-facing modes: ``adjacency="plain"|"masked"|"ckks"``.

    ``plain``: :class:`~securefgl.fedstruct.adjacency.PlainHopSum` (the paper's scheme, no
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
