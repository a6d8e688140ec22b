"""FedEgo's label-skew clients (Zhang et al., ACM TKDD 2023, §5.1 "Label-skew setting").

Procedure (the authors' data centre, re-implemented vectorised): nodes without an edge are
dropped; a random ``global_rate`` of the nodes is the global test set (its induced
subgraph is the global test graph); then client by client, from the pool of nodes that are
neither global test nodes nor an earlier client's local test nodes, ``majors`` random
classes are picked and a sample of ``int(n·sample_rate)`` nodes is drawn, ``major_rate`` of
it (as far as the pool allows) from those classes and the rest from the remaining pool; a
sampled node without a neighbour inside the sample is dropped; the sample is shuffled and
its last ``test_num`` nodes are the client's local test set (removed from later pools).
Clients may share training nodes (the pools only exclude test nodes), and a node an
earlier client trains on may be a later client's local test node (the authors' procedure:
on Cora, seed 0, one earlier client's training nodes are 75-163 of a client's 200),
so a federated model's local-test F1 can credit what another client trained on; the global
test set is disjoint from every client. A client's graph is the subgraph induced by its
sample.

Masks of a client (positions in its shuffled order): local test = the last ``test_num``;
validation = the ``n_k // 5`` before them (the authors never use it for selection);
training = the rest, from which FedEgo draws a fresh ``n_k // 5`` every local epoch.
Deviations: our random streams (NumPy), not the authors' (Python ``random`` + NumPy), so
the clients differ draw for draw with the same distribution; ``split_stream = "authors"``
replays the authors' draws (:mod:`securefgl.data.label_skew_replica`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import Data

from securefgl.data.label_skew_replica import authors_label_skew_draws
from securefgl.data.views import ClientGraph, opaque_id_permutation

__all__ = ["SPLIT_STREAMS", "LabelSkewWorld", "label_skew_world"]

#: ours (NumPy streams) or the authors' code's draws replayed
SPLIT_STREAMS = ("ours", "authors")


@dataclass
class LabelSkewWorld:
    """The clients' views, the global test graph (simulator-side, evaluation only) and each
    client's global node indices (ground truth for audits)."""

    views: list[ClientGraph]
    global_test: Data
    members: list[np.ndarray]


def _drop_isolated(data: Data) -> Data:
    n = int(data.num_nodes)
    has = np.zeros(n, dtype=bool)
    has[data.edge_index[0].numpy()] = True
    has[data.edge_index[1].numpy()] = True
    if has.all():
        return data
    out = data.subgraph(torch.from_numpy(has))
    out.num_classes = getattr(data, "num_classes", int(data.y.max()) + 1)
    return out


def _induced(data: Data, nodes: np.ndarray) -> tuple[torch.Tensor, np.ndarray]:
    """Edges of the subgraph induced by ``nodes`` (in that order) and the degrees inside."""
    n = int(data.num_nodes)
    local = np.full(n, -1, dtype=np.int64)
    local[nodes] = np.arange(nodes.size)
    ei = data.edge_index.numpy()
    keep = (local[ei[0]] >= 0) & (local[ei[1]] >= 0)
    sub = np.stack([local[ei[0][keep]], local[ei[1][keep]]])
    deg = np.bincount(sub[0], minlength=nodes.size)
    return torch.from_numpy(sub), deg


def _our_draws(
    data: Data, clients: int, sample_rate: float, global_rate: float, test_num: int,
    majors: int, major_rate: float, seed: int, num_classes: int,
) -> tuple[np.ndarray, list[np.ndarray]]:  # fmt: skip
    """(the global test nodes, each client's nodes in order) from our NumPy streams."""
    rng = np.random.default_rng([seed, 0xE90])
    n, y = int(data.num_nodes), data.y.numpy()
    order = rng.permutation(n)
    global_test = order[: int(n * global_rate)]
    blocked = np.zeros(n, dtype=bool)
    blocked[global_test] = True
    samples = []
    m = int(n * sample_rate)
    for _ in range(clients):
        pool = np.flatnonzero(~blocked)
        chosen = rng.choice(num_classes, size=min(majors, num_classes), replace=False)
        in_major = np.isin(y[pool], chosen)
        major_pool = pool[in_major]
        n_major = min(int(m * major_rate), major_pool.size)
        picked = rng.choice(major_pool, size=n_major, replace=False)
        rest = np.setdiff1d(pool, picked)
        extra = rng.choice(rest, size=min(m - n_major, rest.size), replace=False)
        sample = np.concatenate([picked, extra])
        _, deg = _induced(data, sample)
        sample = sample[deg > 0]
        sample = sample[rng.permutation(sample.size)]
        blocked[sample[sample.size - test_num:]] = True
        samples.append(sample)
    return global_test, samples


def label_skew_world(
    data: Data, clients: int = 5, sample_rate: float = 0.5, global_rate: float = 0.3,
    test_num: int = 200, majors: int = 3, major_rate: float = 0.8, seed: int = 0,
    split_stream: str = "ours",
) -> LabelSkewWorld:  # fmt: skip
    """FedEgo's label-skew split of ``data`` (module docstring); ``split_stream = "authors"``
    replays the authors' code's draws (:mod:`securefgl.data.label_skew_replica`)."""
    if split_stream not in SPLIT_STREAMS:
        raise ValueError(f"split_stream must be one of {SPLIT_STREAMS}, got {split_stream!r}")
    data = _drop_isolated(data)
    n, y = int(data.num_nodes), data.y.numpy()
    num_classes = int(getattr(data, "num_classes", int(y.max()) + 1))
    if split_stream == "authors":
        global_test, samples = authors_label_skew_draws(
            data.edge_index.numpy(), y, int(np.unique(y).size), clients, sample_rate,
            global_rate, test_num, majors, major_rate, seed)  # fmt: skip
    else:
        global_test, samples = _our_draws(data, clients, sample_rate, global_rate, test_num,
                                          majors, major_rate, seed, num_classes)  # fmt: skip
    perm = opaque_id_permutation(n, seed)
    views = []
    for k, sample in enumerate(samples):
        nk = sample.size
        if nk <= test_num + nk // 5:
            raise ValueError(f"client {k} has {nk} nodes: too few for {test_num} test nodes")
        edge_index, _ = _induced(data, sample)
        pos = np.arange(nk)
        test = pos >= nk - test_num
        val = (pos >= nk - test_num - nk // 5) & ~test
        views.append(ClientGraph(
            client_id=k, x=data.x[sample].float(), y=data.y[sample].long(),
            train_mask=torch.from_numpy(~(test | val)), val_mask=torch.from_numpy(val),
            test_mask=torch.from_numpy(test), edge_index=edge_index,
            node_ids=torch.from_numpy(perm[sample]), cross_edges="hidden",
            external_edges=torch.empty((2, 0), dtype=torch.long),
            external_owner=torch.empty(0, dtype=torch.long), num_classes=num_classes,
            num_global_nodes=n,
        ))  # fmt: skip
    global_test = np.sort(global_test)
    ei, _ = _induced(data, global_test)
    test_graph = Data(x=data.x[global_test].float(), y=data.y[global_test].long(), edge_index=ei,
                      num_nodes=int(global_test.size))  # fmt: skip
    return LabelSkewWorld(views, test_graph, samples)
