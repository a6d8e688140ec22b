"""Pseudo items that hide which items a user rated (FeSoG, FedGNN).

* :func:`sample_non_interacted` — q items per user drawn uniformly from the items the user
  has **not** rated (train split), without repetition within a user; vectorised rejection
  sampling over the whole batch (each user's draw depends only on its own item set).
* FeSoG labels them with the rounded, clipped local prediction (:mod:`.fesog`) and trains on
  them, so their gradients are real gradients under pseudo labels.
* :func:`gaussian_pseudo_gradients` — FedGNN: the pseudo rows' gradients are drawn from a
  Gaussian with the mean and covariance of the user's real item-embedding gradient rows
  (Wu et al. 2021). Deviation: with fewer than two real rows the covariance is undefined; we
  then use an isotropic Gaussian with the variance of the row's entries (as the FeSoG
  authors' FedGNN code does for every user). A ridge of 1e-6 × the mean variance makes
  rank-deficient covariances (fewer rows than dimensions) factorisable.
"""

from __future__ import annotations

import numpy as np
import torch

from securefgl.algorithms.recommendation.segment import segment_outer, segment_sum


def sample_non_interacted(
    slot: np.ndarray,
    item: np.ndarray,
    n_slots: int,
    n_items: int,
    q: int,
    rng: np.random.Generator,
    max_tries: int = 64,
) -> tuple[np.ndarray, np.ndarray]:
    """(slot, item) of q distinct items per slot that the slot's user did not rate:
    vectorised rejection sampling, then an exact draw for the users it has not settled."""
    if q <= 0 or n_slots == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    rated = np.bincount(slot, minlength=n_slots)
    if np.any(rated + q > n_items):
        raise ValueError("q pseudo items exceed the number of unrated items for some user")
    taken = np.unique(slot.astype(np.int64) * n_items + item)
    out_slot = np.repeat(np.arange(n_slots, dtype=np.int64), q)
    out_item = rng.integers(0, n_items, out_slot.size)
    for _ in range(max_tries):
        key = out_slot * n_items + out_item
        bad = np.isin(key, taken)
        # duplicates within a user: keep the first occurrence
        _, first = np.unique(key, return_index=True)
        dup = np.ones(key.size, bool)
        dup[first] = False
        bad |= dup
        if not bad.any():
            return out_slot, out_item
        out_item[bad] = rng.integers(0, n_items, int(bad.sum()))
    # users whose q is a large share of their unrated items (e.g. M = 1000 of MovieLens'
    # 1682): draw exactly, without replacement from their unrated items
    for u in np.unique(out_slot[bad]):
        mine = out_slot == u
        free = np.setdiff1d(np.arange(n_items), item[slot == u], assume_unique=False)
        out_item[mine] = rng.choice(free, size=q, replace=False)
    return out_slot, out_item


def factor_rows(
    z: torch.Tensor, factor: torch.Tensor, slot: torch.Tensor, n_slots: int
) -> torch.Tensor:
    """``factor[slot[i]] @ z[i]`` for every row, batched per user, never one d×d factor per
    row: a view when every user has its rows in order and as many as the others (as
    pseudo rows are sampled), else rows padded to the largest count."""
    d = z.shape[1]
    counts = torch.bincount(slot, minlength=n_slots)
    factor_t = factor.transpose(1, 2)
    if counts.numel() and bool((counts == counts[0]).all() and (slot.diff() >= 0).all()):
        return torch.bmm(z.view(n_slots, -1, d), factor_t).view(-1, d)
    order = torch.argsort(slot, stable=True)
    rank = torch.arange(slot.numel()) - (torch.cumsum(counts, 0) - counts)[slot[order]]
    padded = z.new_zeros(n_slots, int(counts.max()) if counts.numel() else 0, d)
    padded[slot[order], rank] = z[order]
    out = torch.empty_like(z)
    out[order] = torch.bmm(padded, factor_t)[slot[order], rank]
    return out


def gaussian_pseudo_gradients(
    real_grad: torch.Tensor,
    real_slot: torch.Tensor,
    pseudo_slot: torch.Tensor,
    n_slots: int,
    gen: torch.Generator | None = None,
) -> torch.Tensor:
    """Rows ~ N(mean_u, cov_u) of each user's real gradient rows, one per pseudo item."""
    d = real_grad.shape[1]
    g = real_grad.detach().double()
    if not torch.isfinite(g).all():
        raise FloatingPointError(
            "non-finite item gradients: training diverged (lower the learning rate)"
        )
    cnt = torch.bincount(real_slot, minlength=n_slots).double()
    mean = segment_sum(g, real_slot, n_slots) / cnt.clamp_min(1).unsqueeze(1)
    centred = g - mean[real_slot]
    cov = segment_outer(centred, centred, real_slot, n_slots)
    cov = cov / cnt.clamp_min(1).view(-1, 1, 1)
    # fewer than two rows: isotropic with the variance of the row entries
    sq = segment_sum((g - g.mean(1, keepdim=True)) ** 2, real_slot, n_slots).sum(1)
    iso = sq / (cnt * d).clamp_min(1)
    eye = torch.eye(d, dtype=torch.float64)
    few = cnt < 2
    cov[few] = iso[few].view(-1, 1, 1) * eye
    # Cholesky with a relative ridge (1e-6 of the mean variance): rank-deficient when a
    # user has fewer rows than dimensions
    tr = cov.diagonal(dim1=1, dim2=2).mean(1).clamp_min(1e-30)
    chol = torch.linalg.cholesky(cov + (1e-6 * tr).view(-1, 1, 1) * eye)
    z = torch.randn(pseudo_slot.numel(), d, generator=gen)  # float32: noise shape only
    out = factor_rows(z, chol.float(), pseudo_slot, n_slots)
    return out.add_(mean.float()[pseudo_slot]).to(real_grad.dtype)
