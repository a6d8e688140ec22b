"""Ego-graph mixup (Zhang et al., ACM TKDD 2023, §4.3) and its DP option.

A batch of B ego-graph trees (:func:`~securefgl.algorithms.fedego.model.sample_trees`) is
aligned slot by slot: the centres on slot 0, the k-th sampled neighbour of every centre on
slot k, the neighbours' neighbours by (parent slot, child slot), as the authors' template
tree does; the mixed graph holds, per slot, the mean over the batch of the reduction
embeddings r and of the one-hot labels y (an empty slot counts as zeros, as in the
authors' sums divided by B).

DP option (ours; the paper has none, its code a σ on r only): each tree's contribution
(its [43, d] embeddings and [43, C] labels together) is clipped to L2 norm ``clip``, the
batch sums get Gaussian noise N(0, (σ·clip)²) from the caller's secret generator, then the
division by B. A tree's sensitivity is ``clip`` (add/remove one ego-graph), so one batch is
the Gaussian mechanism with multiplier σ on that unit; the server sees every batch.
"""

from __future__ import annotations

import numpy as np

from protocols.dp.rows import clip_rows

__all__ = ["clip_trees", "mix_batch"]


def clip_trees(tr: np.ndarray, ty: np.ndarray, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """Scale each tree b so that ‖(tr[b], ty[b])‖₂ ≤ ``clip`` (trees inside are unchanged)."""
    b, k = tr.shape[0], int(np.prod(tr.shape[1:]))
    flat = clip_rows(np.concatenate([tr.reshape(b, k), ty.reshape(b, -1)], axis=1), clip)
    return flat[:, :k].reshape(tr.shape), flat[:, k:].reshape(ty.shape)


def mix_batch(
    r: np.ndarray, onehot: np.ndarray, trees: np.ndarray, valid: np.ndarray,
    clip: float | None = None, sigma: float = 0.0, noise: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The mixed ego-graph of one batch: (r̄ [43, d], ȳ [43, C]).

    ``r`` [n, d] and ``onehot`` [n, C] per node; ``trees``/``valid`` [B, 43]. With ``sigma``
    > 0 each tree is clipped to ``clip`` and the sums noised from ``noise`` (required)."""
    tr = r[trees] * valid[..., None]
    ty = onehot[trees] * valid[..., None]
    b = trees.shape[0]
    if sigma > 0:
        if noise is None or clip is None:
            raise ValueError("DP mixup needs a clip bound and a secret noise generator")
        tr, ty = clip_trees(tr, ty, clip)
        sr = tr.sum(0) + noise.normal(0.0, sigma * clip, tr.shape[1:])
        sy = ty.sum(0) + noise.normal(0.0, sigma * clip, ty.shape[1:])
    else:
        sr, sy = tr.sum(0), ty.sum(0)
    return sr / b, sy / b
