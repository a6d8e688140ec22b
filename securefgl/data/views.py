"""Client views: the threat model in code.

The simulator holds the global graph and builds one :class:`ClientGraph` per client, which
holds ONLY its own nodes' features, labels and split masks; its internal edges (local
indices, both directions); and, with ``cross_edges="known"`` (FedStruct, FedGCN), its own
cross-client edges as ``(local endpoint, opaque global id of the external endpoint)`` plus
the client owning that endpoint — never an external node's features or label. With
``"hidden"`` (FedSage+, FedGLS, SpreadFGL) cross-client edges are removed.

Opaque ids are a seeded random permutation of ``[0, n)`` (:func:`opaque_id_permutation`) and
local nodes are ordered by opaque id, so ids do not reveal the dataset's node order.
Documented leaks: ``n`` (FedStruct's S and Ā columns need a global id space) and, in known
mode, the owner of each external neighbour. Every tensor of a ClientGraph owns its storage
(:meth:`ClientGraph.__post_init__` copies any that does not).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from typing import Literal

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

__all__ = ["CROSS_EDGE_MODES", "ClientGraph", "build_client_views", "opaque_id_permutation"]

logger = logging.getLogger(__name__)

CROSS_EDGE_MODES = ("hidden", "known")
CrossEdges = Literal["hidden", "known"]


def _owns_storage(t: torch.Tensor) -> bool:
    return (
        t._base is None
        and t.storage_offset() == 0
        and t.is_contiguous()
        and t.untyped_storage().nbytes() == t.numel() * t.element_size()
    )


def _owned(t: torch.Tensor) -> torch.Tensor:
    """A detached tensor with its own compact storage (a copy unless it already is)."""
    t = t.detach()
    return t if _owns_storage(t) else t.clone(memory_format=torch.contiguous_format)


def _fresh(a: np.ndarray | torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Always a new tensor with its own storage (never shares memory with ``a``)."""
    t = torch.as_tensor(a).to(dtype)
    return t.clone(memory_format=torch.contiguous_format)


@dataclass(frozen=True, eq=False)
class ClientGraph:
    """Everything one client may see (see module docstring)."""

    client_id: int
    x: torch.Tensor  # [n_i, F] float32, own nodes only
    y: torch.Tensor  # [n_i] long
    train_mask: torch.Tensor  # [n_i] bool
    val_mask: torch.Tensor  # [n_i] bool
    test_mask: torch.Tensor  # [n_i] bool
    edge_index: torch.Tensor  # [2, e_i] long, local indices, internal edges, both directions
    node_ids: torch.Tensor  # [n_i] long, opaque global ids of own nodes
    cross_edges: str  # "hidden" | "known"
    external_edges: torch.Tensor  # [2, c_i] long: (local own node, opaque external id)
    external_owner: torch.Tensor  # [c_i] long: client owning the external endpoint
    num_classes: int
    num_global_nodes: int  # size of the opaque id space (public in FedStruct)

    def __post_init__(self) -> None:
        if self.cross_edges not in CROSS_EDGE_MODES:
            raise ValueError(
                f"cross_edges must be one of {CROSS_EDGE_MODES}, got {self.cross_edges!r}"
            )
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                object.__setattr__(self, f.name, _owned(value))
        n = self.x.size(0)
        for name in ("y", "train_mask", "val_mask", "test_mask", "node_ids"):
            if getattr(self, name).shape != (n,):
                raise ValueError(
                    f"{name} must have shape [{n}], got {tuple(getattr(self, name).shape)}"
                )
        for name in ("edge_index", "external_edges"):
            t = getattr(self, name)
            if t.dim() != 2 or t.size(0) != 2:
                raise ValueError(f"{name} must have shape [2, *], got {tuple(t.shape)}")
        if self.external_owner.shape != (self.external_edges.size(1),):
            raise ValueError("external_owner must have one entry per external edge")
        if self.cross_edges == "hidden" and self.external_edges.size(1):
            raise ValueError("hidden mode must not carry external edges")

    @property
    def num_nodes(self) -> int:
        return int(self.x.size(0))

    @property
    def num_features(self) -> int:
        return int(self.x.size(1))

    @property
    def num_edges(self) -> int:
        """Directed internal edges (each undirected edge counts twice)."""
        return int(self.edge_index.size(1))

    @property
    def num_external_edges(self) -> int:
        return int(self.external_edges.size(1))

    def to_data(self) -> Data:
        """The local graph as a PyG ``Data`` (x, y, masks, edge_index); no external
        nodes (they have no features here)."""
        return Data(
            x=self.x,
            y=self.y,
            edge_index=self.edge_index,
            train_mask=self.train_mask,
            val_mask=self.val_mask,
            test_mask=self.test_mask,
            num_nodes=self.num_nodes,
        )

    def __repr__(self) -> str:
        return (
            f"ClientGraph(client_id={self.client_id}, nodes={self.num_nodes}, "
            f"features={self.num_features}, edges={self.num_edges}, "
            f"cross_edges={self.cross_edges!r}, external={self.num_external_edges})"
        )


def opaque_id_permutation(num_nodes: int, seed: int = 0) -> np.ndarray:
    """``perm[v]`` = opaque id of global node ``v`` (simulator side; inverse:
    ``np.argsort(perm)``). Same function, same seed -> same id space for all clients."""
    return np.random.default_rng([seed, 0x5EC0FD]).permutation(int(num_nodes))


def _global_masks(data: Data, n: int) -> list[torch.Tensor]:
    masks = []
    for name in ("train_mask", "val_mask", "test_mask"):
        m = getattr(data, name, None)
        if m is None:
            raise ValueError(
                f"data has no {name}; attach masks from "
                "securefgl.data.random_split before building client views"
            )
        if m.dtype != torch.bool or m.shape != (n,):
            raise ValueError(
                f"{name} must be a bool tensor of shape [{n}], got {m.dtype} {tuple(m.shape)}"
            )
        masks.append(m)
    return masks


def build_client_views(
    data: Data,
    assignment: np.ndarray | torch.Tensor,
    cross_edges: CrossEdges = "hidden",
    seed: int = 0,
) -> list[ClientGraph]:
    """Split the global graph into per-client views (simulator side).

    ``assignment[v]`` is the client of node ``v`` (a ``Partition.assignment``, or the
    Partition itself), ``-1`` for a node in no client (its edges are in no view); the
    number of clients is ``max + 1`` (or the Partition's K).
    The edge set is treated as undirected (symmetrised and deduplicated; a no-op for
    :func:`load_dataset` and :func:`csbm` output). Then, per client ``k``: internal
    edges = directed edges with both endpoints in ``k``; external edges = directed
    edges ``(u, v)`` with ``u`` in ``k`` and ``v`` elsewhere, so
    ``sum_k (internal_k + external_k)`` = all directed edges. Opaque ids come from
    :func:`opaque_id_permutation` with the same ``seed``. Vectorised; loops only over
    clients.

    Raises:
        ValueError: wrong assignment length/dtype/values, unknown ``cross_edges``,
            missing or malformed masks.
    """
    if cross_edges not in CROSS_EDGE_MODES:
        raise ValueError(f"cross_edges must be one of {CROSS_EDGE_MODES}, got {cross_edges!r}")
    declared = int(getattr(assignment, "num_clients", 0))  # a Partition knows its K
    assignment = getattr(assignment, "assignment", assignment)
    a = (
        assignment.detach().cpu().numpy()
        if isinstance(assignment, torch.Tensor)
        else np.asarray(assignment)
    )
    n = int(data.num_nodes)
    if a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"assignment must have shape [{n}] (one client per node), got {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"assignment must hold integers, got dtype {a.dtype}")
    a = a.astype(np.int64)
    if n and a.min() < -1:
        raise ValueError(f"assignment values must be >= 0 (or -1: in no client), got min {a.min()}")
    if data.x is None or data.y is None:
        raise ValueError("data needs node features x and labels y")
    masks = _global_masks(data, n)
    K = max(int(a.max()) + 1 if n else 0, declared)
    num_classes = getattr(data, "num_classes", None)
    if not isinstance(num_classes, int | np.integer):
        num_classes = int(data.y.max()) + 1 if n else 0

    perm = opaque_id_permutation(n, seed)  # global node -> opaque id
    kept = a >= 0  # -1: a node in no client (and its edges in no view)
    # local order: nodes grouped by client, ascending opaque id inside a client
    order = np.lexsort((perm, a))
    order = order[kept[order]]
    sizes = np.bincount(a[kept], minlength=K)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    local = np.full(n, -1, dtype=np.int64)
    local[order] = np.arange(order.size) - np.repeat(starts, sizes)

    ei = to_undirected(data.edge_index.long(), num_nodes=n).cpu().numpy()
    ei = ei[:, kept[ei[0]] & kept[ei[1]]]
    src, dst = ei[0], ei[1]
    owner_src, owner_dst = a[src], a[dst]
    internal = owner_src == owner_dst
    # group edges by client once; inside a client sort by (local src, local dst)
    int_idx = np.flatnonzero(internal)
    int_idx = int_idx[np.lexsort((local[dst[int_idx]], local[src[int_idx]], owner_src[int_idx]))]
    int_bounds = np.searchsorted(owner_src[int_idx], np.arange(K + 1))
    ext_idx = np.flatnonzero(~internal)
    ext_idx = ext_idx[np.lexsort((perm[dst[ext_idx]], local[src[ext_idx]], owner_src[ext_idx]))]
    ext_bounds = np.searchsorted(owner_src[ext_idx], np.arange(K + 1))

    x, y = data.x, data.y
    views = []
    for k in range(K):
        nodes = torch.from_numpy(order[starts[k] : starts[k] + sizes[k]])
        e = int_idx[int_bounds[k] : int_bounds[k + 1]]
        local_ei = np.stack([local[src[e]], local[dst[e]]])
        if cross_edges == "known":
            c = ext_idx[ext_bounds[k] : ext_bounds[k + 1]]
            ext = np.stack([local[src[c]], perm[dst[c]]])
            ext_owner = owner_dst[c]
        else:
            ext = np.empty((2, 0), dtype=np.int64)
            ext_owner = np.empty(0, dtype=np.int64)
        if sizes[k] == 0:
            logger.warning("client %d has no nodes", k)
        views.append(
            ClientGraph(
                client_id=k,
                x=_fresh(x[nodes], torch.float32),
                y=_fresh(y[nodes], torch.long),
                train_mask=_fresh(masks[0][nodes], torch.bool),
                val_mask=_fresh(masks[1][nodes], torch.bool),
                test_mask=_fresh(masks[2][nodes], torch.bool),
                edge_index=_fresh(local_ei, torch.long),
                node_ids=_fresh(perm[order[starts[k] : starts[k] + sizes[k]]], torch.long),
                cross_edges=cross_edges,
                external_edges=_fresh(ext, torch.long),
                external_owner=_fresh(ext_owner, torch.long),
                num_classes=int(num_classes),
                num_global_nodes=n,
            )
        )
    return views
