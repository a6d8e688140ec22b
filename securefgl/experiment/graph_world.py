"""The graph-classification side of the runner (``task = "graph"``): the dataset, the
seed's client views and GPFL's metric.

:func:`draw_graph_world` deals whole graphs to clients with Dirichlet label skew and draws
each client's stratified folds (:mod:`securefgl.data.graph_views`), or, for a dataset whose
graphs carry domains (GOOD-Motif), one domain per client; the metric is the mean over
clients of each client's test accuracy (GPFL, TMLR 2025, §4.1), with the accuracy pooled
over all test graphs beside it, the best client-mean accuracy within the last
``best_of_last`` rounds (the authors' code's ``final_best_test_acc``) and, when clients
hold validation graphs, the test accuracy of the round with the best validation accuracy.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data.graph_datasets import GraphDataset, load_graph_dataset
from securefgl.data.graph_split_replica import build_authors_views
from securefgl.data.graph_views import (
    GraphClientView,
    GraphPartition,
    build_domain_views,
    build_graph_views,
)
from securefgl.experiment.metrics import pooled_accuracy
from securefgl.federation.evaluation import SplitCounts, pooled_counts

SplitPredictions = dict[str, tuple[np.ndarray, np.ndarray]]


def load_graph_data(config: ExperimentConfig) -> GraphDataset:
    return load_graph_dataset(
        config.dataset, config.data_root, download=config.download,
        options=generator_options(config),
    )  # fmt: skip


def generator_options(config: ExperimentConfig) -> dict[str, Any]:
    """The options of the dataset's generator (``motif`` or ``synthetic``)."""
    if config.dataset.lower().startswith("motif"):
        return dict(config.graph.motif)
    return dict(config.graph.synthetic)


log = logging.getLogger(__name__)

#: the [experiment.graph] fields a domain-split dataset (GOOD-Motif) does not read
DOMAIN_IGNORES = ("dirichlet", "prior_cap", "folds", "test_fold", "split_stream")


def draw_graph_world(
    config: ExperimentConfig, seed: int, data: GraphDataset
) -> tuple[GraphDataset, GraphPartition, list[GraphClientView], int]:
    """The partition, folds and client views of ``seed``, or of ``split_seed`` when set (the
    view seed is the run's seed)."""
    s = config.graph
    split = seed if s.split_seed is None else s.split_seed
    if data.domain is not None:
        ignored = [k for k in DOMAIN_IGNORES if getattr(s, k) != getattr(type(s)(), k)]
        if ignored:
            log.warning("%s deals one domain per client with its own split: %s have no "
                        "effect", config.dataset, ", ".join(ignored))  # fmt: skip
        try:
            part, views = build_domain_views(data, config.clients, split)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        return data, part, views, seed
    build = build_authors_views if s.split_stream == "authors" else build_graph_views
    part, views = build(data, config.clients, s.dirichlet, split, s.folds, s.test_fold, s.prior_cap)
    empty = [v.client_id for v in views if not (v.train_mask.any() and v.test_mask.any())]
    if empty:
        raise ConfigError(
            f"{len(empty)} of {config.clients} clients hold no training or no test graph "
            f"({data.num_graphs} graphs, {s.folds} folds per client; e.g. client {empty[0]} "
            f"has {len(views[empty[0]].y)} graphs): use fewer clients or fewer folds"
        )
    return data, part, views, seed


def client_mean_from_counts(counts: Mapping[str, SplitCounts]) -> dict[str, float]:
    """Per split: the mean over clients of each client's accuracy and macro-F1, and the
    accuracy pooled over all graphs (``pooled_<split>_acc``)."""
    out: dict[str, float] = {}
    for split, c in counts.items():
        if not c.with_nodes:
            continue
        out[f"{split}_acc"] = c.acc_sum / c.with_nodes
        out[f"{split}_f1"] = c.f1_sum / c.with_nodes
        out[f"pooled_{split}_acc"] = pooled_accuracy(c)
    return out


def client_mean_metrics(per_client: list[SplitPredictions], num_classes: int) -> dict[str, float]:
    """:func:`client_mean_from_counts` of the clients' predictions."""
    return client_mean_from_counts(pooled_counts(per_client, num_classes))


def best_of_last(history: list[dict[str, Any]], rounds: int) -> dict[str, float]:
    """``best_last_test_acc``: the best test accuracy among the evaluated last ``rounds``."""
    if not history:
        return {}
    last = history[-1]["round"]
    scores = [h["test_acc"] for h in history if "test_acc" in h and h["round"] > last - rounds]
    return {"best_last_test_acc": float(max(scores))} if scores else {}


def selected_by_validation(history: list[dict[str, Any]]) -> dict[str, float]:
    """``val_selected_test_acc``: the test accuracy of the evaluated round with the best
    validation accuracy (the earliest on ties), when clients hold validation graphs."""
    rows = [h for h in history if "val_acc" in h and "test_acc" in h]
    if not rows:
        return {}
    best = max(rows, key=lambda h: (h["val_acc"], -h["round"]))
    return {"val_selected_test_acc": float(best["test_acc"]),
            "val_selected_round": float(best["round"])}  # fmt: skip
