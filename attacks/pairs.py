"""Balanced edge / non-edge pair samples of a graph (the scoring set of link attacks)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def sample_pairs(
    adjacency: sp.csr_matrix, max_pairs: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``max_pairs/2`` true edges (u < v) and as many non-edges, uniformly.

    Returns ``(pairs [m, 2], labels [m])``; non-edges are rejection-sampled in bulk.
    """
    n = adjacency.shape[0]
    upper = sp.triu(adjacency, k=1).tocoo()
    edges = np.stack([upper.row, upper.col], axis=1).astype(np.int64)
    half = min(len(edges), max_pairs // 2)
    if half == 0 or n < 3:
        return np.zeros((0, 2), np.int64), np.zeros(0, bool)
    edges = edges[rng.choice(len(edges), size=half, replace=False)]
    negatives = np.zeros((0, 2), np.int64)
    for _ in range(20):  # non-edges dominate sparse graphs: one or two draws suffice
        cand = rng.integers(0, n, size=(4 * half + 16, 2))
        cand = np.sort(cand, axis=1)
        cand = cand[cand[:, 0] != cand[:, 1]]
        cand = cand[np.asarray(adjacency[cand[:, 0], cand[:, 1]]).ravel() == 0]
        negatives = np.unique(np.vstack([negatives, cand]), axis=0)
        if len(negatives) >= half:
            break
    negatives = negatives[rng.permutation(len(negatives))[:half]]
    pairs = np.vstack([edges, negatives])
    labels = np.r_[np.ones(len(edges), bool), np.zeros(len(negatives), bool)]
    return pairs, labels
