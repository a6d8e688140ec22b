"""Tests for securefgl.data.splits.random_split."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from securefgl.data import random_split


def _r(f: float, n: int) -> int:
    return math.floor(f * n + 0.5)


def test_default_is_10_10_80():
    tr, va, te = random_split(1000)
    assert (int(tr.sum()), int(va.sum()), int(te.sum())) == (100, 100, 800)
    assert all(m.dtype == torch.bool and m.shape == (1000,) for m in (tr, va, te))
    assert not (tr & va).any() and not (tr & te).any() and not (va & te).any()
    assert bool((tr | va | te).all())


def test_deterministic_by_seed():
    a, b, c = random_split(500, seed=1), random_split(500, seed=1), random_split(500, seed=2)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])


def test_uniform_over_nodes():
    # over many seeds every node is in train with probability ~0.1 (not stratified,
    # not biased to low indices)
    hits = sum(random_split(200, seed=s)[0].double() for s in range(300))
    freq = hits / 300
    assert abs(float(freq.mean()) - 0.1) < 1e-9
    assert float(freq[:100].mean()) == pytest.approx(float(freq[100:].mean()), abs=0.02)


def test_label_rate_overrides_train_and_test():
    tr, va, te = random_split(1000, train=0.5, test=0.1, label_rate=0.05)
    assert (int(tr.sum()), int(va.sum()), int(te.sum())) == (50, 100, 850)
    tr, va, te = random_split(1000, val=0.2, label_rate=0.8)
    assert (int(tr.sum()), int(va.sum()), int(te.sum())) == (800, 200, 0)


def test_fractions_below_one_leave_nodes_out():
    tr, va, te = random_split(100, train=0.2, val=0.1, test=0.3)
    assert (int(tr.sum()), int(va.sum()), int(te.sum())) == (20, 10, 30)
    assert int((tr | va | te).sum()) == 60


@pytest.mark.parametrize(
    "kwargs",
    [
        {"train": -0.1},
        {"val": -0.01},
        {"test": float("nan")},
        {"train": 0.5, "val": 0.5, "test": 0.1},
        {"label_rate": 1.2},
        {"label_rate": 0.95, "val": 0.1},
        {"label_rate": -0.1},
    ],
)
def test_invalid_fractions(kwargs):
    with pytest.raises(ValueError):
        random_split(100, **kwargs)


def test_invalid_num_nodes():
    with pytest.raises(ValueError):
        random_split(-1)
    with pytest.raises(ValueError):
        random_split(10.0)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 400),
    fr=st.lists(st.floats(0, 1), min_size=3, max_size=3).filter(lambda f: sum(f) <= 1),
    seed=st.integers(0, 2**31),
)
def test_sizes_and_disjointness(n, fr, seed):
    tr, va, te = random_split(n, *fr, seed=seed)
    sizes = [int(m.sum()) for m in (tr, va, te)]
    assert not (tr & va).any() and not (tr & te).any() and not (va & te).any()
    assert sum(sizes) <= n
    assert sizes[0] == min(_r(fr[0], n), n)
    assert sizes[1] == min(_r(fr[1], n), n - sizes[0])
    assert sizes[2] == min(_r(fr[2], n), n - sizes[0] - sizes[1])
    for f, s in zip(fr, sizes, strict=True):
        assert abs(s - f * n) <= 1.0


def test_split_and_random_partition_are_independent_for_one_seed():
    """Same seed everywhere must not put every training node on one client."""
    from securefgl.data import build_client_views, csbm, partition_graph

    g = csbm(num_nodes=1000, seed=0)
    g.train_mask, g.val_mask, g.test_mask = random_split(g.num_nodes, seed=0)
    views = build_client_views(g, partition_graph(g, 10, "random", seed=0).assignment, seed=0)
    counts = [int(v.train_mask.sum()) for v in views]
    assert max(counts) < 40, counts  # 100 training nodes over 10 clients of 100
