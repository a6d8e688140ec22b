"""FedEgo's label-skew split, draw for draw: the authors' code's random streams, so that a
seed gives the code's very clients (``split_stream = "authors"`` of
:func:`securefgl.data.label_skew.label_skew_world`).

FedEgo (Zhang et al., ACM TKDD 2023, §5.1) draws its clients in the authors' data centre
after ``np.random.seed(seed)`` and ``random.seed(seed)``: nodes are renumbered in the order
they first appear in the edge list (source, then target, edge by edge; a node without an
edge never appears), the global test set is the head of a permutation of those ids, and
client by client the major classes, the major sample and the rest are heads of
permutations of the pool (ascending ids, the major pool grouped class by class in the
drawn order); the nodes with a neighbour in the sample are kept, in the order a Python set
of them yields (the code fills one pair by pair; the same arrivals rebuild it, which
assumes the code ran on a CPython with the same set layout as ours; the check against the
code ran on CPython 3.11), and shuffled with Python's ``random.shuffle``. Replayed here with
``np.random.RandomState`` and ``random.Random``: the same draws in the same order. The
distribution equals our NumPy-stream split's; only the draws differ. It exists to tell a
split's luck from a method's effect: the code's seeds (1027, 1107, 2333, 9973) give the
code's clients.
"""

from __future__ import annotations

import random

import numpy as np

__all__ = ["authors_label_skew_draws", "first_appearance_order"]


def first_appearance_order(edge_index: np.ndarray) -> np.ndarray:
    """Node ids in the order they first appear in the edge list (source before target, edge
    by edge): the authors' renumbering; entry ``a`` is the node the code calls ``a``."""
    flat = np.asarray(edge_index).T.reshape(-1)
    ids, first = np.unique(flat, return_index=True)
    return ids[np.argsort(first, kind="stable")]


def _kept_in_code_order(sample: np.ndarray, src: np.ndarray, dst: np.ndarray,
                        n: int) -> list[int]:  # fmt: skip
    """The nodes of ``sample`` with a neighbour in it, in the order the code's set yields
    them: the code adds ``u`` then ``v`` for every adjacent pair, ``u`` running over the
    sample's positions and ``v`` over its positions inside, into a set; a set's order
    follows from the order its items first arrive, so that order is rebuilt and fed to a
    set here."""
    pos = np.full(n, -1, dtype=np.int64)
    pos[sample] = np.arange(sample.size)
    inside = (pos[src] >= 0) & (pos[dst] >= 0)
    i, j = pos[src[inside]], pos[dst[inside]]
    pairs = np.unique(np.stack([np.concatenate([i, j]), np.concatenate([j, i])], 1), axis=0)
    arrivals = sample[pairs].reshape(-1)  # u, v, u, v, ... pair by pair (sorted by u, v)
    _, first = np.unique(arrivals, return_index=True)
    kept: set[int] = set()
    for node in arrivals[np.sort(first)].tolist():
        kept.add(node)
    return list(kept)


def authors_label_skew_draws(
    edge_index: np.ndarray, y: np.ndarray, num_classes: int, clients: int,
    sample_rate: float, global_rate: float, test_num: int, majors: int, major_rate: float,
    seed: int,
) -> tuple[np.ndarray, list[np.ndarray]]:  # fmt: skip
    """(the global test nodes, each client's nodes in the code's order) in the ids of
    ``edge_index``, drawn as the authors' code draws them for ``seed``. ``edge_index`` has
    no isolated node (every node in ``y`` appears in it)."""
    order = first_appearance_order(edge_index)
    n = order.size
    if n != y.size:
        raise ValueError(f"{y.size - n} nodes have no edge: drop them first")
    code_id = np.empty(n, dtype=np.int64)
    code_id[order] = np.arange(n)
    src, dst = code_id[edge_index[0]], code_id[edge_index[1]]
    yc = np.asarray(y)[order]
    np_stream, py_stream = np.random.RandomState(seed), random.Random(seed)

    global_test = np_stream.permutation(n)[: int(n * global_rate)]
    blocked = np.zeros(n, dtype=bool)
    blocked[global_test] = True
    m = int(n * sample_rate)
    samples = []
    for _ in range(clients):
        pool = np.flatnonzero(~blocked)
        held = np_stream.permutation(num_classes)[:majors]
        major_pool = np.concatenate([pool[yc[pool] == c] for c in held])
        n_major = min(int(m * major_rate), major_pool.size)
        picked = np_stream.permutation(major_pool)[:n_major]
        rest = pool[~np.isin(pool, picked)]
        extra = np_stream.permutation(rest)[: m - n_major]
        index = _kept_in_code_order(np.concatenate([picked, extra]), src, dst, n)
        py_stream.shuffle(index)
        blocked[index[len(index) - test_num:]] = True
        samples.append(order[np.asarray(index, dtype=np.int64)])
    return order[global_test], samples
