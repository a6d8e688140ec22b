"""Blocks: the dense or sparse real arrays a secure sum adds, and the checks every mode runs.

A block is a ``numpy`` array or a 2-D ``scipy.sparse`` matrix; a sum's result (*total*) is a
dense array or a CSR array. :func:`canonical_coo` gives a sparse block one form (float64 COO,
no duplicates, no explicit zeros) that checks, supports and encoders share.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp

Block = np.ndarray | sp.sparray | sp.spmatrix
Total = np.ndarray | sp.csr_array


#: Bounds on a block shape: numpy's axes, and row-major flat indices that fit int64.
MAX_AXES = 32
MAX_ENTRIES = 2**62


def as_shape(shape: Iterable[int]) -> tuple[int, ...]:
    """``shape`` as a validated tuple of ints (non-empty, non-negative, at most
    :data:`MAX_AXES` axes and :data:`MAX_ENTRIES` entries)."""
    out = tuple(int(s) for s in shape)
    if not out or len(out) > MAX_AXES or any(s < 0 for s in out):
        raise ValueError(
            f"a block shape is a non-empty tuple of at most {MAX_AXES} non-negative ints, got "
            f"{shape}"
        )
    if math.prod(max(s, 1) for s in out) > MAX_ENTRIES:
        raise ValueError(f"block shape {out} has more than 2^62 entries")
    return out


def block_shape(block: Block) -> tuple[int, ...]:
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
        return block_shape(block), 0.0
    lo, hi = float(np.min(data)), float(np.max(data))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{who}: block holds NaN or infinite values")
    return block_shape(block), max(-lo, hi, 0.0)
