"""GPFL's split replayed draw for draw: reference draws made by the authors' code
(``label_skew_balance``, ``kfold_split``) with NumPy 2.4 and scikit-learn 1.9."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securefgl.algorithms.common.graph.settings import GraphTaskSettings
from securefgl.data.graph_datasets import synthetic_graphs
from securefgl.data.graph_split_replica import (
    authors_folds,
    authors_label_skew,
    build_authors_views,
)
from securefgl.data.graph_views import build_graph_views

LABELS = [0, 1, 2, 0, 0, 1, 2, 2, 1, 0, 0, 0, 1, 2, 1, 0, 2, 2, 1, 0,
          0, 1, 1, 0, 2, 0, 1, 0, 0, 2, 1, 1, 0, 0, 2, 1, 0, 1, 2, 0]  # fmt: skip
#: label_skew_balance(graphs of LABELS, num_client=4, seed=42, alpha=0.5)
CODE_CHUNKS = [
    [6, 13, 16, 3, 24, 12, 22, 32, 33, 39],
    [29, 1, 5, 8, 14, 18, 30, 31, 35, 37],
    [10, 11, 15, 19, 23, 25, 27, 28, 36, 38],
    [2, 7, 17, 0, 4, 9, 20, 21, 26, 34],
]
FOLD_LABELS = [2, 0, 1, 1, 0, 2, 2, 0, 1, 0, 0, 1, 2, 0, 1, 1, 2, 0, 0, 1, 2, 1, 0]
#: StratifiedKFold(5, shuffle=True, random_state=7) on FOLD_LABELS: each item's test fold
SKLEARN_FOLDS = [2, 3, 0, 2, 2, 4, 0, 2, 1, 4, 3, 3, 1, 1, 1, 4, 0, 1, 0, 2, 3, 0, 4]


def test_the_partition_is_the_codes():
    chunks = authors_label_skew(np.array(LABELS), 4, 0.5, seed=42)
    assert [c.tolist() for c in chunks] == CODE_CHUNKS


def test_the_folds_are_scikit_learns():
    assert authors_folds(np.array(FOLD_LABELS), 5, seed=7).tolist() == SKLEARN_FOLDS


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 12), st.sampled_from([0.3, 1.0, 5.0]), st.integers(0, 10_000))
def test_every_graph_dealt_once_in_equal_sizes(clients, alpha, seed):
    labels = np.random.default_rng(seed).integers(0, 2, size=120)  # two classes: the cap
    # leaves each at least 5 % of a prior, so the code's rejection loop always ends
    chunks = authors_label_skew(labels, clients, alpha, seed)
    dealt = np.concatenate(chunks)
    assert sorted(dealt.tolist()) == list(range(120))
    assert max(map(len, chunks)) - min(map(len, chunks)) <= 1


def test_a_loop_the_code_would_spin_in_stops_with_an_error(monkeypatch):
    import securefgl.data.graph_split_replica as replica

    monkeypatch.setattr(replica, "MAX_REJECTIONS", 50)
    labels = np.array([0] * 5 + [1] * 5 + [2] * 30)  # class 2 outlasts the others
    with pytest.raises(ValueError, match="too little"):  # α = 0.01: priors near one-hot
        for seed in range(50):
            authors_label_skew(labels, 4, 0.01, seed)


def test_views_take_the_codes_split_and_the_setting_checks_its_name():
    data = synthetic_graphs(num_graphs=90, seed=4)
    part, views = build_authors_views(data, 5, alpha=0.5, seed=10)
    chunks = authors_label_skew(data.y, 5, 0.5, seed=10)
    for i, (v, graphs) in enumerate(zip(views, chunks, strict=True)):
        assert np.flatnonzero(part.assignment == i).tolist() == sorted(graphs.tolist())
        assert v.y.tolist() == data.y[graphs].tolist()  # the code's order inside the client
        fold = authors_folds(data.y[graphs], 5, seed=10)
        assert v.test_mask.numpy().tolist() == (fold == 0).tolist()
    ours, _ = build_graph_views(data, 5, alpha=0.5, seed=10)
    assert not np.array_equal(ours.assignment, part.assignment)  # other draws by default
    with pytest.raises(ValueError, match="split_stream"):
        GraphTaskSettings(split_stream="sklearn")
    with pytest.raises(ValueError, match="test_fold"):
        build_authors_views(data, 5, alpha=0.5, seed=10, test_fold=5)
