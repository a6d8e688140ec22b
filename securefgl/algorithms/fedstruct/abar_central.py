"""FedStruct's L-hop combined adjacency Ā, computed centrally (the simulator's reference).

FedStruct (Aliakbari et al., ICLR 2025), Eq. 2 and App. D: ``Ā = Σ_{ℓ=1}^{L_s} β_ℓ Â^ℓ``
with the row-stochastic ``Â = D̃^{-1}(A + I)`` (global degrees); β one-hot at ``L_s`` by
default (the paper's experiments), so ``Ā = Â^{L_s}``. :func:`central_abar` needs the
global graph (SIMULATOR SIDE); it follows the official code's ``calc_abar`` / ``prune``:
optional pruning keeps the global top-``⌈p·n⌉`` values after every multiplication, without
renormalisation. Ties at the cut-off are broken in (row, column) order (the official code's
argsort leaves them arbitrary; ``ties="paper"`` keeps that rule, e.g. to time it). The
pruning helpers are shared with the federated build.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

__all__ = [
    "PRUNE_MODES",
    "TIE_RULES",
    "central_abar",
    "keep_top_values",
    "normalized_adjacency",
    "resolve_beta",
]

PRUNE_MODES = ("sender", "receiver")
#: How :func:`central_abar` breaks ties at the pruning cut-off: ``"canonical"`` keeps the
#: first tied values in (row, column) order (:func:`top_values_of_product`, as the clients
#: do); ``"paper"`` keeps those a partial argsort of the stored values happens to keep (the
#: official code's rule: depends on storage order).
TIE_RULES = ("canonical", "paper")


def resolve_beta(hops: int, beta: Sequence[float] | None = None) -> tuple[float, ...]:
    """``(β_1, ..., β_{L_s})``; ``None`` means one-hot at ``L_s`` (the paper's setting)."""
    if isinstance(hops, bool) or not isinstance(hops, int | np.integer) or hops < 1:
        raise ValueError(f"hops (L_s) must be an integer >= 1, got {hops!r}")
    if beta is None:
        return (0.0,) * (int(hops) - 1) + (1.0,)
    out = tuple(float(b) for b in beta)
    if len(out) != hops:
        raise ValueError(f"beta needs one weight per hop ({hops}), got {len(out)}")
    if not all(math.isfinite(b) for b in out):
        raise ValueError(f"beta must be finite, got {out}")
    return out


def keep_top_values(m: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """``m`` with only its ``k`` largest stored values kept (no renormalisation).

    The repository's ``prune`` (global top over the whole matrix). Returns ``m`` itself
    when it has at most ``k`` stored values; otherwise duplicate entries are summed first
    and the result is in canonical format. Ties at the cut-off are common (Cora, p = 30: a
    quarter of the per-client prunings have up to ~1,000 equal values straddling it) and
    are broken by canonical (row, column) order, so what is kept does not depend on how the
    entries happen to be stored or summed (the paper's code uses an argsort, whose order
    among ties is arbitrary).
    """
    if m.nnz <= max(int(k), 0):
        return m
    m = sp.csr_matrix(m)
    if _has_duplicates(m):
        m = m.copy()
        m.sum_duplicates()
    out = top_values_of_product(m, k)
    out.sort_indices()
    return out


def top_values_of_product(m: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """:func:`keep_top_values` for ``m`` without duplicate entries (as every sparse product
    and sum is); the result keeps ``m``'s storage order. Only the tied entries are ordered,
    so the cost is one partition of the values. Storage order does not change the values
    of a later product ``X @ result`` (each entry sums over ``X``'s row in ``X``'s order)."""
    k = max(int(k), 0)
    if m.nnz <= k:
        return m
    if k == 0:
        return empty(*m.shape)
    data = m.data
    cut = np.partition(data, data.size - k)[data.size - k]  # the k-th largest value
    keep = data > cut
    tied = np.flatnonzero(data == cut)
    need = k - int(np.count_nonzero(keep))  # >= 1
    if need < tied.size:  # ties straddle the cut-off: the first in (row, column) order
        rows = np.searchsorted(m.indptr, tied, side="right") - 1
        key = rows.astype(np.int64) * m.shape[1] + m.indices[tied]
        tied = tied[np.argpartition(key, need - 1)[:need]]
    keep[tied] = True
    if cut <= 0:
        keep &= data != 0  # no explicit zeros (entries of Ā are products of values >= 0)
    kept_before = np.concatenate(([0], np.cumsum(keep)))
    return sp.csr_matrix((data[keep], m.indices[keep], kept_before[m.indptr]), shape=m.shape)


def argsort_top_values(m: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """The official code's top-``k``: zero the ``nnz - k`` smallest stored values by a
    partial argsort (among ties at the cut-off, which are kept depends on storage order)
    and drop them. Modifies and returns ``m`` (a fresh product) when it has more than
    ``k`` stored values, else returns it unchanged."""
    k = max(int(k), 0)
    if m.nnz <= k:
        return m
    if k == 0:
        return empty(*m.shape)
    m.data[np.argpartition(m.data, m.nnz - k)[: m.nnz - k]] = 0.0
    m.eliminate_zeros()
    return m


def scaled(beta: float, p: sp.csr_matrix, pruned: bool) -> sp.csr_matrix:
    """``β·P``; a pruned ``P`` (storage order kept by the pruning) is stored sorted, as the
    central reference stores it."""
    out = sp.csr_matrix(beta * p)
    if pruned:
        out.sort_indices()
    return out


def _has_duplicates(m: sp.csr_matrix) -> bool:
    """Whether ``m`` stores some position twice, in O(nnz): the CSC conversion is a stable
    counting sort, so a repeated (row, column) shows as equal neighbours in one column."""
    if m.has_canonical_format:
        return False
    t = m.tocsc()
    same = t.indices[1:] == t.indices[:-1]
    starts = t.indptr[1:-1]  # a column's first entry does not repeat the previous column's
    same[starts[(starts > 0) & (starts < t.nnz)] - 1] = False
    return bool(same.any())


def budget(p: float, n: int) -> int:
    return int(math.ceil(p * n))


def as_numpy(a: object) -> np.ndarray:
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()  # type: ignore[attr-defined]
    return np.asarray(a)


def empty(rows: int, cols: int) -> sp.csr_matrix:
    return sp.csr_matrix((rows, cols), dtype=np.float64)


def normalized_adjacency(edge_index: object, num_nodes: int) -> sp.csr_matrix:
    """SIMULATOR SIDE: ``Â = D̃^{-1}(A + I)`` of the global graph (sparse ``[n, n]``).

    Edges are symmetrised and deduplicated, existing self-loops are removed and one
    self-loop per node is added.
    """
    n = int(num_nodes)
    ei = as_numpy(edge_index).astype(np.int64, copy=False)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {ei.shape}")
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        raise ValueError(f"edge_index has node ids outside [0, {n})")
    src, dst = ei
    keep = src != dst
    src, dst = src[keep], dst[keep]
    rows = np.concatenate([src, dst, np.arange(n)])
    cols = np.concatenate([dst, src, np.arange(n)])
    a = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    a.data[:] = 1.0  # duplicates were summed: back to a 0/1 matrix
    deg = np.asarray(a.sum(axis=1)).ravel()
    return sp.csr_matrix(sp.diags(1.0 / deg) @ a)


def central_abar(
    edge_index: object,
    num_nodes: int,
    hops: int,
    beta: Sequence[float] | None = None,
    prune: float | None = None,
    ties: str = "canonical",
) -> sp.csr_matrix:
    """SIMULATOR-SIDE reference: ``Ā = Σ_ℓ β_ℓ Â^ℓ`` from the GLOBAL graph (not federated).

    As the repository's ``calc_abar``: ``P ← Â P`` per hop; with ``prune = p`` the global
    top ``⌈p·n⌉`` values of ``P`` are kept after every multiplication (including the
    first), without renormalisation. Sparse throughout. Rows/columns are global node ids.
    ``ties`` (:data:`TIE_RULES`) chooses which values tied at the cut-off are kept; both
    rules keep the same number of entries and agree whenever no tie straddles a cut-off.
    """
    betas = resolve_beta(hops, beta)
    if prune is not None and not prune > 0:
        raise ValueError(f"prune (p) must be > 0, got {prune!r}")
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}, got {ties!r}")
    keep = top_values_of_product if ties == "canonical" else argsort_top_values
    a_hat = normalized_adjacency(edge_index, num_nodes)
    n = a_hat.shape[0]
    p_mat = sp.identity(n, dtype=np.float64, format="csr")
    abar = empty(n, n)
    for b in betas:
        p_mat = sp.csr_matrix(a_hat @ p_mat)
        if prune is not None:
            p_mat = keep(p_mat, budget(prune, n))
        if b != 0.0:
            abar = abar + b * p_mat
    abar = sp.csr_matrix(abar)
    if prune is not None:
        abar.sort_indices()  # the kept entries (<= p·n of them) in canonical order
    return abar
