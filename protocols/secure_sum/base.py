"""Sums addressed to one receiver: jobs, supports, parties, phases and the driver.

A *job* is "receiver r learns ``sum_{k in S} B_k``" for a public sender set S and block
shape; many jobs run in one batch (FedStruct App. D, Algorithm 3: at each hop every client i
is the receiver of ``sum_k B_ijk`` and a sender to the others). Clients have no direct
links: every message goes client -> server -> client through :func:`protocols.base.run_phases`,
so the transcript records it.

Round phases (identical for every mode)::

    client announce       receiver r -> server: its public SumRequest (senders, shape, support)
    server route_requests server -> each sender k in S: r's request
    client contribute     sender k -> server: its (mode-encoded) block for r, one per request
    server deliver        server -> r: the individual blocks (plain) or ONE aggregate
    client finish         r combines, adds its local term, keeps a SumResult

Each party only gets its own inputs: a receiver calls :meth:`SecureSumClient.expect_sum`, a
sender :meth:`SecureSumClient.add_contribution`; :func:`run_secure_sums` is the in-process
convenience that hands them out (like :func:`protocols.base.aggregate`).

Public in every mode (to the server, the receiver and its senders): the receiver, the sender
set, the block shape, the support (if any), message sizes and timing. A receiver that is also
in S keeps its block as a *local term*: it never leaves the receiver.

No dropout recovery: the adjacency sums are a one-shot pre-training computation and a missing
term makes the result wrong rather than noisier (anchors_privacy.md §1.5), so a sender that
drops aborts the batch with :class:`ProtocolError`; re-run with a fresh ``round_idx``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from protocols.base import (
    Envelope,
    Inbox,
    Invoke,
    Phase,
    ProtocolError,
    ProtocolParty,
    Role,
    Transmit,
    default_invoke,
    no_transport,
    run_phases,
)
from protocols.wire import Payload, WireFormatError

Block = np.ndarray | sp.sparray | sp.spmatrix
Total = np.ndarray | sp.csr_array

TAG_REQUEST = "secure-sum/request"
TAG_ROUTED_REQUEST = "secure-sum/routed-request"
TAG_CONTRIBUTION = "secure-sum/contribution"
TAG_DELIVERY = "secure-sum/delivery"

ROUND_PHASES = (
    Phase(Role.CLIENT, "announce"),
    Phase(Role.SERVER, "route_requests"),
    Phase(Role.CLIENT, "contribute"),
    Phase(Role.SERVER, "deliver"),
    Phase(Role.CLIENT, "finish"),
)
#: Setup phases of the modes that exchange keys (masked, ckks).
SETUP_PHASES = (
    Phase(Role.CLIENT, "setup_publish"),
    Phase(Role.SERVER, "setup_forward"),
    Phase(Role.CLIENT, "setup_install"),
)


class SupportViolationError(ProtocolError, ValueError):
    """A sender's block is non-zero outside the public support of the job."""


class SumRangeError(ProtocolError, OverflowError):
    """A block holds values too large for the mode's exact range (raised before sending)."""


class SumTooLargeError(ProtocolError):
    """The server refuses a round whose sums exceed its ``max_round_bytes`` (raised when it
    routes the requests, before any sender encodes a value)."""


# ------------------------------------------------------------------------------- supports


def _shape(shape: Iterable[int]) -> tuple[int, ...]:
    out = tuple(int(s) for s in shape)
    if not out or any(s < 0 for s in out):
        raise ValueError(f"a block shape is a non-empty tuple of non-negative ints, got {shape}")
    return out


def _index_array(values: Any, bound: int, what: str) -> np.ndarray:
    if not isinstance(values, np.ndarray):
        values = np.fromiter(values, dtype=np.int64)
    if values.size and values.dtype.kind not in "iu":
        raise ValueError(f"{what} indices must be integers, got {values.dtype}")
    arr = values.astype(np.int64, copy=False).reshape(-1)
    if arr.size > 1 and not np.all(arr[1:] > arr[:-1]):  # sort only what is not yet sorted
        arr = np.unique(arr)
    if arr.size and (arr[0] < 0 or arr[-1] >= bound):
        raise ValueError(f"{what} out of range [0, {bound})")
    return arr


class Support:
    """A public set of block positions where the senders of one job may be non-zero.

    Masked sums only cancel on a common index set, so the senders of a job either mask every
    entry (no support: hides all, costs ``prod(shape)`` words each) or the entries of a
    support published in advance. The support itself is public (server, receiver and all the
    job's senders see it); nothing is revealed about which entries inside it a given sender
    fills. A sender whose block is non-zero outside it raises :class:`SupportViolationError`.

    Two kinds: :meth:`product` (``rows x cols``, e.g. the receiver's rows that have any
    cross-client edge x all columns; compact on the wire) and :meth:`pattern` (explicit
    row-major flat indices, e.g. a union pattern; :meth:`union_of` builds one and thereby
    publishes the union of the given blocks' supports).

    FedStruct (seed_fedstruct.md §8.17): B_ijk is zero outside the rows of i's nodes with
    edges into k, so "i's rows with any cross-client edge x all columns" is a support the
    receiver can publish from its own data; it reveals which of its nodes have cross-client
    edges. Per-sender top-k pruning before the sum needs a support containing every sender's
    pruned pattern (a published union reveals that union; whoever computes it from the
    individual patterns sees them); pruning the sum at the receiver after a dense or
    rows-support sum hides every individual pattern.
    """

    __slots__ = ("shape", "rows", "cols", "_flat")

    def __init__(
        self,
        shape: Iterable[int],
        *,
        rows: np.ndarray | None = None,
        cols: np.ndarray | None = None,
        flat: np.ndarray | None = None,
    ) -> None:
        self.shape = _shape(shape)
        self.rows, self.cols, self._flat = rows, cols, flat

    @classmethod
    def product(
        cls,
        shape: Iterable[int],
        rows: Iterable[int] | None = None,
        cols: Iterable[int] | None = None,
    ) -> Support:
        """``rows x cols`` of a 2-D shape (``None`` = all rows / all columns)."""
        shape = _shape(shape)
        if len(shape) != 2:
            raise ValueError("a product support needs a 2-D shape")
        r = np.arange(shape[0]) if rows is None else _index_array(rows, shape[0], "row")
        c = np.arange(shape[1]) if cols is None else _index_array(cols, shape[1], "column")
        return cls(shape, rows=r.astype(np.int64), cols=c.astype(np.int64))

    @classmethod
    def pattern(cls, shape: Iterable[int], flat: Iterable[int] | np.ndarray) -> Support:
        """Explicit positions as row-major flat indices into ``shape``."""
        shape = _shape(shape)
        return cls(shape, flat=_index_array(np.asarray(flat), math.prod(shape), "flat index"))

    @classmethod
    def union_of(cls, blocks: Iterable[Block]) -> Support:
        """The union of the non-zero patterns of ``blocks`` (same shape). Publishing it
        reveals that union (not which block contributed which entry)."""
        blocks = list(blocks)
        if not blocks:
            raise ValueError("union_of needs at least one block")
        shape = _block_shape(blocks[0])
        parts = []
        for block in blocks:
            if _block_shape(block) != shape:
                raise ValueError("union_of: blocks differ in shape")
            parts.append(_nonzero_flat(block, shape))
        return cls.pattern(shape, np.concatenate(parts))

    @property
    def index(self) -> np.ndarray:
        """Sorted unique row-major flat indices (int64)."""
        if self._flat is None:
            assert self.rows is not None and self.cols is not None
            self._flat = (self.rows[:, None] * self.shape[1] + self.cols[None, :]).reshape(-1)
        return self._flat

    @property
    def size(self) -> int:
        if self.rows is not None and self.cols is not None:
            return int(self.rows.size * self.cols.size)
        return int(self.index.size)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Support)
            and other.shape == self.shape
            and np.array_equal(other.index, self.index)
        )

    def __hash__(self) -> int:  # pragma: no cover - unhashable by design (mutable arrays)
        raise TypeError("Support is not hashable")

    def __repr__(self) -> str:
        kind = "product" if self.rows is not None else "pattern"
        return f"Support({kind}, shape={self.shape}, size={self.size})"

    # wire form: a product sends its rows and cols; a pattern the smaller of its flat indices
    # (in the narrowest unsigned dtype holding them: 4 bytes each below 2^32 entries) and a
    # bitmap over all entries
    def to_fields(self) -> dict[str, np.ndarray]:
        if self.rows is not None and self.cols is not None:
            return {"support_rows": self.rows, "support_cols": self.cols}
        idx, total = self.index, math.prod(self.shape)
        dtype = next(
            (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32) if total <= np.iinfo(t).max),
            np.dtype(np.int64),
        )
        if (total + 7) // 8 < dtype.itemsize * idx.size:
            bits = np.zeros(total, dtype=bool)
            bits[idx] = True
            return {"support_bitmap": np.packbits(bits)}
        return {"support_flat": idx.astype(dtype, copy=False)}

    @classmethod
    def from_fields(cls, shape: tuple[int, ...], payload: Payload) -> Support | None:
        names = {n for n in payload.fields if n.startswith("support_")}
        try:
            if names == {"support_rows", "support_cols"}:
                return cls.product(
                    shape,
                    _wire_index(payload.array("support_rows")),
                    _wire_index(payload.array("support_cols")),
                )
            if names == {"support_flat"}:
                flat = payload.array("support_flat")
                if flat.dtype.kind == "u" and flat.dtype.itemsize <= 4:
                    flat = flat.astype(np.int64)
                return cls._checked(shape, _wire_index(flat))
            if names == {"support_bitmap"}:
                packed = payload.array("support_bitmap")
                total = math.prod(shape)
                if packed.dtype != np.uint8 or packed.shape != ((total + 7) // 8,):
                    raise ValueError(f"a support bitmap for {shape} is {(total + 7) // 8} bytes")
                return cls(shape, flat=np.flatnonzero(np.unpackbits(packed, count=total)))
        except (ValueError, WireFormatError) as err:
            raise ProtocolError(f"malformed support in a sum request: {err}") from err
        if names:
            raise ProtocolError(f"malformed support fields {sorted(names)} in a sum request")
        return None

    @classmethod
    def _checked(cls, shape: tuple[int, ...], flat: np.ndarray) -> Support:
        """A pattern from strictly increasing int64 indices (checked by the caller): only
        the range is left to check."""
        if flat.size and (flat[0] < 0 or flat[-1] >= math.prod(shape)):
            raise ValueError(f"flat index out of range [0, {math.prod(shape)})")
        return cls(shape, flat=flat)


def _wire_index(arr: np.ndarray) -> np.ndarray:
    if arr.dtype != np.int64 or arr.ndim != 1:
        raise ValueError("support indices must be a 1-d int64 array")
    if arr.size > 1 and not np.all(arr[1:] > arr[:-1]):
        raise ValueError("support indices must be strictly increasing")
    return arr


# ---------------------------------------------------------------------------- requests / results


@dataclass(frozen=True)
class SumRequest:
    """The public description of one job, announced by its receiver.

    ``senders``: who contributes (not the receiver: its own term stays local). ``shape``: the
    block shape. ``support``: ``None`` = every entry (dense), else a public :class:`Support`.
    ``sparse_result``: deliver the sum as a ``scipy.sparse.csr_array`` (2-D only) instead of a
    dense array.
    """

    senders: tuple[str, ...]
    shape: tuple[int, ...]
    support: Support | None = None
    sparse_result: bool = False

    def __post_init__(self) -> None:
        senders = tuple(self.senders)
        if not all(isinstance(s, str) for s in senders) or len(set(senders)) != len(senders):
            raise ValueError(f"senders must be distinct string ids, got {senders}")
        object.__setattr__(self, "senders", senders)
        object.__setattr__(self, "shape", _shape(self.shape))
        if self.support is not None and self.support.shape != self.shape:
            raise ValueError(f"support shape {self.support.shape} != block shape {self.shape}")
        if self.sparse_result and len(self.shape) != 2:
            raise ValueError("sparse_result needs a 2-D block shape")

    @property
    def length(self) -> int:
        """Entries each sender encodes: the support size, or every entry of the block."""
        return self.support.size if self.support is not None else math.prod(self.shape)

    def to_payload(self, round_idx: int, receiver: str) -> Payload:
        fields = self.support.to_fields() if self.support is not None else {}
        meta = {
            "round": round_idx,
            "receiver": receiver,
            "senders": list(self.senders),
            "shape": list(self.shape),
            "sparse_result": self.sparse_result,
        }
        return Payload(dict(fields), meta)

    @classmethod
    def from_payload(cls, payload: Payload, who: str) -> SumRequest:
        meta = payload.meta
        senders, shape = meta.get("senders"), meta.get("shape")
        if (
            not isinstance(senders, list)
            or not isinstance(shape, list)
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in shape)
            or not isinstance(meta.get("sparse_result"), bool)
        ):
            raise ProtocolError(f"{who}: malformed sum request {meta}")
        try:
            shape_t = _shape(shape)
            support = Support.from_fields(shape_t, payload)
            return cls(tuple(senders), shape_t, support, meta["sparse_result"])
        except ValueError as err:
            raise ProtocolError(f"{who}: malformed sum request: {err}") from err


@dataclass(frozen=True)
class SumResult:
    """What a receiver learns: ``total = local + sum of its senders' blocks``."""

    receiver: str
    total: Total
    senders: tuple[str, ...]
    includes_local: bool


# ------------------------------------------------------------------------------ block helpers


def _block_shape(block: Block) -> tuple[int, ...]:
    return tuple(int(s) for s in block.shape)


def is_sparse(block: Any) -> bool:
    return sp.issparse(block)


def canonical_coo(block: Block) -> sp.coo_array:
    """``block`` as a float64 COO without duplicates or explicit zeros (no copy if it is one)."""
    if (
        isinstance(block, sp.coo_array)
        and block.dtype == np.float64
        and block.has_canonical_format
        and np.all(block.data != 0)
    ):
        return block
    if sp.issparse(block) and block.format == "csr":
        csr = sp.csr_array(block, dtype=np.float64, copy=True)
        csr.sum_duplicates()  # per-row sort: much cheaper than COO's global lexsort
        coo = csr.tocoo()
        coo.has_canonical_format = True  # sorted unique CSR indices are row-major order
    else:
        coo = sp.coo_array(block, dtype=np.float64)
    coo.sum_duplicates()
    coo.eliminate_zeros()
    return coo


def _nonzero_flat(block: Block, shape: tuple[int, ...]) -> np.ndarray:
    if is_sparse(block):
        coo = canonical_coo(block)
        return coo.row.astype(np.int64) * shape[1] + coo.col.astype(np.int64)
    return np.flatnonzero(np.asarray(block))


def check_block(block: Block, who: str) -> tuple[tuple[int, ...], float]:
    """Validate a block; returns its shape and its peak ``max |x|`` (0 for an empty block)."""
    if is_sparse(block):
        if block.ndim != 2:
            raise ValueError(f"{who}: sparse blocks must be 2-D")
        data = canonical_coo(block).data
    elif isinstance(block, np.ndarray):
        data = block
    else:
        raise TypeError(f"{who}: a block is a numpy array or a scipy.sparse matrix, not {block!r}")
    if data.dtype.kind not in "biuf":
        raise TypeError(f"{who}: block dtype {data.dtype} is not real")
    if data.size == 0:
        return _block_shape(block), 0.0
    lo, hi = float(np.min(data)), float(np.max(data))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{who}: block holds NaN or infinite values")
    return _block_shape(block), max(-lo, hi, 0.0)


def gather(block: Block, request: SumRequest, who: str) -> np.ndarray:
    """The block's values at the request's positions (a float64 vector of ``request.length``).

    Raises :class:`SupportViolationError` if the block is non-zero outside the support.
    Sparse blocks are densified only onto the positions every sender encodes anyway.
    """
    support = request.support
    if is_sparse(block):
        coo = canonical_coo(block)
        flat = coo.row.astype(np.int64) * request.shape[1] + coo.col.astype(np.int64)
        out = np.zeros(request.length, dtype=np.float64)
        if support is None:
            out[flat] = coo.data
            return out
        index = support.index
        pos = np.searchsorted(index, flat)
        inside = pos < index.size
        inside[inside] = index[pos[inside]] == flat[inside]
        if not inside.all():
            raise SupportViolationError(
                f"{who}: {int((~inside).sum())} non-zero entries lie outside the public support "
                f"of the job ({support!r}); they would be lost or leak: fix the support"
            )
        out[pos] = coo.data
        return out
    arr = np.asarray(block, dtype=np.float64).reshape(-1)
    if support is None:
        return arr.copy()
    out = arr[support.index]
    outside = np.count_nonzero(arr) - np.count_nonzero(out)
    if outside:
        raise SupportViolationError(
            f"{who}: {outside} non-zero entries lie outside the public support of the job "
            f"({support!r}); they would be lost or leak: fix the support"
        )
    return out


def scatter(values: np.ndarray, request: SumRequest) -> Total:
    """A vector of ``request.length`` values back to the result format of ``request``."""
    index = request.support.index if request.support is not None else None
    if request.sparse_result:
        nrows, ncols = request.shape
        flat = np.arange(values.size, dtype=np.int64) if index is None else index
        nz = values != 0
        rows, cols = np.divmod(flat[nz], ncols)
        return sp.csr_array((values[nz], (rows, cols)), shape=(nrows, ncols))
    if index is None:
        return values.reshape(request.shape)
    out = np.zeros(math.prod(request.shape), dtype=np.float64)
    out[index] = values
    return out.reshape(request.shape)


def add_local(total: Total, local: Block | None, request: SumRequest) -> Total:
    """``total + local`` in the request's result format (sparse stays sparse)."""
    if local is None:
        return total
    if request.sparse_result:
        out = sp.csr_array(total + sp.csr_array(local, dtype=np.float64))
        out.eliminate_zeros()
        return out
    dense = local.toarray() if is_sparse(local) else np.asarray(local, dtype=np.float64)
    return np.asarray(total, dtype=np.float64) + dense.reshape(request.shape)


def empty_total(request: SumRequest) -> Total:
    if request.sparse_result:
        return sp.csr_array(request.shape, dtype=np.float64)
    return np.zeros(request.shape, dtype=np.float64)


# ----------------------------------------------------------------------------------- parties


class SecureSumClient(ProtocolParty):
    """One client: receiver of its own sums, sender to others. Holds only its own inputs.

    Per round: :meth:`begin_round`, then :meth:`expect_sum` for each sum it receives (at most
    one per round) and :meth:`add_contribution` for each block it sends; after the round
    phases :meth:`result` holds what it received.
    """

    def __init__(
        self, party_id: str, server_id: str, client_ids: Sequence[str], min_senders: int
    ) -> None:
        super().__init__(party_id)
        self.server_id = server_id
        self.federation = frozenset(client_ids)
        self.min_senders = min_senders
        self._used_rounds: set[int] = set()
        self._round: int | None = None
        self._request: SumRequest | None = None
        self._local: Block | None = None
        self._outgoing: dict[str, Block] = {}
        self._result: SumResult | None = None

    # -- inputs ------------------------------------------------------------------------
    def begin_round(self, round_idx: int) -> None:
        """Start round ``round_idx``: must be fresh for this client (masks derive from it)."""
        if not isinstance(round_idx, int) or isinstance(round_idx, bool) or round_idx < 0:
            raise ValueError(f"round_idx must be a non-negative int, got {round_idx!r}")
        if round_idx in self._used_rounds:
            raise ProtocolError(
                f"{self.party_id}: round {round_idx} was already used; every secure-sum call "
                "needs a fresh round_idx (e.g. the hop index), or masks would repeat"
            )
        self._used_rounds.add(round_idx)
        self._round = round_idx
        self._request, self._local, self._outgoing, self._result = None, None, {}, None

    def expect_sum(self, request: SumRequest, local: Block | None = None) -> None:
        """Receiver side: announce ``request`` this round; ``local`` (own block, same shape)
        is added to the sum here and never sent."""
        who = self._who()
        if self._request is not None:
            raise ProtocolError(f"{who}: one sum per receiver per round")
        if who in request.senders:
            raise ValueError(f"{who}: the receiver's own block is the local term, not a sender")
        if not set(request.senders) <= self.federation:
            raise ValueError(f"{who}: senders outside the federation: {request.senders}")
        if local is not None:
            shape, _ = check_block(local, who)
            if shape != request.shape:
                raise ValueError(f"{who}: local block shape {shape} != {request.shape}")
        self._request, self._local = request, local

    def add_contribution(self, receiver: str, block: Block) -> None:
        """Sender side: ``block`` for ``receiver``'s sum this round (checked locally now;
        encoded once the receiver's request arrives)."""
        who = self._who()
        if receiver == who or receiver not in self.federation:
            raise ValueError(f"{who}: cannot contribute to {receiver!r}")
        if receiver in self._outgoing:
            raise ValueError(f"{who}: a second block for {receiver!r} in one round")
        if is_sparse(block) and block.ndim == 2:
            block = canonical_coo(block)  # once: checks, support and gather reuse it
        _, peak = check_block(block, who)
        self._check_peak(peak, receiver)
        self._outgoing[receiver] = block

    def result(self) -> SumResult | None:
        return self._result

    # -- phases --------------------------------------------------------------------------
    def announce(self, inbox: Inbox) -> list[Envelope]:
        self._expect_empty(inbox)
        if self._request is None or not self._request.senders:
            return []
        self._require_ready()
        payload = self._request.to_payload(self._r, self.party_id)
        return [Envelope(self.party_id, self.server_id, TAG_REQUEST, payload)]

    def contribute(self, inbox: Inbox) -> list[Envelope]:
        who = self.party_id
        requests: dict[str, SumRequest] = {}
        for env in inbox:
            payload = self._from_server(env, TAG_ROUTED_REQUEST)
            receiver = payload.meta.get("receiver")
            if not isinstance(receiver, str) or receiver in requests:
                raise ProtocolError(f"{who}: malformed or duplicate routed request")
            request = SumRequest.from_payload(payload, who)
            if who not in request.senders or receiver in request.senders:
                raise ProtocolError(f"{who}: request of {receiver!r} does not list this client")
            requests[receiver] = request
        if not requests and not self._outgoing:
            return []
        unrequested = sorted(set(self._outgoing) - set(requests))
        if unrequested:
            raise ProtocolError(
                f"{who}: receivers {unrequested} did not request a sum from this client (a "
                "receiver dropped or the jobs disagree); no dropout recovery: abort and re-run"
            )
        missing = sorted(set(requests) - set(self._outgoing))
        if missing:
            raise ProtocolError(f"{who}: receivers {missing} expect a block this client lacks")
        self._require_ready()
        self._start_encoding(requests)
        out = []
        for receiver, request in requests.items():
            if len(request.senders) < self.min_senders:
                raise ProtocolError(
                    f"{who}: refusing to contribute to {receiver!r}'s sum of only "
                    f"{len(request.senders)} senders (min_senders={self.min_senders})"
                )
            block = self._outgoing[receiver]
            if _block_shape(block) != request.shape:
                raise ProtocolError(
                    f"{who}: block for {receiver!r} has shape {_block_shape(block)}, the "
                    f"request says {request.shape}"
                )
            payload = self._encode(receiver, request, block)
            payload.meta.update(round=self._r, receiver=receiver)
            out.append(Envelope(who, self.server_id, TAG_CONTRIBUTION, payload))
        self._outgoing = {}
        return out

    def _start_encoding(self, requests: dict[str, SumRequest]) -> None:
        """Hook before this round's :meth:`_encode` calls (all of them see ``requests``)."""

    def finish(self, inbox: Inbox) -> list[Envelope]:
        request = self._request
        if request is None:
            self._expect_empty(inbox)
            return []
        if not request.senders:
            self._expect_empty(inbox)
            total = empty_total(request)
        else:
            for env in inbox:
                self._from_server(env, TAG_DELIVERY)
            total = self._combine(request, inbox)
        total = add_local(total, self._local, request)
        self._result = SumResult(self.party_id, total, request.senders, self._local is not None)
        self._local = None
        return []

    # -- mode hooks ----------------------------------------------------------------------
    def _check_peak(self, peak: float, receiver: str) -> None:
        """Refuse values the mode cannot sum exactly (default: any finite value)."""

    def _require_ready(self) -> None:
        """Raise if setup (keys) is missing."""

    @abstractmethod
    def _encode(self, receiver: str, request: SumRequest, block: Block) -> Payload:
        """This sender's message for ``receiver`` (round/receiver meta are added after)."""

    @abstractmethod
    def _combine(self, request: SumRequest, deliveries: Inbox) -> Total:
        """The remote senders' sum from the server's deliveries, in the result format."""

    # -- helpers -------------------------------------------------------------------------
    @property
    def _r(self) -> int:
        if self._round is None:
            raise ProtocolError(f"{self.party_id}: begin_round was not called")
        return self._round

    def _who(self) -> str:
        self._r  # noqa: B018 - raises before begin_round
        return self.party_id

    def _expect_empty(self, inbox: Inbox) -> None:
        if inbox:
            raise ProtocolError(
                f"{self.party_id}: unexpected messages {[(e.sender, e.tag) for e in inbox]}"
            )

    def _from_server(self, env: Envelope, tag: str) -> Payload:
        if env.sender != self.server_id or env.tag != tag:
            raise ProtocolError(
                f"{self.party_id}: unexpected {env.tag!r} from {env.sender!r} (expected {tag!r})"
            )
        if env.payload.meta.get("round") != self._r:
            raise ProtocolError(f"{self.party_id}: {tag!r} is not for round {self._r}")
        return env.payload


class SecureSumServer(ProtocolParty):
    """The relay: routes requests and contributions; what it learns depends on the mode."""

    def __init__(self, party_id: str, client_ids: Sequence[str], min_senders: int) -> None:
        super().__init__(party_id)
        self.federation = frozenset(client_ids)
        self.min_senders = min_senders
        self._round: int | None = None
        self._requests: dict[str, SumRequest] = {}
        self.max_round_bytes: float | None = None  # set by SecureSum (admission limit)
        self.bytes_per_value = 8.0  # what one encoded value costs on the wire in this mode

    def begin_round(self, round_idx: int) -> None:
        self._round = round_idx
        self._requests = {}

    def collect_setup_blobs(
        self, inbox: Inbox, tag: str, field: str, what: str
    ) -> dict[str, bytes]:
        """One ``field`` blob per federation member from the set-up ``inbox`` (tag ``tag``);
        anything else, a malformed payload or a missing member aborts the set-up."""
        blobs: dict[str, bytes] = {}
        for env in inbox:
            if env.tag != tag or env.sender not in self.federation or env.sender in blobs:
                raise ProtocolError(f"server: unexpected {env.tag!r} from {env.sender!r}")
            try:
                blobs[env.sender] = env.payload.blob(field)
            except (KeyError, WireFormatError) as err:
                raise ProtocolError(f"server: malformed {what} from {env.sender!r}") from err
        missing = sorted(self.federation - set(blobs))
        if missing:
            raise ProtocolError(f"server: no {what} from {missing}: abort setup")
        return blobs

    def route_requests(self, inbox: Inbox) -> list[Envelope]:
        out = []
        for env in inbox:
            self._check(env, TAG_REQUEST, self.federation)
            r = env.sender
            if r in self._requests or env.payload.meta.get("receiver") != r:
                raise ProtocolError(f"server: duplicate or misaddressed request from {r!r}")
            request = SumRequest.from_payload(env.payload, "server")
            if r in request.senders or not set(request.senders) <= self.federation:
                raise ProtocolError(f"server: request of {r!r} lists invalid senders")
            if not request.senders or len(request.senders) < self.min_senders:
                raise ProtocolError(
                    f"server: {r!r} asks for a sum of {len(request.senders)} senders "
                    f"(min_senders={self.min_senders})"
                )
            self._requests[r] = request
            payload = request.to_payload(self._r, r)
            out.extend(
                Envelope(self.party_id, k, TAG_ROUTED_REQUEST, payload) for k in request.senders
            )
        self._admit()
        return out

    def _admit(self) -> None:
        """Refuse the round if its contributions would exceed ``max_round_bytes`` (the sizes
        are public: each job's length times its senders)."""
        if self.max_round_bytes is None:
            return
        values = sum(q.length * len(q.senders) for q in self._requests.values())
        size = values * self.bytes_per_value
        if size > self.max_round_bytes:
            raise SumTooLargeError(
                f"server: this round's sums would have the senders send {values:,} values "
                f"(~{size / 1e9:.1f} GB), over max_round_bytes = "
                f"{self.max_round_bytes / 1e9:.1f} GB: refused before anything is encoded "
                "(smaller supports, fewer receivers per round or a higher limit)"
            )

    def deliver(self, inbox: Inbox) -> list[Envelope]:
        got: dict[str, dict[str, Payload]] = {r: {} for r in self._requests}
        for env in inbox:
            self._check(env, TAG_CONTRIBUTION, self.federation)
            r = env.payload.meta.get("receiver")
            if r not in got or env.sender not in self._requests[r].senders:
                raise ProtocolError(f"server: unexpected contribution from {env.sender!r} to {r!r}")
            if env.sender in got[r]:
                raise ProtocolError(f"server: two contributions from {env.sender!r} to {r!r}")
            got[r][env.sender] = env.payload
        out = []
        for r, request in self._requests.items():
            missing = [k for k in request.senders if k not in got[r]]
            if missing:
                raise ProtocolError(
                    f"secure_sum abort: senders {missing} of {r!r}'s sum did not contribute "
                    "(dropped); there is no dropout recovery (one-shot pre-training "
                    "computation): re-run the batch with a fresh round_idx"
                )
            for payload in self._aggregate(r, request, got[r]):
                payload.meta.update(round=self._r, receiver=r)
                out.append(Envelope(self.party_id, r, TAG_DELIVERY, payload))
        return out

    @abstractmethod
    def _aggregate(
        self, receiver: str, request: SumRequest, contributions: dict[str, Payload]
    ) -> list[Payload]:
        """What the server sends ``receiver`` for its job (contributions in sender order)."""

    @property
    def _r(self) -> int:
        if self._round is None:
            raise ProtocolError("secure_sum server: begin_round was not called")
        return self._round

    def _check(self, env: Envelope, tag: str, allowed: frozenset[str]) -> None:
        if env.tag != tag or env.sender not in allowed:
            raise ProtocolError(f"server: unexpected {env.tag!r} from {env.sender!r}")
        if env.payload.meta.get("round") != self._r:
            raise ProtocolError(f"server: {env.tag!r} from {env.sender!r} is for another round")


@dataclass
class SecureSumParties:
    """The server and one party per client (each both a sender and a receiver)."""

    server: SecureSumServer
    clients: dict[str, SecureSumClient]

    def by_id(self) -> dict[str, ProtocolParty]:
        return {self.server.party_id: self.server, **self.clients}

    def roles(self) -> dict[Role, list[str]]:
        return {Role.SERVER: [self.server.party_id], Role.CLIENT: list(self.clients)}


class SecureSum(ABC):
    """A way to deliver ``sum_k B_k`` to one receiver per job (modes: plain, masked, ckks).

    ``min_senders``: senders refuse (and the server rejects) jobs with fewer remote senders;
    with one sender any "sum" is that sender's block, so privacy needs at least 2.
    ``max_round_bytes``: the server refuses a round whose contributions would exceed it
    (:class:`SumTooLargeError`, before any value is encoded); None: no limit.
    """

    name: ClassVar[str]
    setup_phases: ClassVar[tuple[Phase, ...]] = ()
    round_phases: ClassVar[tuple[Phase, ...]] = ROUND_PHASES

    def __init__(self, *, min_senders: int = 1, max_round_bytes: float | None = None) -> None:
        if isinstance(min_senders, bool) or not isinstance(min_senders, int) or min_senders < 1:
            raise ValueError(f"min_senders must be an int >= 1, got {min_senders!r}")
        if max_round_bytes is not None and not max_round_bytes > 0:
            raise ValueError(f"max_round_bytes must be None or > 0, got {max_round_bytes!r}")
        self.min_senders = min_senders
        self.max_round_bytes = max_round_bytes

    def bytes_per_value(self, n_clients: int) -> float:
        """Wire bytes of one encoded value in this mode (the admission limit's unit)."""
        return 8.0

    def _limited(self, server: SecureSumServer, n_clients: int) -> SecureSumServer:
        """``server`` with this protocol's admission limit (``max_round_bytes``)."""
        server.max_round_bytes = self.max_round_bytes
        server.bytes_per_value = self.bytes_per_value(n_clients)
        return server

    @abstractmethod
    def create_parties(self, server_id: str, client_ids: Sequence[str]) -> SecureSumParties:
        """The server's and every client's state for one federation."""

    @staticmethod
    def _check_ids(server_id: str, client_ids: Sequence[str]) -> list[str]:
        ids = list(client_ids)
        if not all(isinstance(c, str) for c in ids) or len(set(ids)) != len(ids):
            raise ValueError("client ids must be distinct strings")
        if server_id in ids:
            raise ValueError("the server id must differ from the client ids")
        return ids


# ------------------------------------------------------------------------------------ driver


def setup_secure_sums(
    protocol: SecureSum,
    parties: SecureSumParties,
    transmit: Transmit = no_transport,
    invoke: Invoke | None = None,
) -> None:
    """Run the mode's one-off setup phases (key exchange); a no-op for ``plain``."""
    run_phases(
        protocol.setup_phases, parties.roles(), invoke or default_invoke(parties.by_id()), transmit
    )


def run_secure_sums(
    protocol: SecureSum,
    parties: SecureSumParties,
    jobs: Mapping[str, Mapping[str, Block]],
    transmit: Transmit = no_transport,
    *,
    round_idx: int = 0,
    supports: Mapping[str, Support] | None = None,
    sparse_result: bool | None = None,
    invoke: Invoke | None = None,
    dropped: Mapping[str, str] | None = None,
) -> dict[str, SumResult]:
    """Run one batch of sums; returns each receiver's :class:`SumResult`.

    ``jobs[r][k]`` is sender k's block for receiver r (all of one job the same shape;
    ``jobs[r][r]``, if present, is r's local term). ``supports[r]``: the public support of
    r's job (default: dense, every entry). ``sparse_result``: ``None`` = a CSR result when
    every block of the job is sparse. ``round_idx`` must be fresh per call (e.g. the hop).
    ``dropped`` (tests): party id -> phase method before which it goes silent.

    In-process convenience: each client's inputs are handed to its own state directly; in a
    distributed run each client calls ``begin_round`` / ``expect_sum`` / ``add_contribution``
    itself and the phases run through the federation's executor and channel.
    """
    supports = supports or {}
    unknown = (set(jobs) | {k for b in jobs.values() for k in b}) - set(parties.clients)
    if unknown or not set(supports) <= set(jobs):
        raise ValueError(f"jobs / supports name unknown parties or receivers: {sorted(unknown)}")
    for client in parties.clients.values():
        client.begin_round(round_idx)
    parties.server.begin_round(round_idx)
    for r, blocks in jobs.items():
        if not blocks:
            raise ValueError(f"job of {r!r} has no block, so no shape")
        shapes = {_block_shape(b) for b in blocks.values()}
        if len(shapes) != 1:
            raise ValueError(f"blocks of {r!r}'s job differ in shape: {sorted(shapes)}")
        sparse = all(map(is_sparse, blocks.values())) if sparse_result is None else sparse_result
        request = SumRequest(
            tuple(k for k in blocks if k != r), shapes.pop(), supports.get(r), sparse
        )
        parties.clients[r].expect_sum(request, local=blocks.get(r))
        for k in request.senders:
            parties.clients[k].add_contribution(r, blocks[k])
    run_phases(
        protocol.round_phases,
        parties.roles(),
        invoke or default_invoke(parties.by_id()),
        transmit,
        dropped,
    )
    results = {}
    for r in jobs:
        res = parties.clients[r].result()
        if res is None:
            if r in (dropped or {}):
                continue
            raise ProtocolError(f"{protocol.name}: receiver {r!r} holds no result")
        results[r] = res
    return results
