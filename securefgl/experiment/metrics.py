"""Classification metrics from the clients' summed evaluation counts
(:mod:`securefgl.federation.evaluation`): the same numbers whether the counts were pooled in
the clear or by a secure sum."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from securefgl.algorithms.base import SplitPredictions
from securefgl.federation.evaluation import SplitCounts, confusion_f1, pooled_counts


def pooled_accuracy(counts: SplitCounts) -> float:
    return float(np.trace(counts.confusion) / counts.total) if counts.total else float("nan")


def pooled_from_counts(counts: Mapping[str, SplitCounts]) -> dict[str, float]:
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
        c = counts[split]
        if not c.reported:
            continue
        out[f"{split}_acc"] = pooled_accuracy(c)
        out[f"{split}_f1"] = confusion_f1(c.confusion)
        if c.with_nodes:
            out[f"client_mean_{split}"] = c.acc_sum / c.with_nodes
            out[f"client_mean_{split}_f1"] = c.f1_sum / c.with_nodes
            out[f"client_mean_{split}_true_f1"] = c.true_f1_sum / c.with_nodes
    return out


def pooled_metrics(per_client: Sequence[SplitPredictions], num_classes: int) -> dict[str, float]:
    """:func:`pooled_from_counts` of the clients' predictions."""
    return pooled_from_counts(pooled_counts(per_client, num_classes))
