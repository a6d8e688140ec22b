"""Leakage metrics: ROC AUC, TPR at a fixed FPR, precision/recall at k, support F1.

Vectorised numpy (no scikit-learn dependency). Scores: larger = "more likely positive".
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with tie correction); NaN if one class."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=bool)
    pos, neg = int(labels.sum()), int((~labels).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * neg))


def roc_curve(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, TPR) at every distinct threshold, from (0, 0) to (1, 1)."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=bool)
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]  # last index of each threshold
    tp = np.cumsum(y)[last]
    fp = np.cumsum(~y)[last]
    tpr = np.r_[0.0, tp / max(int(y.sum()), 1)]
    fpr = np.r_[0.0, fp / max(int((~y).sum()), 1)]
    return fpr, tpr


def tpr_at_fpr(scores: np.ndarray, labels: np.ndarray, fpr_target: float = 0.01) -> float:
    """Largest TPR among thresholds whose FPR ≤ ``fpr_target`` (Carlini et al. 2022)."""
    fpr, tpr = roc_curve(scores, labels)
    ok = fpr <= fpr_target + 1e-12
    return float(tpr[ok].max()) if ok.any() else 0.0


def precision_recall_at_k(scores: np.ndarray, labels: np.ndarray, k: int) -> tuple[float, float]:
    """Precision and recall when the top-``k`` scores are predicted positive."""
    labels = np.asarray(labels, dtype=bool)
    k = int(min(max(k, 0), labels.size))
    if k == 0:
        return 0.0, 0.0
    top = np.argpartition(-np.asarray(scores, dtype=np.float64), k - 1)[:k]
    hits = int(labels[top].sum())
    return hits / k, hits / max(int(labels.sum()), 1)


def support_scores(pred: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """Precision, recall and F1 of a predicted boolean support against the true one."""
    pred, true = np.asarray(pred, dtype=bool), np.asarray(true, dtype=bool)
    tp = int((pred & true).sum())
    p = tp / max(int(pred.sum()), 1)
    r = tp / max(int(true.sum()), 1)
    f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return {"precision": p, "recall": r, "f1": f1}


def rowwise_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of corresponding rows (0 for a zero row)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    num = (a * b).sum(axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def row_support_f1(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """F1 of each row's predicted boolean support against the true row (vectorised)."""
    pred, true = np.asarray(pred, dtype=bool), np.asarray(true, dtype=bool)
    tp = (pred & true).sum(axis=1)
    denom = pred.sum(axis=1) + true.sum(axis=1)
    return np.divide(2.0 * tp, denom, out=np.zeros(len(tp)), where=denom > 0)
