"""Graph-classification datasets: TU datasets (Morris et al. 2020) and a generated one.

TU datasets load through the same verified, offline-first path as the node datasets
(:func:`securefgl.data.datasets.load_pyg_dataset`: raw files copied into the cache and
checked against their SHA-256 before PyG reads them), from ``<root>/TUDataset/<NAME>/raw``.
Node features are the one-hot node labels (``use_node_attr=False``, as GPFL's code, TMLR
2025, ``dataprocess/setup.py``); a dataset without node labels (IMDB-BINARY) gets one-hot
degrees. Every graph is normalised like the node datasets: edges symmetrised, coalesced,
without self-loops. ``synthetic-graphs`` is a small generated dataset for tests and demos;
``motif-basis`` and ``motif-size`` are GOOD-Motif generated offline
(:mod:`securefgl.data.good_motif`), whose graphs carry a domain (one client each).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.utils import remove_self_loops, to_undirected

from securefgl.data.catalog import GENERATED_GRAPHS, TU_DATASETS, data_root, resolve_graph_name
from securefgl.data.datasets import load_pyg_dataset
from securefgl.data.good_motif import good_motif
from securefgl.data.graph_store import GraphDataset, assemble

__all__ = [
    "GENERATED_GRAPHS",
    "TU_DATASETS",
    "GraphDataset",
    "assemble",
    "check_synthetic_options",
    "load_graph_dataset",
    "resolve_graph_name",
    "synthetic_graphs",
]


def load_graph_dataset(
    name: str,
    root: str | Path | None = None,
    *,
    download: bool = False,
    verify: bool = True,
    options: dict[str, Any] | None = None,
) -> GraphDataset:
    """A graph-classification dataset by name (TU datasets: verified offline-first load;
    ``synthetic-graphs``: :func:`synthetic_graphs` with ``options``; ``motif-basis`` /
    ``motif-size``: :func:`securefgl.data.good_motif.good_motif` with ``options``)."""
    key = resolve_graph_name(name)
    if key == "synthetic-graphs":
        return synthetic_graphs(**(options or {}))
    if key in ("motif-basis", "motif-size"):
        return good_motif(key, options)
    spec = TU_DATASETS[key]
    dataset = load_pyg_dataset(spec, data_root(root), download, verify)
    graphs = [dataset[i] for i in range(len(dataset))]
    xs = [g.x for g in graphs] if graphs[0].x is not None else _degree_features(graphs)
    edges = []
    for g in graphs:
        ei, _ = remove_self_loops(g.edge_index.long())
        edges.append(to_undirected(ei, num_nodes=int(g.num_nodes)))
    y = np.array([int(g.y.view(-1)[0]) for g in graphs], dtype=np.int64)
    return assemble(spec.name, xs, edges, y, max(spec.num_classes, int(y.max()) + 1))


def _degree_features(graphs: list[Any]) -> list[torch.Tensor]:
    """One-hot degrees up to the dataset's maximum (PyG ``OneHotDegree``), for datasets
    without node labels."""
    degs = []
    for g in graphs:
        ei = to_undirected(remove_self_loops(g.edge_index.long())[0], num_nodes=int(g.num_nodes))
        degs.append(torch.bincount(ei[0], minlength=int(g.num_nodes)))
    width = int(max(int(d.max()) if d.numel() else 0 for d in degs)) + 1
    return [torch.nn.functional.one_hot(d, width).float() for d in degs]


def synthetic_graphs(
    num_graphs: int = 240,
    num_classes: int = 2,
    min_nodes: int = 8,
    max_nodes: int = 16,
    num_features: int = 4,
    seed: int = 0,
) -> GraphDataset:
    """Small labelled graphs whose class shows in structure and features: class ``c`` is an
    Erdős–Rényi graph with edge probability ``0.15 + 0.2 c / num_classes`` plus a ring, and
    node labels drawn with a class-dependent bias (tests and demos)."""
    rng = np.random.default_rng(seed)
    xs, edges = [], []
    y = rng.integers(0, num_classes, size=num_graphs)
    for c in y:
        n = int(rng.integers(min_nodes, max_nodes + 1))
        p = 0.15 + 0.2 * c / max(num_classes, 1)
        upper = np.triu(rng.random((n, n)) < p, 1)
        ring = np.zeros((n, n), dtype=bool)
        ring[np.arange(n), (np.arange(n) + 1) % n] = True
        a = upper | ring
        src, dst = np.nonzero(a | a.T)
        keep = src != dst
        edges.append(np.stack([src[keep], dst[keep]]))
        probs = np.full(num_features, 1.0)
        probs[int(c) % num_features] += 2.0
        labels = rng.choice(num_features, size=n, p=probs / probs.sum())
        xs.append(np.eye(num_features, dtype=np.float32)[labels])
    return assemble("synthetic-graphs", xs, edges, y.astype(np.int64), num_classes)


def check_synthetic_options(options: dict[str, Any]) -> None:
    """Check :func:`synthetic_graphs`'s arguments without generating (names, integer
    values, ranges)."""
    if not isinstance(options, dict):
        raise TypeError(f"give a table of synthetic_graphs() arguments, got {options!r}")
    params = inspect.signature(synthetic_graphs).parameters
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise ValueError(f"unknown synthetic-graphs option(s) {unknown}; known: {list(params)}")
    args = {k: p.default for k, p in params.items()} | options
    if any(isinstance(v, bool) or not isinstance(v, int) for v in args.values()):
        raise TypeError(f"synthetic-graphs options must be integers, got {options}")
    if args["num_graphs"] < 2 or args["num_classes"] < 2 or args["num_features"] < 1:
        raise ValueError("synthetic-graphs needs num_graphs ≥ 2, num_classes ≥ 2, features ≥ 1")
    if not 3 <= args["min_nodes"] <= args["max_nodes"] or args["seed"] < 0:
        raise ValueError("synthetic-graphs needs 3 ≤ min_nodes ≤ max_nodes and seed ≥ 0")
