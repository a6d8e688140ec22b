"""Rating loaders, per-user split and client views (securefgl.data.ratings / views)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from securefgl.data.datasets import DatasetNotAvailableError
from securefgl.data.rating_views import ClientViews, split_per_user
from securefgl.data.ratings import load_ratings, synthetic_ratings

ROOT = os.environ.get("SECUREFGL_DATA")


def _needs(name: str) -> None:
    from securefgl.data.ratings import RATING_DATASETS

    if not ROOT or not all((Path(ROOT) / f).is_file() for f in RATING_DATASETS[name]):
        pytest.skip(f"{name} not under SECUREFGL_DATA")


def test_split_fractions_and_every_user_trains() -> None:
    data = synthetic_ratings(n_users=50, per_user=10)
    part = split_per_user(data, 0.6, 0.2, seed=1)
    for u in range(data.n_users):
        p = part[data.user == u]
        assert (p == 0).sum() == 6 and (p == 1).sum() == 2 and (p == 2).sum() == 2
    assert not np.array_equal(part, split_per_user(data, 0.6, 0.2, seed=2))
    one = synthetic_ratings(n_users=5, per_user=1)
    assert (split_per_user(one) == 0).all()  # a single rating is a training rating


def _check_views(data, views: ClientViews, users) -> None:
    links = {(int(a), int(b)) for a, b in data.trust.T}
    for u in users:
        v = views.view(int(u))
        mine = data.user == u
        own = dict(zip(data.item[mine].tolist(), data.rating[mine].tolist(), strict=True))
        got = {}
        for items, ratings in (
            (v.train_items, v.train_ratings),
            (v.val_items, v.val_ratings),
            (v.test_items, v.test_ratings),
        ):
            for i, r in zip(items.tolist(), ratings.tolist(), strict=True):
                assert i not in got  # splits are disjoint
                got[i] = r
        assert got == pytest.approx(own)  # exactly the user's own ratings, nothing else
        expect = {b for a, b in links if a == u} | {a for a, b in links if b == u}
        assert set(v.social.tolist()) == expect  # only links that involve the user


def test_views_hold_only_own_data_synthetic() -> None:
    data = synthetic_ratings(n_users=60, per_user=8, n_trust=150)
    views = ClientViews.from_data(data)
    _check_views(data, views, range(data.n_users))


def test_gather_matches_views() -> None:
    data = synthetic_ratings(n_users=40, per_user=7)
    views = ClientViews.from_data(data)
    users = np.array([3, 17, 29])
    slot, item, rating = views.gather(users)
    for j, u in enumerate(users):
        v = views.view(int(u))
        assert sorted(item[slot == j].tolist()) == sorted(v.train_items.tolist())


def test_missing_root_raises(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotAvailableError):
        load_ratings("FilmTrust", root=tmp_path)
    with pytest.raises(ValueError):
        load_ratings("NoSuchRec", root=tmp_path)


@pytest.mark.datasets
def test_filmtrust_loader_and_views() -> None:
    _needs("FilmTrust")
    data = load_ratings("FilmTrust")
    assert data.n_users == 1508 and data.n_items == 2071
    assert data.rating_min >= 0.5 and data.rating_max <= 4.0
    assert data.n_ratings <= 35497 and data.trust.shape[0] == 2
    views = ClientViews.from_data(data)
    rng = np.random.default_rng(0)
    _check_views(data, views, rng.choice(data.n_users, 25, replace=False))


@pytest.mark.datasets
@pytest.mark.parametrize("name", ["Ciao", "MovieLens100K"])
def test_other_loaders(name: str) -> None:
    _needs(name)
    data = load_ratings(name, max_users=300, seed=1)
    assert data.n_users == 300
    assert data.rating_min >= 1 and data.rating_max <= 5
    assert data.user.max() < 300 and data.item.max() < data.n_items
    if name == "MovieLens100K":
        assert data.trust.size == 0


@pytest.mark.datasets
def test_filmtrust_fesog_variant_matches_reference_preprocessing() -> None:
    _needs("FilmTrust")
    data = load_ratings("FilmTrust", variant="fesog")
    # FeSoG's filmtrust_FedMF.pkl: 1957 items, 18,662 ratings in 0..7 (874 users incl.
    # 134 trust-only users without ratings, who are not clients here)
    assert (data.n_items, data.n_ratings, data.n_users) == (1957, 18662, 740)
    assert data.rating_min == 0.0 and data.rating_max == 7.0
