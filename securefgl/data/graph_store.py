"""Graphs stored end to end (one array each for features, edges, pointers and labels): the
container of every graph-classification dataset (:mod:`securefgl.data.graph_datasets`,
:mod:`securefgl.data.good_motif`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["GraphDataset", "assemble"]


@dataclass
class GraphDataset:
    """Graphs stored end to end: graph ``g`` owns nodes ``node_ptr[g]:node_ptr[g+1]`` of
    ``x`` and edges ``edge_ptr[g]:edge_ptr[g+1]`` of ``edge_index`` (indices local to
    the graph, both directions)."""

    name: str
    x: np.ndarray  # float32 [N, F]
    edge_index: np.ndarray  # int64 [2, E], local to each graph
    node_ptr: np.ndarray  # int64 [G + 1]
    edge_ptr: np.ndarray  # int64 [G + 1]
    y: np.ndarray  # int64 [G]
    num_classes: int
    domain: np.ndarray | None = None  # int64 [G]: the graph's domain (GOOD-Motif), if any
    domain_names: tuple[str, ...] = ()
    val_per_domain: int = 0  # graphs per domain held out for validation (GOOD-Motif)

    @property
    def num_graphs(self) -> int:
        return int(self.y.shape[0])

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    @property
    def num_nodes(self) -> np.ndarray:
        return np.diff(self.node_ptr)

    def graph(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        """``(x, edge_index)`` of graph ``g`` (views, not copies)."""
        n0, n1 = self.node_ptr[g], self.node_ptr[g + 1]
        e0, e1 = self.edge_ptr[g], self.edge_ptr[g + 1]
        return self.x[n0:n1], self.edge_index[:, e0:e1]

    def subset(self, graphs: np.ndarray) -> GraphDataset:
        """The graphs ``graphs`` (in that order) as a new dataset owning its arrays."""
        graphs = np.asarray(graphs, dtype=np.int64)
        nn, ne = self.num_nodes[graphs], np.diff(self.edge_ptr)[graphs]
        node_idx = _ranges(self.node_ptr[graphs], nn)
        edge_idx = _ranges(self.edge_ptr[graphs], ne)
        return GraphDataset(
            self.name,
            self.x[node_idx].copy(),
            self.edge_index[:, edge_idx].copy(),
            np.concatenate([[0], np.cumsum(nn)]).astype(np.int64),
            np.concatenate([[0], np.cumsum(ne)]).astype(np.int64),
            self.y[graphs].copy(),
            self.num_classes,
            None if self.domain is None else self.domain[graphs].copy(),
            self.domain_names,
            self.val_per_domain,
        )


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concat(arange(s, s + n) for s, n)`` without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(total, dtype=np.int64) + offsets


def assemble(
    name: str, xs: list[Any], edges: list[Any], y: np.ndarray, num_classes: int
) -> GraphDataset:
    nn = np.array([len(x) for x in xs], dtype=np.int64)
    ne = np.array([e.shape[1] for e in edges], dtype=np.int64)
    return GraphDataset(
        name,
        np.concatenate([np.asarray(x, dtype=np.float32) for x in xs]),
        np.concatenate([np.asarray(e, dtype=np.int64) for e in edges], axis=1),
        np.concatenate([[0], np.cumsum(nn)]).astype(np.int64),
        np.concatenate([[0], np.cumsum(ne)]).astype(np.int64),
        y,
        num_classes,
    )


