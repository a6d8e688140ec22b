"""Published rating splits (MovieLens-100K's u1..u5 folds) map onto the loaded data."""

import dataclasses

import numpy as np
import pytest

from securefgl.data.rating_splits import published_split
from securefgl.data.ratings import load_ratings, synthetic_ratings


def _write(root, rows, name):
    folder = root / "MovieLens100K" / "raw"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(f"{u}\t{i}\t{r}\t0\n" for u, i, r in rows))


@pytest.fixture
def ml_root(tmp_path):
    rng = np.random.default_rng(0)
    rows = sorted({(int(u), int(i)) for u, i in rng.integers(1, 40, size=(400, 2))})
    rows = [(u, i * 3, int(rng.integers(1, 6))) for u, i in rows]  # raw item ids not 0..n-1
    test = set(rng.choice(len(rows), size=len(rows) // 5, replace=False).tolist())
    _write(tmp_path, rows, "u.data")
    _write(tmp_path, [r for k, r in enumerate(rows) if k not in test], "u1.base")
    _write(tmp_path, [r for k, r in enumerate(rows) if k in test], "u1.test")
    return tmp_path, rows, {rows[k][:2] for k in test}


def test_the_test_file_is_the_test_set_and_a_fifth_of_the_base_is_validation(ml_root):
    root, rows, test = ml_root
    data = load_ratings("MovieLens100K", root, verify=False)
    part = published_split(data, "u1", root, verify=False)
    users, items = data.user_ids[data.user].tolist(), data.item_ids[data.item].tolist()
    pairs = list(zip(users, items, strict=True))
    assert len(set(pairs)) == len(rows)
    assert {p for p, k in zip(pairs, part, strict=True) if k == 2} == test
    base = int((part != 2).sum())
    assert int((part == 1).sum()) == round(0.2 * base)
    again = published_split(data, "u1", root, verify=False)
    assert np.array_equal(part, again)  # seeded
    assert not np.array_equal(part, published_split(data, "u1", root, seed=1, verify=False))


def test_a_subsample_keeps_its_own_users_ratings_only(ml_root):
    root, _, _ = ml_root
    data = load_ratings("MovieLens100K", root, max_users=10, verify=False)
    part = published_split(data, "u1", root, verify=False)
    assert part.size == data.n_ratings and set(np.unique(part)) <= {0, 1, 2}


def test_refusals(ml_root):
    root, _, _ = ml_root
    data = load_ratings("MovieLens100K", root, verify=False)
    with pytest.raises(ValueError, match="no published split 'u9'"):
        published_split(data, "u9", root, verify=False)
    generated = dataclasses.replace(synthetic_ratings(), name="MovieLens100K")
    with pytest.raises(ValueError, match="raw ids"):
        published_split(generated, "u1", root, verify=False)
