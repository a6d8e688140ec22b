"""Classification metrics over the pooled predictions of all clients."""

from __future__ import annotations

import numpy as np

from securefgl.algorithms.base import SplitPredictions


def accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float((y_true == y_pred).mean()) if len(y_true) else float("nan")


def macro_f1(
    y_true: np.ndarray, y_pred: np.ndarray, num_classes: int, true_classes_only: bool = False
) -> float:
    """Unweighted mean of per-class F1 over the classes present in ``y_true`` or ``y_pred``
    (scikit-learn's default), or only in ``y_true`` with ``true_classes_only``."""
    if not len(y_true):
        return float("nan")
    idx = y_true * num_classes + y_pred
    confusion = np.bincount(idx, minlength=num_classes**2).reshape(num_classes, num_classes)
    tp = np.diag(confusion).astype(float)
    support, predicted = confusion.sum(1), confusion.sum(0)
    present = support > 0 if true_classes_only else (support + predicted) > 0
    f1 = np.divide(2 * tp, support + predicted, out=np.zeros_like(tp), where=present)
    return float(f1[present].mean())


def pooled_metrics(per_client: list[SplitPredictions], num_classes: int) -> dict[str, float]:
    """Accuracy and macro-F1 per split over the union of the clients' nodes.

    Pooling weights every node equally (FedStruct weights clients by node count, which
    equals this only when weighted by *test*-node count). ``client_mean_<split>`` is the
    accuracy averaged over the clients that have nodes in the split (each client equal),
    ``client_mean_<split>_f1`` each client's own macro-F1 (over the classes in its own true
    or predicted labels) averaged alike: a label-skewed client missing a class it predicts
    scores 0 on that class, so this is lower than the pooled macro-F1;
    ``client_mean_<split>_true_f1`` the same over the classes in each client's true labels.
    """
    out: dict[str, float] = {}
    for split in ("val", "test"):
        parts = [p[split] for p in per_client if split in p]
        if not parts:
            continue
        y_true = np.concatenate([t for t, _ in parts])
        y_pred = np.concatenate([q for _, q in parts])
        out[f"{split}_acc"] = accuracy(y_true, y_pred)
        out[f"{split}_f1"] = macro_f1(y_true, y_pred, num_classes)
        if each := [(t, q) for t, q in parts if len(t)]:
            out[f"client_mean_{split}"] = float(np.mean([accuracy(t, q) for t, q in each]))
            for suffix, true_only in (("f1", False), ("true_f1", True)):
                out[f"client_mean_{split}_{suffix}"] = float(
                    np.mean([macro_f1(t, q, num_classes, true_only) for t, q in each])
                )
    return out
