"""A client's evaluation reply carries its (label, prediction) pairs, not which node has
which label: the pooled metrics are the same."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from securefgl.algorithms.common.training import unlinked
from securefgl.experiment.metrics import pooled_metrics


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
