"""Supports: public sets of block positions a sum encodes, and their wire form.

Masked sums only cancel on a common index set, so the senders of a job encode either every
entry or the entries of a :class:`Support` the receiver publishes in its request. The support
is public (server, receiver, the job's senders); in the ``masked`` and ``ckks`` modes
nothing is revealed about which entries inside it a given sender fills.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from protocols.base import ProtocolError
from protocols.secure_sum.blocks import Block, as_shape, block_shape, canonical_coo, is_sparse
from protocols.wire import Payload, WireFormatError


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


def _nonzero_flat(block: Block, shape: tuple[int, ...]) -> np.ndarray:
    if is_sparse(block):
        coo = canonical_coo(block)
        return coo.row.astype(np.int64) * shape[1] + coo.col.astype(np.int64)
    return np.flatnonzero(np.asarray(block))


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

    FedStruct (Aliakbari et al. 2025, App. D): B_ijk is zero outside the rows of i's nodes with
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
        self.shape = as_shape(shape)
        self.rows, self.cols, self._flat = rows, cols, flat

    @classmethod
    def product(
        cls,
        shape: Iterable[int],
        rows: Iterable[int] | None = None,
        cols: Iterable[int] | None = None,
    ) -> Support:
        """``rows x cols`` of a 2-D shape (``None`` = all rows / all columns)."""
        shape = as_shape(shape)
        if len(shape) != 2:
            raise ValueError("a product support needs a 2-D shape")
        r = np.arange(shape[0]) if rows is None else _index_array(rows, shape[0], "row")
        c = np.arange(shape[1]) if cols is None else _index_array(cols, shape[1], "column")
        return cls(shape, rows=r.astype(np.int64), cols=c.astype(np.int64))

    @classmethod
    def pattern(cls, shape: Iterable[int], flat: Iterable[int] | np.ndarray) -> Support:
        """Explicit positions as row-major flat indices into ``shape``."""
        shape = as_shape(shape)
        return cls(shape, flat=_index_array(np.asarray(flat), math.prod(shape), "flat index"))

    @classmethod
    def union_of(cls, blocks: Iterable[Block]) -> Support:
        """The union of the non-zero patterns of ``blocks`` (same shape). Publishing it
        reveals that union (not which block contributed which entry)."""
        blocks = list(blocks)
        if not blocks:
            raise ValueError("union_of needs at least one block")
        shape = block_shape(blocks[0])
        parts = []
        for block in blocks:
            if block_shape(block) != shape:
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
