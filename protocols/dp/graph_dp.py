"""Edge-level DP for adjacency blocks: EdgeRand and LapGraph (LinkTeller, Wu et al. S&P'22).

Wu, Long, Zhang, Li, IEEE S&P 2022 (arXiv 2108.06504); definitions follow the official code
(``perturb_adj_discrete`` = EdgeRand, ``perturb_adj_continuous`` = LapGraph). EdgeRand is
randomised response on every pair (flip probability 1/(1 + e^ε)); ``preserve_sparsity``
(our addition, after Hidano & Murakami 2022) spends part of ε on a Laplace estimate of |E|
and subsamples the output to about |E| edges. LapGraph adds Laplace noise to every pair and
keeps the top ``T = round(|E| + Lap(1/ε₁))`` (deviation: rounded, not truncated). Neither
densifies the n×n matrix (exact sampling in pair-index space).

Threat model: edge-level DP. Neighbouring blocks differ in one undirected edge
(``symmetric=True``) or one directed entry (``symmetric=False``: a cross-client block); the
released block is ε-DP against everyone who receives it. Not protected: nodes (deg·ε),
features, labels. A cross edge perturbed in both directions is charged twice: perturb one
block and transpose it. In full: ``docs/protocols.md``.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from protocols.dp.rng import as_rng

DEFAULT_MAX_NNZ = 50_000_000
# LapGraph asks for this many non-edges above the threshold beyond the shortfall, so that one
# pass usually suffices (tests shrink them to exercise the threshold-lowering loop).
_SHORTFALL = 1.0
_MARGIN_SD = 4.0
_MARGIN_ABS = 16.0


# -- pair-index space ----------------------------------------------------------------------
def _n_pairs(shape: tuple[int, int], symmetric: bool) -> int:
    n_rows, n_cols = shape
    return n_rows * (n_rows - 1) // 2 if symmetric else n_rows * n_cols


def _row_offsets(n: int) -> np.ndarray:
    i = np.arange(n, dtype=np.int64)
    return i * n - i * (i + 1) // 2


def _edge_pairs(
    adj: sp.spmatrix | np.ndarray, symmetric: bool
) -> tuple[np.ndarray, tuple[int, int]]:
    """Sorted unique pair indices of the edges of ``adj`` (binarised)."""
    A = sp.coo_matrix(adj)
    shape = (int(A.shape[0]), int(A.shape[1]))
    mask = A.data != 0
    rows, cols = A.row[mask].astype(np.int64), A.col[mask].astype(np.int64)
    if symmetric:
        if shape[0] != shape[1]:
            raise ValueError(f"symmetric=True needs a square block, got shape {shape}")
        lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
        keep = lo != hi  # self-loops are not pairs
        lo, hi = lo[keep], hi[keep]
        idx = _row_offsets(shape[0])[lo] + (hi - lo - 1)
    else:
        idx = rows * shape[1] + cols
    idx = np.sort(idx)  # np.unique's hash path is ~5x slower on millions of int64
    return idx[np.concatenate([[True], idx[1:] != idx[:-1]])] if idx.size else idx, shape


def _pair_coords(
    idx: np.ndarray, shape: tuple[int, int], symmetric: bool
) -> tuple[np.ndarray, np.ndarray]:
    idx = np.asarray(idx, dtype=np.int64)
    if not symmetric:
        return idx // shape[1], idx % shape[1]
    offsets = _row_offsets(shape[0])
    i = np.searchsorted(offsets, idx, side="right") - 1
    return i, idx - offsets[i] + i + 1


def _to_matrix(
    idx: np.ndarray, shape: tuple[int, int], symmetric: bool, dtype: np.dtype | type = np.float64
) -> sp.csr_matrix:
    rows, cols = _pair_coords(idx, shape, symmetric)
    if symmetric:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    out = sp.csr_matrix((np.ones(rows.size, dtype=dtype), (rows, cols)), shape=shape)
    out.sum_duplicates()
    out.sort_indices()
    return out


def _skip_map(ranks: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """Position of the ``r``-th (0-based) element of ``[0, N)`` not in sorted ``excluded``."""
    if excluded.size == 0:
        return ranks
    gaps = excluded - np.arange(excluded.size, dtype=np.int64)  # free slots before each
    return ranks + np.searchsorted(gaps, ranks, side="right")


def _bernoulli_ranks(count: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices in ``[0, count)``, each included independently w.p. ``p``."""
    if count <= 0 or p <= 0.0:
        return np.empty(0, dtype=np.int64)
    if p >= 1.0:
        return np.arange(count, dtype=np.int64)
    expected = count * p
    chunk = int(min(expected + 6.0 * math.sqrt(expected) + 16.0, count + 1))
    parts: list[np.ndarray] = []
    last = -1
    while True:
        gaps = rng.geometric(p, size=chunk).astype(np.int64)
        # tiny p: draws can exceed int64 (wrapping negative); any gap > count ends the run
        gaps = np.where((gaps <= 0) | (gaps > count), count + 1, gaps)
        pos = last + np.cumsum(gaps)
        inside = pos[pos < count]
        parts.append(inside)
        if inside.size < pos.size:
            break
        last = int(pos[-1])
    return np.concatenate(parts)


def _check_budget(epsilon: float, count_fraction: float) -> None:
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    if not 0.0 < count_fraction < 1.0:
        raise ValueError(f"count_fraction must be in (0, 1), got {count_fraction}")


def _check_size(expected: float, max_nnz: int, what: str) -> None:
    if expected > max_nnz:
        raise ValueError(
            f"{what} would produce ~{expected:.3g} entries (> max_nnz={max_nnz}); raise max_nnz, "
            "use a larger epsilon, or EdgeRand(preserve_sparsity=True) / LapGraph"
        )


def _noisy_edge_count(m: int, n_pairs: int, eps: float, rng: np.random.Generator) -> float:
    """|E| + Lap(1/ε) clipped to [0, n_pairs] (sensitivity 1: one edge)."""
    return float(np.clip(m + rng.laplace(0.0, 1.0 / eps), 0.0, n_pairs))


# -- EdgeRand --------------------------------------------------------------------------------
def edge_rand(
    adj: sp.spmatrix | np.ndarray,
    epsilon: float,
    *,
    symmetric: bool = True,
    preserve_sparsity: bool = False,
    count_fraction: float = 0.01,
    rng: np.random.Generator | int | None = None,
    max_nnz: int = DEFAULT_MAX_NNZ,
) -> sp.csr_matrix:
    """ε-edge-DP randomised response on every pair of ``adj`` (LinkTeller's EdgeRand).

    ``preserve_sparsity`` spends ``count_fraction``·ε on estimating |E| and subsamples the
    randomised edges so that E[#edges] ≈ |E| (see the module docstring). ``rng``: a
    generator, an integer seed, or ``None`` (secret seed). Returns a binary CSR matrix of
    ``adj``'s shape (symmetric with an empty diagonal if ``symmetric``).
    """
    rng = as_rng(rng)
    if preserve_sparsity:
        _check_budget(epsilon, count_fraction)
    elif not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    edges, shape = _edge_pairs(adj, symmetric)
    n_pairs, m = _n_pairs(shape, symmetric), int(edges.size)
    n_zero = n_pairs - m
    if preserve_sparsity:
        m_hat = _noisy_edge_count(m, n_pairs, count_fraction * epsilon, rng)
        flip = edge_rand_flip_probability((1.0 - count_fraction) * epsilon)
        expected_after_rr = m_hat * (1.0 - flip) + (n_pairs - m_hat) * flip
        keep = min(1.0, m_hat / expected_after_rr) if expected_after_rr > 0 else 0.0
    else:
        flip = edge_rand_flip_probability(epsilon)
        keep = 1.0
    _check_size(m * (1.0 - flip) * keep + n_zero * flip * keep, max_nnz, "EdgeRand")
    kept_edges = edges[rng.random(m) < (1.0 - flip) * keep]
    false_edges = _skip_map(_bernoulli_ranks(n_zero, flip * keep, rng), edges)
    return _to_matrix(np.concatenate([kept_edges, false_edges]), shape, symmetric)


def edge_rand_flip_probability(epsilon: float) -> float:
    """Probability that EdgeRand flips a pair: s/2 = 1/(1 + e^ε), with s = 2/(e^ε + 1)."""
    return 1.0 / (1.0 + math.exp(epsilon)) if epsilon < 700.0 else 0.0


# -- LapGraph --------------------------------------------------------------------------------
def _laplace_sf(x: float, b: float) -> float:
    """P[L > x] for L ~ Laplace(0, b)."""
    if x == math.inf:
        return 0.0
    if x == -math.inf:
        return 1.0
    return 0.5 * math.exp(-x / b) if x >= 0 else 1.0 - 0.5 * math.exp(x / b)


def _laplace_isf(s: np.ndarray | float, b: float) -> np.ndarray:
    """Inverse of :func:`_laplace_sf` (vectorised; s in (0, 1))."""
    s = np.asarray(s, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(s <= 0.5, -b * np.log(2.0 * s), b * np.log(2.0 * (1.0 - s)))


def _laplace_band(n: int, lo: float, hi: float, b: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of Laplace(0, b) conditioned on lying in (lo, hi]."""
    s_hi, s_lo = _laplace_sf(hi, b), _laplace_sf(lo, b)
    s = s_lo - rng.random(n) * (s_lo - s_hi)  # in (s_hi, s_lo]
    return _laplace_isf(s, b)


def lap_graph(
    adj: sp.spmatrix | np.ndarray,
    epsilon: float,
    *,
    symmetric: bool = True,
    count_fraction: float = 0.01,
    rng: np.random.Generator | int | None = None,
    max_nnz: int = DEFAULT_MAX_NNZ,
) -> sp.csr_matrix:
    """ε-edge-DP LapGraph: keep the top-T pairs of A + Laplace(1/ε₂), T ≈ |E| + Lap(1/ε₁).

    ε₁ = ``count_fraction``·ε, ε₂ = ε − ε₁. Exact top-T selection without materialising the
    noise on all pairs. Returns a binary CSR matrix with T (undirected) edges.
    """
    rng = as_rng(rng)
    _check_budget(epsilon, count_fraction)
    eps_count = count_fraction * epsilon
    b = 1.0 / (epsilon - eps_count)
    edges, shape = _edge_pairs(adj, symmetric)
    n_pairs, m = _n_pairs(shape, symmetric), int(edges.size)
    n_zero = n_pairs - m
    target = int(round(_noisy_edge_count(m, n_pairs, eps_count, rng)))
    _check_size(target, max_nnz, "LapGraph")
    edge_vals = 1.0 + rng.laplace(0.0, b, size=m)
    if target == 0:
        return _to_matrix(np.empty(0, dtype=np.int64), shape, symmetric)

    # Non-edges whose noise exceeds a threshold tau, sampled exactly; lower tau until the
    # entries above it number at least `target` — the top-T set then lies above tau.
    zero_ranks = np.empty(0, dtype=np.int64)  # sorted ranks among non-edges
    zero_vals = np.empty(0, dtype=np.float64)
    tau, sf_tau = math.inf, 0.0
    while True:
        above = int(np.count_nonzero(edge_vals > tau)) + zero_ranks.size
        if above >= target or sf_tau >= 1.0 or n_zero == 0:
            break
        want = max(
            1.0, _SHORTFALL * (target - above) + _MARGIN_SD * math.sqrt(target) + _MARGIN_ABS
        )
        sf_new = min(1.0, sf_tau + want / n_zero)
        tau_new = -math.inf if sf_new >= 1.0 else float(_laplace_isf(sf_new, b))
        if not tau_new < tau:  # no representable progress (astronomical n_zero): take all
            tau_new = -math.inf
        sf_new = _laplace_sf(tau_new, b)  # the exact tail mass of the threshold used
        remaining = n_zero - zero_ranks.size
        p_band = 1.0 if sf_new >= 1.0 else (sf_new - sf_tau) / (1.0 - sf_tau)
        _check_size(zero_ranks.size + remaining * p_band, max_nnz, "LapGraph candidates")
        new = _skip_map(_bernoulli_ranks(remaining, p_band, rng), zero_ranks)
        vals = _laplace_band(new.size, tau_new, tau, b, rng)
        order = np.argsort(np.concatenate([zero_ranks, new]), kind="stable")
        zero_ranks = np.concatenate([zero_ranks, new])[order]
        zero_vals = np.concatenate([zero_vals, vals])[order]
        tau, sf_tau = tau_new, sf_new

    cand_idx = np.concatenate([edges, _skip_map(zero_ranks, edges)])
    cand_val = np.concatenate([edge_vals, zero_vals])
    take = min(target, cand_idx.size)
    top = np.argpartition(-cand_val, take - 1)[:take] if take < cand_idx.size else slice(None)
    return _to_matrix(np.sort(cand_idx[top]), shape, symmetric)
