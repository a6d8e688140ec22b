"""Mini-batches of whole graphs without PyG's per-batch collation (numpy index arithmetic).

A :class:`GraphBatches` holds one party's set of graphs (e.g. a client's training fold) as
tensors; :meth:`GraphBatches.batch` stacks any subset into one disjoint-union graph with a
``batch`` vector, like ``torch_geometric.loader.DataLoader`` does (shuffled batches of
``batch_size`` graphs, the last one smaller).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from securefgl.algorithms.common.graph.models import sum_adjacency
from securefgl.data.graph_store import GraphDataset, _ranges


@dataclass
class Batch:
    x: torch.Tensor
    edge_index: torch.Tensor
    batch: torch.Tensor
    y: torch.Tensor
    num_graphs: int
    s: torch.Tensor | None = None  # per-node structure encodings (FedStar)
    adj: torch.Tensor | None = None  # CSR adjacency (built once per batch)


class GraphBatches:
    def __init__(self, data: GraphDataset, s: np.ndarray | None = None) -> None:
        self.x = torch.from_numpy(np.ascontiguousarray(data.x, dtype=np.float32))
        self.s = None if s is None else torch.from_numpy(np.asarray(s, dtype=np.float32))
        self.edge_index = np.asarray(data.edge_index, dtype=np.int64)
        self.node_ptr = np.asarray(data.node_ptr, dtype=np.int64)
        self.edge_ptr = np.asarray(data.edge_ptr, dtype=np.int64)
        self.y = torch.from_numpy(np.asarray(data.y, dtype=np.int64))
        self._all: Batch | None = None
        self._ordered: dict[int, list[Batch]] = {}

    def __len__(self) -> int:
        return int(self.y.numel())

    def batch(self, graphs: np.ndarray) -> Batch:
        graphs = np.asarray(graphs, dtype=np.int64)
        nn = np.diff(self.node_ptr)[graphs]
        ne = np.diff(self.edge_ptr)[graphs]
        nodes = _ranges(self.node_ptr[graphs], nn)
        edges = _ranges(self.edge_ptr[graphs], ne)
        shift = np.repeat(np.concatenate([[0], np.cumsum(nn)[:-1]]), ne)
        ei = torch.from_numpy(self.edge_index[:, edges] + shift)
        b = torch.from_numpy(np.repeat(np.arange(graphs.size), nn))
        s = None if self.s is None else self.s[nodes]
        return Batch(self.x[nodes], ei, b, self.y[graphs], int(graphs.size), s,
                     sum_adjacency(ei, int(nodes.size)))  # fmt: skip

    def all(self) -> Batch:
        """Every graph in one batch (cached: for evaluation)."""
        if self._all is None:
            self._all = self.batch(np.arange(len(self)))
        return self._all

    def in_order(self, batch_size: int) -> list[Batch]:
        """Batches of ``batch_size`` graphs in order (cached: for evaluation); a last batch
        of one graph joins the one before (batch statistics need two)."""
        cached = self._ordered.get(batch_size)
        if cached is None:
            starts = list(range(0, len(self), batch_size))
            if len(starts) > 1 and len(self) - starts[-1] == 1:
                starts.pop()
            ends = [*starts[1:], len(self)]
            cached = [self.batch(np.arange(a, b)) for a, b in zip(starts, ends, strict=True)]
            self._ordered[batch_size] = cached
        return cached

    def iterate(self, batch_size: int, rng: np.random.Generator | None = None) -> Iterator[Batch]:
        """Batches of ``batch_size`` graphs, shuffled by ``rng`` (in order without one)."""
        order = np.arange(len(self)) if rng is None else rng.permutation(len(self))
        for start in range(0, len(self), batch_size):
            yield self.batch(order[start : start + batch_size])
