"""Per-user rating split, per-user client views, and batched gathering of sampled users.

Split: each user's ratings are shuffled (seeded) and the first ``train`` fraction goes to
train, the next ``val`` fraction to validation, the rest to test (default 60/20/20, the
proportions of FeSoG's preprocessed FilmTrust: 11198/3732/3732). A user's first rating is
always a training rating, so every user can train.

:class:`ClientViews` stores all users' data in CSR arrays (the simulator's storage) and
hands out :class:`UserView` objects that contain **only** one user's ratings and the trust
links that involve that user (a user knows whom it trusts and who trusts it; FeSoG uses the
union as the social neighbourhood). :meth:`ClientViews.gather` packs the views of a batch of
sampled users into flat arrays tagged with the batch slot, so that the users' local programs
run as one tensor program: every segment operation is keyed by the slot, so no user's
computation reads another user's ratings (checked in tests against single-user runs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securefgl.data.ratings import RatingData


@dataclass(frozen=True)
class UserView:
    """Everything one client (user) holds locally."""

    user: int
    train_items: np.ndarray
    train_ratings: np.ndarray
    val_items: np.ndarray
    val_ratings: np.ndarray
    test_items: np.ndarray
    test_ratings: np.ndarray
    social: np.ndarray  # ids of users linked to this user (either direction)


@dataclass(frozen=True)
class CSR:
    ptr: np.ndarray  # int64 [n+1]
    col: np.ndarray  # int64 [nnz]
    val: np.ndarray  # float32 [nnz]

    @classmethod
    def build(cls, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n: int) -> CSR:
        order = np.lexsort((cols, rows))
        ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=ptr[1:])
        return cls(ptr, cols[order].astype(np.int64), vals[order].astype(np.float32))

    def row(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        s, e = self.ptr[r], self.ptr[r + 1]
        return self.col[s:e].copy(), self.val[s:e].copy()

    def lengths(self, rows: np.ndarray) -> np.ndarray:
        return self.ptr[rows + 1] - self.ptr[rows]

    def positions(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slot, position in ``col``) of every entry of the given rows."""
        lens = self.lengths(rows)
        total = int(lens.sum())
        slot = np.repeat(np.arange(rows.size), lens)
        starts = np.repeat(self.ptr[rows], lens)
        offs = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
        return slot, starts + offs

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(slot, col, val) of the given rows; ``slot`` indexes ``rows``."""
        slot, idx = self.positions(rows)
        return slot, self.col[idx], self.val[idx]


def split_per_user(
    data: RatingData, train: float = 0.6, val: float = 0.2, seed: int = 0
) -> np.ndarray:
    """Part per rating: 0 train, 1 validation, 2 test (shuffled within each user)."""
    rng = np.random.default_rng([seed, 11])
    key = rng.random(data.n_ratings)
    order = np.lexsort((key, data.user))
    counts = np.bincount(data.user, minlength=data.n_users)
    starts = np.cumsum(counts) - counts
    rank = np.empty(data.n_ratings, np.int64)
    rank[order] = np.arange(data.n_ratings) - np.repeat(starts, counts)
    frac = rank / np.maximum(counts[data.user], 1)
    part = np.where(frac < train, 0, np.where(frac < train + val, 1, 2))
    part[rank == 0] = 0
    return part.astype(np.int8)


class ClientViews:
    """All users' local data, split per user; hands out per-user views and batches."""

    def __init__(self, data: RatingData, part: np.ndarray, *, social: bool = True) -> None:
        self.n_users, self.n_items = data.n_users, data.n_items
        self.rating_min, self.rating_max = data.rating_min, data.rating_max
        self.name = data.name
        self.split = {}
        for p, key in enumerate(("train", "val", "test")):
            m = part == p
            self.split[key] = CSR.build(data.user[m], data.item[m], data.rating[m], data.n_users)
        if social and data.trust.size:
            a = np.concatenate([data.trust[0], data.trust[1]])
            b = np.concatenate([data.trust[1], data.trust[0]])
            pairs = np.unique(np.stack([a, b]), axis=1)
            self.social = CSR.build(
                pairs[0], pairs[1], np.ones(pairs.shape[1], np.float32), data.n_users
            )
        else:
            self.social = CSR.build(
                np.zeros(0, np.int64),
                np.zeros(0, np.int64),
                np.zeros(0, np.float32),
                data.n_users,
            )

    @classmethod
    def from_data(
        cls,
        data: RatingData,
        train: float = 0.6,
        val: float = 0.2,
        seed: int = 0,
        social: bool = True,
    ) -> ClientViews:
        return cls(data, split_per_user(data, train, val, seed), social=social)

    @property
    def train(self) -> CSR:
        return self.split["train"]

    def active_users(self) -> np.ndarray:
        """Users with at least one training rating (FeSoG excludes cold-start users)."""
        return np.flatnonzero(self.train.lengths(np.arange(self.n_users)) > 0)

    def view(self, user: int) -> UserView:
        tr, va, te = (self.split[k].row(user) for k in ("train", "val", "test"))
        return UserView(user, *tr, *va, *te, self.social.row(user)[0])

    def gather(self, users: np.ndarray, part: str = "train") -> tuple[np.ndarray, ...]:
        """(slot, item, rating) of the sampled users' ratings in ``part``."""
        return self.split[part].gather(np.asarray(users, np.int64))

    def gather_social(self, users: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        slot, nbr, _ = self.social.gather(np.asarray(users, np.int64))
        return slot, nbr

    def warm_items(self) -> np.ndarray:
        """Items with at least one training rating (metrics only: cold-item breakdown)."""
        return np.bincount(self.train.col, minlength=self.n_items) > 0

    def eval_pairs(self, part: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(user, item, rating) of all ratings in ``part`` (for metrics)."""
        csr = self.split[part]
        users = np.arange(self.n_users)
        slot, item, rating = csr.gather(users)
        return users[slot], item, rating
