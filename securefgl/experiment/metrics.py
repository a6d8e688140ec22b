"""Classification metrics over the pooled predictions of all clients."""

from __future__ import annotations

import numpy as np

from securefgl.algorithms import SplitPredictions


def accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float((y_true == y_pred).mean()) if len(y_true) else float("nan")


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> float:
    """Unweighted mean of per-class F1 over the classes present in ``y_true`` or ``y_pred``."""
    if not len(y_true):
        return float("nan")
    idx = y_true * num_classes + y_pred
    confusion = np.bincount(idx, minlength=num_classes**2).reshape(num_classes, num_classes)
    tp = np.diag(confusion).astype(float)
    support, predicted = confusion.sum(1), confusion.sum(0)
    present = (support + predicted) > 0
    f1 = np.divide(2 * tp, support + predicted, out=np.zeros_like(tp), where=present)
    return float(f1[present].mean())


def pooled_metrics(per_client: list[SplitPredictions], num_classes: int) -> dict[str, float]:
    """Accuracy and macro-F1 per split over the union of the clients' nodes.

    Pooling weights every node equally (FedStruct weights clients by node count, which
    equals this only when weighted by *test*-node count). ``client_mean_<split>`` is the
    accuracy averaged over the clients that have nodes in the split (each client equal),
    ``client_mean_<split>_f1`` each client's own macro-F1 (over the classes in its own true
    or predicted labels) averaged alike: a label-skewed client missing a class it predicts
    scores 0 on that class, so this is lower than the pooled macro-F1.
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
            out[f"client_mean_{split}_f1"] = float(
                np.mean([macro_f1(t, q, num_classes) for t, q in each])
            )
    return out
