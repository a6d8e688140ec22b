"""Published train / test splits of rating datasets, for comparing with papers that use them.

MovieLens-100K ships five folds ``u1..u5.base`` / ``.test`` (80k / 20k ratings) and
``ua`` / ``ub`` (10 test ratings per user). GC-MC (van den Berg et al., 2017) and FedGNN
(Wu et al., arXiv 2102.04925, §4.1) train on ``u1.base`` and test on ``u1.test``, holding out
20 % of the training ratings for validation; :func:`published_split` does the same for any
of the folds. The default of the recommendation path stays the per-user split
(:func:`~securefgl.data.rating_views.split_per_user`).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from securefgl.data.datasets import data_root
from securefgl.data.integrity import DatasetCorruptError, DatasetNotAvailableError, read_verified
from securefgl.data.ratings import RatingData

SPLITS: dict[str, tuple[str, ...]] = {
    "MovieLens100K": ("u1", "u2", "u3", "u4", "u5", "ua", "ub"),
}
FOLDER = {"MovieLens100K": "MovieLens100K/raw"}  # where each dataset's split files are


def _pairs(root: Path, relpath: str, verify: bool) -> np.ndarray:
    rows = np.loadtxt(io.BytesIO(read_verified(root, relpath, verify)), dtype=np.int64, ndmin=2)
    if rows.shape[1] < 2:
        raise DatasetCorruptError(f"{root / relpath}: rows of user and item ids expected")
    return rows[:, :2]


def published_split(
    data: RatingData,
    fold: str,
    root: str | Path | None = None,
    val: float = 0.2,
    seed: int = 0,
    verify: bool = True,
) -> np.ndarray:
    """Part of every rating of ``data`` (0 train, 1 validation, 2 test) from the dataset's
    published fold: its test file is the test set; a seeded ``val`` fraction of its base
    file is validation, the rest training. Ratings of users ``data`` does not hold (e.g.
    ``max_users``) are ignored; a rating of ``data`` in neither file is an error."""
    folds = SPLITS.get(data.name, ())
    if fold not in folds:
        raise ValueError(
            f"{data.name} has no published split {fold!r} (has: {list(folds) or 'none'}); "
            "use the per-user split"
        )
    if not 0 <= val < 1:
        raise ValueError(f"val must lie in [0, 1), got {val}")
    if data.user_ids.size != data.n_users or data.item_ids.size != data.n_items:
        raise ValueError("published splits need the raw ids (data from load_ratings)")
    base = data_root(root)
    if base is None:
        raise DatasetNotAvailableError(f"no data root for {data.name}'s split {fold!r}")
    keys = data.user * data.n_items + data.item
    order = np.argsort(keys)
    part = np.full(data.n_ratings, -1, np.int64)
    for p, suffix in ((0, "base"), (2, "test")):
        pairs = _pairs(base, f"{FOLDER[data.name]}/{fold}.{suffix}", verify)
        u = np.searchsorted(data.user_ids, pairs[:, 0])
        i = np.searchsorted(data.item_ids, pairs[:, 1])
        held = (u < data.n_users) & (i < data.n_items)
        held[held] &= (data.user_ids[u[held]] == pairs[held, 0]) & (
            data.item_ids[i[held]] == pairs[held, 1]
        )
        want = u[held] * data.n_items + i[held]
        at = np.searchsorted(keys[order], want)
        found = at < keys.size
        found[found] &= keys[order][at[found]] == want[found]
        part[order[at[found]]] = p
    if (part < 0).any():
        raise DatasetCorruptError(
            f"{data.name}: {int((part < 0).sum())} ratings are in neither {fold}.base nor "
            f"{fold}.test"
        )
    train = np.flatnonzero(part == 0)
    rng = np.random.default_rng([seed, 13])
    part[rng.choice(train, size=round(val * train.size), replace=False)] = 1
    return part
