"""Graph-classification data: TU loading, Dirichlet label skew, folds and client views."""

import hashlib
import os

import numpy as np
import pytest
import torch

from securefgl.data.graph_datasets import (
    GraphDataset,
    load_graph_dataset,
    resolve_graph_name,
    synthetic_graphs,
)
from securefgl.data.graph_views import (
    build_graph_views,
    equal_sizes,
    label_skew_partition,
    soft_dirichlet,
    stratified_folds,
)
from tests.securefgl.data.test_views import reachable

REAL_ROOT = os.environ.get("SECUREFGL_DATA")


def fingerprint(x: np.ndarray, edges: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).tobytes() + edges.tobytes()).hexdigest()


def test_soft_dirichlet_caps_and_normalises():
    rng = np.random.default_rng(0)
    priors = soft_dirichlet(0.1, 3, 500, rng, cap=0.9)
    assert np.allclose(priors.sum(1), 1) and priors.max() <= 0.9 + 1e-12
    assert (priors.max(1) > 0.89).mean() > 0.3  # α = 0.1: many capped rows


def test_label_skew_equal_sizes_and_more_skew_for_small_alpha():
    labels = np.repeat([0, 1], 600)
    shares = {}
    for alpha in (0.3, 10.0):
        a = label_skew_partition(labels, 12, alpha, seed=1)
        sizes = np.bincount(a, minlength=12)
        assert a.min() == 0 and sizes.max() - sizes.min() <= 1
        counts = np.stack([np.bincount(labels[a == i], minlength=2) for i in range(12)])
        shares[alpha] = (counts.max(1) / counts.sum(1)).mean()
    assert shares[0.3] > shares[10.0] + 0.15
    again = label_skew_partition(labels, 12, 0.3, seed=1)
    assert np.array_equal(again, label_skew_partition(labels, 12, 0.3, seed=1))
    assert equal_sizes(10, 3).tolist() == [4, 3, 3]


def test_stratified_folds_balance_every_class():
    labels = np.array([0] * 23 + [1] * 7 + [2] * 11)
    folds = stratified_folds(labels, 5, np.random.default_rng(3))
    for c in range(3):
        per_fold = np.bincount(folds[labels == c], minlength=5)
        assert per_fold.max() - per_fold.min() <= 1
    sizes = np.bincount(folds, minlength=5)
    assert sizes.max() - sizes.min() <= 1


def test_views_hold_only_their_own_graphs_as_copies():
    data = synthetic_graphs(num_graphs=90, seed=4)
    part, views = build_graph_views(data, 5, alpha=0.5, seed=7)
    global_arrays = {data.x.ctypes.data, data.edge_index.ctypes.data, data.y.ctypes.data}
    seen: set[str] = set()
    for i, v in enumerate(views):
        mine = np.flatnonzero(part.assignment == i)
        assert v.num_graphs == mine.size and v.client_id == i
        expect = sorted(fingerprint(*data.graph(g)) for g in mine)
        own = v.dataset()
        got = sorted(fingerprint(*own.graph(g)) for g in range(own.num_graphs))
        assert got == expect  # exactly its graphs, nothing of another client
        assert not (set(got) & seen)
        seen |= set(got)
        assert torch.equal(v.train_mask, ~v.test_mask)
        assert sorted(v.y.tolist()) == sorted(data.y[mine].tolist())
        objs = list(reachable(v))
        assert not any(isinstance(o, GraphDataset) for o in objs)
        for t in (o for o in objs if isinstance(o, torch.Tensor)):
            assert t.numel() == 0 or t.untyped_storage().data_ptr() not in global_arrays
    assert part.report(data).to_dict()["sizes"] == [18] * 5


def test_resolve_graph_name():
    assert resolve_graph_name("imdb_binary") == "imdb-binary"
    assert resolve_graph_name("NCI1") == "nci1"
    with pytest.raises(ValueError, match="unknown graph dataset"):
        resolve_graph_name("Cora")


@pytest.mark.datasets
@pytest.mark.skipif(not REAL_ROOT, reason="SECUREFGL_DATA is not set")
def test_tu_datasets_match_table_1(tmp_path, monkeypatch):
    if not os.environ.get("SECUREFGL_CACHE"):  # a fresh cache: PyG processes NCI1 (~10 s)
        monkeypatch.setenv("SECUREFGL_CACHE", str(tmp_path))
    nci1 = load_graph_dataset("NCI1")
    assert (nci1.num_graphs, nci1.num_features, nci1.num_classes) == (4110, 37, 2)
    assert abs(nci1.num_nodes.mean() - 29.87) < 0.01  # GPFL Table 1
    assert abs(nci1.edge_index.shape[1] / 2 / nci1.num_graphs - 32.30) < 0.01
    proteins = load_graph_dataset("PROTEINS")
    assert (proteins.num_graphs, proteins.num_features) == (1113, 3)
    assert abs(proteins.num_nodes.mean() - 39.06) < 0.01
