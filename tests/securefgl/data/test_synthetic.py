"""Tests for the contextual SBM generator (securefgl.data.synthetic)."""

import numpy as np
import pytest
import torch
from torch_geometric.utils import contains_self_loops, is_undirected

from securefgl.data import csbm, edge_homophily


def test_default_graph_shapes_and_dtypes():
    d = csbm()
    assert d.num_nodes == 3000 and d.x.shape == (3000, 64)
    assert d.x.dtype == torch.float32 and d.y.dtype == torch.long
    assert d.edge_index.dtype == torch.long
    assert d.name == "csbm" and d.num_classes == 5
    assert int(d.y.min()) == 0 and int(d.y.max()) == 4
    counts = torch.bincount(d.y)
    assert int(counts.max() - counts.min()) <= 1  # balanced


def test_deterministic_by_seed():
    a, b, c = csbm(500, seed=3), csbm(500, seed=3), csbm(500, seed=4)
    for key in ("x", "y", "edge_index"):
        assert torch.equal(a[key], b[key])
    assert not torch.equal(a.x, c.x)
    assert not torch.equal(a.edge_index, c.edge_index) or not torch.equal(a.y, c.y)


@pytest.mark.parametrize("h", [0.0, 0.3, 0.8, 1.0])
def test_homophily_matches_request(h):
    d = csbm(4000, num_classes=4, avg_degree=6.0, homophily=h, seed=1)
    assert abs(edge_homophily(d.edge_index, d.y) - h) <= 0.05


def test_simple_undirected_graph_with_requested_degree():
    d = csbm(2000, avg_degree=10.0, seed=2)
    ei = d.edge_index
    assert is_undirected(ei, num_nodes=d.num_nodes)
    assert not contains_self_loops(ei)
    key = ei[0] * d.num_nodes + ei[1]
    assert torch.equal(key, torch.unique(key))  # coalesced: sorted, no duplicates
    assert abs(ei.size(1) / d.num_nodes - 10.0) < 0.5  # realised average degree


def _centroid_accuracy(d) -> float:
    rng = np.random.default_rng(0)
    perm = rng.permutation(d.num_nodes)
    tr, te = perm[: d.num_nodes // 2], perm[d.num_nodes // 2 :]
    x, y = d.x.numpy(), d.y.numpy()
    cents = np.stack([x[tr][y[tr] == c].mean(0) for c in range(d.num_classes)])
    pred = ((x[te][:, None, :] - cents[None]) ** 2).sum(-1).argmin(1)
    return float((pred == y[te]).mean())


def test_features_carry_the_label():
    chance = 1 / 5
    assert _centroid_accuracy(csbm(2000, feature_signal=1.0, seed=5)) > chance + 0.5
    # without signal the same classifier is near chance: the check can fail
    assert _centroid_accuracy(csbm(2000, feature_signal=0.0, seed=5)) < chance + 0.1


def test_large_graph_is_sparse_and_fast():
    n = 100_000
    d = csbm(n, num_features=8, avg_degree=8.0, seed=0)
    assert d.num_nodes == n
    assert abs(d.edge_index.size(1) - n * 8.0) < 0.01 * n * 8.0
    assert abs(edge_homophily(d.edge_index, d.y) - 0.8) < 0.01


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_nodes": 1},
        {"num_nodes": 10.5},
        {"num_classes": 1},
        {"num_nodes": 4, "num_classes": 5},
        {"num_features": 0},
        {"avg_degree": 0.0},
        {"avg_degree": float("nan")},
        {"num_nodes": 10, "avg_degree": 10.0},
        {"homophily": -0.1},
        {"homophily": 1.5},
        {"feature_signal": -1.0},
    ],
)
def test_invalid_parameters(kwargs):
    with pytest.raises(ValueError):
        csbm(**kwargs)
