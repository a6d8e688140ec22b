"""Tiny graphs with known answers for the attack tests (not a test module)."""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data

from attacks.simulation import World
from securefgl.data import build_client_views, random_split

VIEW_SEED = 5


def graph(edges: list[tuple[int, int]], x: np.ndarray, y: np.ndarray, seed: int = 0) -> Data:
    """Undirected graph from an edge list, with a 50/10/40 split."""
    e = np.asarray(edges, dtype=np.int64).T
    edge_index = torch.as_tensor(np.hstack([e, e[::-1]]), dtype=torch.long)
    n = len(x)
    data = Data(
        x=torch.as_tensor(x, dtype=torch.float32),
        y=torch.as_tensor(y, dtype=torch.long),
        edge_index=edge_index,
        num_nodes=n,
    )
    data.num_classes = int(y.max()) + 1
    data.train_mask, data.val_mask, data.test_mask = random_split(n, 0.5, 0.1, 0.4, seed=seed)
    return data


def cliques(count: int = 3, size: int = 10, features: int = 16, seed: int = 0) -> Data:
    """Disjoint cliques, labels = clique, features = binary noise (uninformative)."""
    rng = np.random.default_rng(seed)
    groups = np.arange(count * size).reshape(count, size)
    edges = [(int(u), int(v)) for grp in groups for i, u in enumerate(grp) for v in grp[i + 1 :]]
    x = (rng.random((count * size, features)) < 0.3).astype(np.float32)
    y = np.repeat(np.arange(count), size)
    return graph(edges, x, y, seed)


def world(data: Data, assignment: list[int]) -> World:
    """Client views of ``data`` for a chosen assignment (``known`` cross edges)."""
    a = np.asarray(assignment)
    views = build_client_views(data, a, "known", seed=VIEW_SEED)
    return World(data, a, views, VIEW_SEED)
