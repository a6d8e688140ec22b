"""Client views for graph classification: whole graphs per client, label skew by Dirichlet(α).

GPFL (TMLR 2025, §4.1; its code's ``label_skew_balance`` and ``soft_dirichlet``): every
client gets the same number of graphs (sizes differ by at most one); client ``i``'s class
prior is drawn from Dir(α·1), every entry capped at 0.95 with the excess spread over the
other classes; graphs are dealt by repeatedly picking a random client that still needs one
and drawing a class from its prior. Each client then splits its own graphs into stratified
folds (5 by default: fold ``test_fold`` is the test set, the rest the training set).

Deviation: when the drawn class has no graph left, the class is redrawn from the prior
restricted to the classes that remain (the code's rejection loop has the same distribution
but can spin for long when a prior entry is tiny). The folds are our own stratified
assignment (scikit-learn's ``StratifiedKFold`` is not a dependency).
:mod:`securefgl.data.graph_split_replica` replays the code's own draws instead.

A dataset whose graphs carry a domain (GOOD-Motif, :mod:`securefgl.data.good_motif`) is
dealt by domain instead (:func:`build_domain_views`; FedVN, AAAI 2025, §5.1): client ``d``
holds domain ``d``'s graphs, shuffled by the seed into 80 % train / 20 % test of the
domain's graphs (FedVN's 800 / 200), plus the domain's ``val_per_domain`` validation graphs.

A :class:`GraphClientView` holds copies of its own graphs only (features, edges, labels,
fold masks): no global index, nothing of another client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from securefgl.data.graph_datasets import GraphDataset

#: the split's random streams: ours, or GPFL's code's replayed draw for draw
SPLIT_STREAMS = ("ours", "authors")

__all__ = [
    "SPLIT_STREAMS",
    "GraphClientView",
    "GraphPartition",
    "build_domain_views",
    "build_graph_views",
    "check_test_fold",
    "equal_sizes",
    "label_skew_partition",
    "soft_dirichlet",
    "stratified_folds",
    "views_of_split",
]


def soft_dirichlet(
    alpha: float,
    num_classes: int,
    clients: int,
    rng: np.random.Generator | np.random.RandomState,
    cap: float = 0.95,
) -> np.ndarray:
    """``clients × num_classes`` priors ~ Dir(α), each entry capped at ``cap`` and the
    excess added evenly to the entries at or below the cap (the code's ``soft_dirichlet``)."""
    priors = rng.dirichlet([alpha] * num_classes, size=clients)
    for row in priors:
        excess = np.maximum(row - cap, 0).sum()
        below = row <= cap
        row[~below] = cap
        if excess > 0 and below.any():
            row[below] += excess / below.sum()
    return priors


def equal_sizes(total: int, clients: int) -> np.ndarray:
    """``total`` split into ``clients`` sizes that differ by at most one (larger first)."""
    sizes = np.full(clients, total // clients, dtype=np.int64)
    sizes[: total - sizes.sum()] += 1
    return sizes


def label_skew_partition(
    labels: np.ndarray, clients: int, alpha: float, seed: int, cap: float = 0.95
) -> np.ndarray:
    """Client of every graph: equal client sizes, class priors ~ capped Dir(α)."""
    labels = np.asarray(labels, dtype=np.int64)
    if clients < 1 or clients > labels.size:
        raise ValueError(f"clients must lie in [1, {labels.size}], got {clients}")
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    rng = np.random.default_rng(seed)
    num_classes = int(labels.max()) + 1
    priors = soft_dirichlet(alpha, num_classes, clients, rng, cap)
    pools = [rng.permutation(np.flatnonzero(labels == c)).tolist() for c in range(num_classes)]
    need = equal_sizes(labels.size, clients)
    out = np.full(labels.size, -1, dtype=np.int64)
    while need.sum():
        i = int(rng.integers(clients))
        if need[i] == 0:
            continue
        need[i] -= 1
        prior = priors[i] * np.array([bool(p) for p in pools], dtype=float)
        if prior.sum() <= 0:  # the prior's classes are exhausted: any class that remains
            prior = np.array([len(p) for p in pools], dtype=float)
        c = int(rng.choice(num_classes, p=prior / prior.sum()))
        out[pools[c].pop()] = i
    return out


def stratified_folds(labels: np.ndarray, folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold of every item: each class shuffled and dealt round-robin, the first from fold 0
    and each next where the last ended, so every fold holds ⌊n_c/folds⌋ or ⌈n_c/folds⌉
    items of class c (a client with fewer items than folds leaves the last folds empty)."""
    labels = np.asarray(labels)
    out = np.zeros(labels.size, dtype=np.int64)
    start = 0
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        out[idx] = (start + np.arange(idx.size)) % folds
        start = (start + idx.size) % folds  # continue the deal: fold sizes stay balanced
    return out


@dataclass
class GraphClientView:
    """One client's graphs (copies): ``x`` [N_i, F], ``edge_index`` [2, E_i] local to each
    graph, ``node_ptr`` / ``edge_ptr`` [G_i + 1], ``y`` [G_i], fold masks [G_i]."""

    client_id: int
    x: torch.Tensor
    edge_index: torch.Tensor
    node_ptr: torch.Tensor
    edge_ptr: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    test_mask: torch.Tensor
    num_classes: int
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # derived per-node inputs (FedStar)
    val_mask: torch.Tensor | None = None  # validation graphs (none: an empty mask)

    def __post_init__(self) -> None:
        if self.val_mask is None:
            self.val_mask = torch.zeros_like(self.train_mask)
        for key in ("x", "edge_index", "node_ptr", "edge_ptr", "y", "train_mask", "test_mask",
                    "val_mask"):  # fmt: skip
            setattr(self, key, getattr(self, key).clone().contiguous())

    @property
    def num_graphs(self) -> int:
        return int(self.y.numel())

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    @property
    def num_train(self) -> int:
        return int(self.train_mask.sum())

    def dataset(self, mask: torch.Tensor | None = None) -> GraphDataset:
        """This client's graphs (or those of ``mask``) as a :class:`GraphDataset` copy."""
        whole = GraphDataset(
            self.name,
            self.x.numpy(),
            self.edge_index.numpy(),
            self.node_ptr.numpy(),
            self.edge_ptr.numpy(),
            self.y.numpy(),
            self.num_classes,
        )
        graphs = np.arange(self.num_graphs) if mask is None else np.flatnonzero(mask.numpy())
        return whole.subset(graphs)


@dataclass
class GraphPartition:
    """Which client holds each graph (simulator side) and the folds inside each client."""

    assignment: np.ndarray  # [G] client of every graph
    test: np.ndarray  # [G] bool: in its client's test fold
    alpha: float
    val: np.ndarray | None = None  # [G] bool: a validation graph of its client
    domains: tuple[str, ...] = ()  # dealt by domain: client i holds domain i

    def report(self, data: GraphDataset) -> PartitionSummary:
        labels = data.y
        k = int(self.assignment.max()) + 1
        counts = np.zeros((k, data.num_classes), dtype=np.int64)
        np.add.at(counts, (self.assignment, labels), 1)
        out: dict[str, Any] = {
            "method": "domain" if self.domains else "dirichlet-label-skew",
            "alpha": self.alpha,
            "clients": k,
            "sizes": counts.sum(1).tolist(),
            "label_counts": counts.tolist(),
            "test_graphs": int(self.test.sum()),
        }
        if self.domains:
            out["domains"] = list(self.domains)
            out["val_graphs"] = 0 if self.val is None else int(self.val.sum())
        return PartitionSummary(out)


@dataclass
class PartitionSummary:
    """What the runner records about a partition (``result.json``'s ``partition``)."""

    values: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.values)


def build_graph_views(
    data: GraphDataset,
    clients: int,
    alpha: float,
    seed: int,
    folds: int = 5,
    test_fold: int = 0,
    cap: float = 0.95,
) -> tuple[GraphPartition, list[GraphClientView]]:
    """Label-skew partition, per-client stratified folds and the client views of ``seed``,
    on our streams (the same signature as ``graph_split_replica.build_authors_views``, which
    replays GPFL's code's draws)."""
    check_test_fold(folds, test_fold)
    part_seed, fold_seed, order_seed = np.random.SeedSequence(seed).spawn(3)
    assignment = label_skew_partition(data.y, clients, alpha, _int(part_seed), cap)
    fold_rng = np.random.default_rng(fold_seed)
    order_rng = np.random.default_rng(order_seed)
    parts = []
    for i in range(clients):
        graphs = order_rng.permutation(np.flatnonzero(assignment == i))  # no global order
        parts.append((graphs, stratified_folds(data.y[graphs], folds, fold_rng)))
    return views_of_split(data, parts, alpha, test_fold)


def check_test_fold(folds: int, test_fold: int) -> None:
    """Both split builders' check of the tested fold."""
    if not 0 <= test_fold < folds:
        raise ValueError(f"test_fold must lie in [0, {folds}), got {test_fold}")


def build_domain_views(
    data: GraphDataset, clients: int, seed: int, test_share: float = 0.2
) -> tuple[GraphPartition, list[GraphClientView]]:
    """Client ``d`` holds domain ``d``: its graphs shuffled by ``seed``, the first
    ``val_per_domain`` for validation, then ``test_share`` of the rest for testing (FedVN's
    800 / 200 of 1,000), the others for training."""
    if data.domain is None:
        raise ValueError(f"{data.name} has no domains to deal")
    domains = int(data.domain.max()) + 1
    if clients != domains:
        raise ValueError(f"{data.name} is dealt one domain per client: clients must be "
                         f"{domains}, got {clients}")  # fmt: skip
    rng = np.random.default_rng([seed, 48])
    parts = []
    for d in range(domains):
        graphs = rng.permutation(np.flatnonzero(data.domain == d))
        n_val = min(data.val_per_domain, graphs.size - 2)
        n_test = max(1, round(test_share * (graphs.size - n_val)))
        fold = np.zeros(graphs.size, dtype=np.int64)  # 0 train, 1 test, 2 validation
        fold[:n_val] = 2
        fold[n_val : n_val + n_test] = 1
        parts.append((graphs, fold))
    part, views = views_of_split(data, parts, 0.0, 1, val_fold=2)
    part.domains = tuple(data.domain_names) or tuple(f"domain-{d}" for d in range(domains))
    return part, views


def views_of_split(
    data: GraphDataset,
    parts: list[tuple[np.ndarray, np.ndarray]],
    alpha: float,
    test_fold: int,
    val_fold: int | None = None,
) -> tuple[GraphPartition, list[GraphClientView]]:
    """The partition and client views of a split: client ``i`` holds ``parts[i]``'s graphs
    (in that order) with their folds; fold ``test_fold`` is its test set, fold ``val_fold``
    (if given) its validation set, the others its training set."""
    assignment = np.full(data.num_graphs, -1, dtype=np.int64)
    test = np.zeros(data.num_graphs, dtype=bool)
    val = np.zeros(data.num_graphs, dtype=bool)
    views = []
    for i, (graphs, fold) in enumerate(parts):
        assignment[graphs] = i
        test[graphs] = fold == test_fold
        is_val = fold == val_fold if val_fold is not None else np.zeros(fold.size, dtype=bool)
        val[graphs] = is_val
        own = data.subset(graphs)
        views.append(
            GraphClientView(
                i,
                torch.from_numpy(own.x),
                torch.from_numpy(own.edge_index),
                torch.from_numpy(own.node_ptr),
                torch.from_numpy(own.edge_ptr),
                torch.from_numpy(own.y),
                torch.from_numpy((fold != test_fold) & ~is_val),
                torch.from_numpy(fold == test_fold),
                data.num_classes,
                data.name,
                val_mask=torch.from_numpy(is_val),
            )
        )
    return GraphPartition(assignment, test, alpha, val if val_fold is not None else None), views


def _int(seq: np.random.SeedSequence) -> int:
    return int(seq.generate_state(1)[0])
