"""Jobs: what a receiver asks for (:class:`SumRequest`), what it learns (:class:`SumResult`),
the errors a job can raise, and the helpers that move a block to and from a job's positions.

A *job* is "receiver r learns ``sum_{k in S} B_k``" for a public sender set S, block shape
and optional :class:`~protocols.secure_sum.support.Support` (FedStruct, Aliakbari et al.
2025, App. D, Algorithm 3: at each hop every client i is the receiver of ``sum_k B_ijk`` and
a sender to the others; many jobs run in one batch). The request is public: the server and
every sender of the job see it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from protocols.base import ProtocolError
from protocols.secure_sum.blocks import Block, Total, as_shape, canonical_coo, is_sparse
from protocols.secure_sum.support import Support
from protocols.wire import Payload


class SupportViolationError(ProtocolError, ValueError):
    """A sender's block is non-zero outside the public support of the job."""


class SumRangeError(ProtocolError, OverflowError):
    """A block holds values too large for the mode's exact range (raised before sending)."""


class TooFewSendersError(ProtocolError):
    """A job has fewer senders than ``min_senders``: with one sender the "sum" is that
    sender's block, revealed to the receiver (raised by the receiver before it announces
    the job, and by the server and the senders)."""


class SumTooLargeError(ProtocolError):
    """The server refuses a round whose sums exceed its ``max_round_bytes`` (raised when it
    routes the requests, before any sender encodes a value)."""


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
        object.__setattr__(self, "shape", as_shape(self.shape))
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
            shape_t = as_shape(shape)
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
