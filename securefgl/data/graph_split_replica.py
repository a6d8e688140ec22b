"""GPFL's split, draw for draw: the authors' code's random streams, so that a seed gives the
code's very partition and folds (``split_stream = "authors"``).

GPFL (TMLR 2025, §4.1) draws its label-skew partition with NumPy's legacy global stream
(``label_skew_balance`` and ``soft_dirichlet`` after ``np.random.seed(seed)``) and each
client's folds with scikit-learn's ``StratifiedKFold(5, shuffle=True, random_state=seed)``.
Both are replayed here with ``np.random.RandomState``: the same draws in the same order,
the same rejection loop for a class that has run out, the same order of graphs inside a
client (its list filled from the back) and scikit-learn's fold allocation (classes coded by
first appearance, round-robin counts over the sorted codes, one shuffle per class). The
distribution equals :func:`~securefgl.data.graph_views.label_skew_partition`'s; only the
draws differ. It exists to tell a partition's luck from a method's effect: the code's seeds
(0, 10, 42, 111, 123) give the code's splits.
"""

from __future__ import annotations

import numpy as np

from securefgl.data.graph_datasets import GraphDataset
from securefgl.data.graph_views import (
    GraphClientView,
    GraphPartition,
    check_test_fold,
    equal_sizes,
    soft_dirichlet,
    views_of_split,
)

__all__ = ["MAX_REJECTIONS", "authors_folds", "authors_label_skew", "build_authors_views"]

#: the code's rejection loop spins until it draws a class with graphs left; with a tiny prior
#: on the only classes left it would spin for ages: stop with an error instead
MAX_REJECTIONS = 1_000_000


def authors_label_skew(
    labels: np.ndarray, clients: int, alpha: float, seed: int, cap: float = 0.95
) -> list[np.ndarray]:
    """Each client's graph indices, in the code's order (``label_skew_balance``)."""
    labels = np.asarray(labels, dtype=np.int64)
    rs = np.random.RandomState(seed)
    num_classes = int(labels.max()) + 1
    priors = soft_dirichlet(alpha, num_classes, clients, rs, cap)  # the same draws
    cumulative = np.cumsum(priors, axis=1)
    pools = [np.flatnonzero(labels == c) for c in range(num_classes)]
    left = [len(p) for p in pools]
    need = equal_sizes(labels.size, clients)
    out = [np.zeros(n, dtype=np.int64) for n in need]
    while need.sum():
        i = rs.randint(clients)
        if need[i] <= 0:
            continue
        need[i] -= 1
        for _ in range(MAX_REJECTIONS):  # the code's loop: redraw until a class has graphs
            c = int(np.argmax(rs.uniform() <= cumulative[i]))
            if left[c] <= 0:
                continue
            left[c] -= 1
            out[i][need[i]] = pools[c][left[c]]
            break
        else:
            raise ValueError(
                f"the authors' split: client {i}'s prior {priors[i].round(6).tolist()} gives "
                f"the classes left {[c for c in range(num_classes) if left[c]]} too little "
                f"mass ({MAX_REJECTIONS} draws rejected); use split_stream = 'ours'"
            )
    return out


def authors_folds(labels: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """The fold of each item as scikit-learn's ``StratifiedKFold(folds, shuffle=True,
    random_state=seed)`` assigns it (its ``_make_test_folds``)."""
    labels = np.asarray(labels)
    rs = np.random.RandomState(seed)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    _, by_appearance = np.unique(first, return_inverse=True)
    coded = by_appearance[inverse]
    n_classes = len(first)
    ordered = np.sort(coded)
    allocation = np.asarray(
        [np.bincount(ordered[f::folds], minlength=n_classes) for f in range(folds)]
    )
    out = np.empty(labels.size, dtype=np.int64)
    for k in range(n_classes):
        per_class = np.arange(folds).repeat(allocation[:, k])
        rs.shuffle(per_class)
        out[coded == k] = per_class
    return out


def build_authors_views(
    data: GraphDataset,
    clients: int,
    alpha: float,
    seed: int,
    folds: int = 5,
    test_fold: int = 0,
    cap: float = 0.95,
) -> tuple[GraphPartition, list[GraphClientView]]:
    """The code's split of ``seed`` and its client views (each client's graphs in the code's
    order, its scikit-learn folds)."""
    check_test_fold(folds, test_fold)
    chunks = authors_label_skew(data.y, clients, alpha, seed, cap)
    parts = [(graphs, authors_folds(data.y[graphs], folds, seed)) for graphs in chunks]
    return views_of_split(data, parts, alpha, test_fold)
