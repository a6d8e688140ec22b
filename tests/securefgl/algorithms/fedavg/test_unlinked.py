"""A client's evaluation reply carries its (label, prediction) pairs, not which node has
which label: the pooled metrics are the same."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securefgl.algorithms.common.training import unlinked
from securefgl.config import ExperimentConfig
from securefgl.experiment.metrics import pooled_metrics
from securefgl.experiment.runner import load_graph, run_single


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=60))
def test_sorted_pairs_keep_the_confusion_counts_and_the_metrics(pairs) -> None:
    y_true, y_pred = (np.array(v) for v in zip(*pairs, strict=True))
    t, p = unlinked(y_true, y_pred)
    got = list(zip(t.tolist(), p.tolist(), strict=True))
    assert got == sorted(got) == sorted(zip(y_true.tolist(), y_pred.tolist(), strict=True))
    split = {"train": (t, p), "val": (t, p), "test": (t, p)}
    orig = {"train": (y_true, y_pred), "val": (y_true, y_pred), "test": (y_true, y_pred)}
    assert pooled_metrics([split], 4) == pooled_metrics([orig], 4)


NODE = {"dataset": "csbm", "csbm": {"num_nodes": 200, "num_features": 8}, "clients": 4}
GRAPH = {"task": "graph", "dataset": "synthetic-graphs",
         "graph": {"synthetic": {"num_graphs": 60, "max_nodes": 8}, "batch_size": 16}}


@pytest.mark.parametrize("algorithm", ["fedavg", "fedgls", "fedproto", "fed-gnnmlp",
                                       "spreadfgl", "fedego", "fedstruct", "fed-pub"])
def test_every_node_family_replies_with_sorted_pairs(algorithm: str) -> None:
    _assert_sorted(ExperimentConfig(rounds=1, cross_edges="known", **NODE), algorithm)


@pytest.mark.parametrize("algorithm", ["fedavg", "fedvn", "ditto", "gcfl"])
def test_every_graph_family_replies_with_sorted_pairs(algorithm: str) -> None:
    _assert_sorted(ExperimentConfig(rounds=1, clients=3, **GRAPH), algorithm)


def _assert_sorted(config: ExperimentConfig, algorithm: str) -> None:
    """What a client's plain evaluation reply carries: its pairs, not its nodes' order."""
    run = run_single(config, algorithm, 0, load_graph(config), progress=False, keep_state=True)
    for split in run.state.algorithm.predict():
        for y, pred in split.values():
            pairs = list(zip(y.tolist(), pred.tolist(), strict=True))
            assert pairs == sorted(pairs)
