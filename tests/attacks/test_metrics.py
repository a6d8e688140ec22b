"""Leakage metrics against brute-force definitions."""

import numpy as np

from attacks.metrics import (
    precision_recall_at_k,
    roc_auc,
    row_support_f1,
    support_scores,
    tpr_at_fpr,
)


def test_auc_equals_pairwise_definition_with_ties():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 5, 60).astype(float)  # many ties
    y = rng.random(60) < 0.4
    pos, neg = s[y], s[~y]
    brute = ((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])).mean()
    assert np.isclose(roc_auc(s, y), brute)
    assert np.isclose(roc_auc(-s, y), 1 - brute)
    assert np.isnan(roc_auc(s, np.ones(60, bool)))


def test_tpr_at_fpr_and_top_k():
    y = np.r_[np.ones(50, bool), np.zeros(50, bool)]
    perfect = np.r_[np.linspace(2, 3, 50), np.linspace(0, 1, 50)]
    assert tpr_at_fpr(perfect, y, 0.01) == 1.0
    assert tpr_at_fpr(-perfect, y, 0.01) == 0.0
    p, r = precision_recall_at_k(perfect, y, 25)
    assert (p, r) == (1.0, 0.5)


def test_support_scores():
    pred = np.array([[1, 1, 0, 0], [0, 0, 0, 0]], bool)
    true = np.array([[1, 0, 1, 0], [0, 0, 0, 0]], bool)
    s = support_scores(pred, true)
    assert (s["precision"], s["recall"]) == (0.5, 0.5)
    f1 = row_support_f1(pred, true)
    assert np.isclose(f1[0], 0.5) and f1[1] == 0.0
