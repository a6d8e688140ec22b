"""Client views enforce the threat model: a ClientGraph reaches only its own data."""

import dataclasses
import types

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from securefgl.data import (
    ClientGraph,
    build_client_views,
    csbm,
    opaque_id_permutation,
    partition_graph,
    random_split,
)

SEED = 11


@pytest.fixture(scope="module")
def world():
    """The simulator's global graph (distinct random features per node) + partition."""
    d = csbm(400, num_classes=4, num_features=6, avg_degree=6.0, seed=3)
    # continuous random features: every row is unique, so a leaked row is detectable
    d.x = torch.randn(d.num_nodes, 6, generator=torch.Generator().manual_seed(0))
    d.train_mask, d.val_mask, d.test_mask = random_split(d.num_nodes, seed=1)
    part = partition_graph(d, 4, "louvain", seed=0)
    return d, part.assignment


def reachable(obj, seen=None):
    """Everything reachable from a ClientGraph through dataclass fields, containers,
    object attributes and tensor bases/grads (not through classes or modules)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, type | types.ModuleType | types.FunctionType):
        return
    seen.add(id(obj))
    yield obj
    if isinstance(obj, torch.Tensor):
        for attr in (obj._base, obj.grad):
            if attr is not None:
                yield from reachable(attr, seen)
        return
    if isinstance(obj, dict):
        children = list(obj.keys()) + list(obj.values())
    elif isinstance(obj, list | tuple | set | frozenset):
        children = list(obj)
    elif dataclasses.is_dataclass(obj):
        children = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
        children += list(getattr(obj, "__dict__", {}).values())
    elif hasattr(obj, "__dict__"):
        children = list(vars(obj).values())
    else:
        children = []
    for child in children:
        yield from reachable(child, seen)


def global_storages(d: Data) -> set[int]:
    return {
        t.untyped_storage().data_ptr()
        for t in (d.x, d.y, d.edge_index, d.train_mask, d.val_mask, d.test_mask)
    }


@pytest.mark.parametrize("mode", ["hidden", "known"])
def test_tensors_own_their_storage(world, mode):
    d, a = world
    views = build_client_views(d, a, cross_edges=mode, seed=SEED)
    globals_ = global_storages(d)
    ptrs = []
    for v in views:
        objs = list(reachable(v))
        tensors = [o for o in objs if isinstance(o, torch.Tensor)]
        n_fields = sum(isinstance(getattr(v, f.name), torch.Tensor) for f in dataclasses.fields(v))
        assert n_fields == 9 and len(tensors) == n_fields  # the tensor fields, nothing else
        assert not any(isinstance(o, Data | np.ndarray) for o in objs)
        for t in tensors:
            assert t._base is None and t.storage_offset() == 0
            assert t.untyped_storage().nbytes() == t.numel() * t.element_size()
            if t.numel():
                assert t.untyped_storage().data_ptr() not in globals_
                ptrs.append(t.untyped_storage().data_ptr())
    assert len(ptrs) == len(set(ptrs))  # no storage shared between tensors or clients


def test_post_init_copies_views_of_foreign_tensors(world):
    d, _ = world
    n = 5
    cg = ClientGraph(
        client_id=0,
        x=d.x[:n],
        y=d.y[:n],
        train_mask=d.train_mask[:n],
        val_mask=d.val_mask[:n],
        test_mask=d.test_mask[:n],
        edge_index=torch.empty(2, 0, dtype=torch.long),
        node_ids=torch.arange(n),
        cross_edges="hidden",
        external_edges=torch.empty(2, 0, dtype=torch.long),
        external_owner=torch.empty(0, dtype=torch.long),
        num_classes=4,
        num_global_nodes=d.num_nodes,
    )
    assert cg.x.untyped_storage().data_ptr() != d.x.untyped_storage().data_ptr()
    assert cg.x.untyped_storage().nbytes() == cg.x.numel() * 4
    assert torch.equal(cg.x, d.x[:n])
    with pytest.raises(dataclasses.FrozenInstanceError):
        cg.x = d.x  # type: ignore[misc]


@pytest.mark.parametrize("mode", ["hidden", "known"])
def test_only_own_features_labels_and_edges(world, mode):
    d, a = world
    views = build_client_views(d, a, cross_edges=mode, seed=SEED)
    perm = opaque_id_permutation(d.num_nodes, SEED)
    inv = np.argsort(perm)  # opaque id -> global node
    x_rows = {tuple(r) for r in d.x.numpy().tolist()}
    assert len(x_rows) == d.num_nodes  # features are distinct
    ei = d.edge_index.numpy()
    total = 0
    assert len(views) == int(a.max()) + 1
    for v in views:
        own = np.flatnonzero(a == v.client_id)
        g = inv[v.node_ids.numpy()]  # global index of each local node
        assert sorted(g.tolist()) == own.tolist()
        assert v.num_nodes == own.size and v.num_global_nodes == d.num_nodes
        # (b) features/labels/masks are exactly the own nodes' rows, nothing else
        assert torch.equal(v.x, d.x[torch.from_numpy(g)])
        assert torch.equal(v.y, d.y[torch.from_numpy(g)])
        for name in ("train_mask", "val_mask", "test_mask"):
            assert torch.equal(getattr(v, name), getattr(d, name)[torch.from_numpy(g)])
        foreign = {
            tuple(r)
            for r in d.x[torch.from_numpy(np.setdiff1d(np.arange(d.num_nodes), own))]
            .numpy()
            .tolist()
        }
        assert not foreign & {tuple(r) for r in v.x.numpy().tolist()}
        # (c) edge_index: local indices of own nodes, exactly the internal edges
        le = v.edge_index.numpy()
        assert le.size == 0 or (le.min() >= 0 and le.max() < v.num_nodes)
        inside = np.isin(ei[0], own) & np.isin(ei[1], own)
        want = {(int(s), int(t)) for s, t in ei[:, inside].T}
        got = [(int(g[s]), int(g[t])) for s, t in le.T]
        assert len(got) == len(set(got)) == v.num_edges
        assert set(got) == want
        # (d) cross edges
        cross = np.isin(ei[0], own) & ~np.isin(ei[1], own)
        if mode == "hidden":
            assert v.external_edges.shape == (2, 0) and v.external_owner.shape == (0,)
        else:
            xe = v.external_edges.numpy()
            got_x = [(int(g[s]), int(inv[t])) for s, t in xe.T]
            want_x = {(int(s), int(t)) for s, t in ei[:, cross].T}
            assert len(got_x) == len(set(got_x)) and set(got_x) == want_x
            assert np.array_equal(v.external_owner.numpy(), a[inv[xe[1]]])
            assert not np.isin(inv[xe[1]], own).any()
        total += v.num_edges + int(cross.sum())
        assert v.num_classes == d.num_classes
    # (e) internal + cross over all clients = all directed edges
    assert total == ei.shape[1]


def test_opaque_ids_hide_node_order(world):
    d, a = world
    v0 = build_client_views(d, a, seed=SEED)[0]
    v1 = build_client_views(d, a, seed=SEED + 1)[0]
    ids = v0.node_ids.numpy()
    own = np.flatnonzero(a == 0)
    assert not np.array_equal(np.sort(ids), own)  # ids are not the global indices
    assert np.all(np.diff(ids) > 0)  # local order = ascending opaque id
    assert not np.array_equal(ids, v1.node_ids.numpy())  # seeded
    assert np.array_equal(opaque_id_permutation(10, 3), opaque_id_permutation(10, 3))
    assert sorted(opaque_id_permutation(50, 1).tolist()) == list(range(50))


def test_properties_and_to_data(world):
    d, a = world
    v = build_client_views(d, a, cross_edges="known", seed=SEED)[1]
    assert v.num_features == 6 and v.num_nodes == int((a == 1).sum())
    local = v.to_data()
    assert local.num_nodes == v.num_nodes and torch.equal(local.x, v.x)
    assert torch.equal(local.edge_index, v.edge_index) and torch.equal(local.y, v.y)
    assert "node_ids" not in local and "external_edges" not in local
    assert "ClientGraph(client_id=1" in repr(v)


def test_accepts_partition_and_tensor_assignment(world):
    d, a = world
    part = partition_graph(d, 3, "random", seed=0)
    v1 = build_client_views(d, part, seed=0)
    v2 = build_client_views(d, torch.from_numpy(part.assignment), seed=0)
    assert len(v1) == 3
    assert all(torch.equal(p.x, q.x) for p, q in zip(v1, v2, strict=True))


def test_directed_input_is_symmetrised(world):
    d, a = world
    und = d.edge_index[:, d.edge_index[0] < d.edge_index[1]]
    d2 = Data(
        x=d.x,
        y=d.y,
        edge_index=und,
        num_nodes=d.num_nodes,
        train_mask=d.train_mask,
        val_mask=d.val_mask,
        test_mask=d.test_mask,
    )
    for p, q in zip(
        build_client_views(d, a, "known"), build_client_views(d2, a, "known"), strict=True
    ):
        assert torch.equal(p.edge_index, q.edge_index)
        assert torch.equal(p.external_edges, q.external_edges)


@pytest.mark.parametrize(
    ("assignment", "kwargs", "msg"),
    [
        (np.zeros(3, dtype=np.int64), {}, "shape"),
        (None, {"cross_edges": "partial"}, "cross_edges"),
        ("float", {}, "integers"),
        ("negative", {}, ">= 0"),
    ],
)
def test_invalid_inputs(world, assignment, kwargs, msg):
    d, a = world
    if assignment is None:
        assignment = a
    elif isinstance(assignment, str) and assignment == "float":
        assignment = a.astype(float)
    elif isinstance(assignment, str):
        assignment = a.copy()
        assignment[0] = -2  # -1 means "in no client"
    with pytest.raises(ValueError, match=msg):
        build_client_views(d, assignment, **kwargs)


@pytest.mark.parametrize("mode", ["hidden", "known"])
def test_unassigned_nodes_and_their_edges_are_in_no_view(world, mode):
    d, a = world
    a = a.copy()
    dropped = np.flatnonzero(a == 0)
    a[a == 0] = -1  # client 0's nodes belong to nobody now
    views = build_client_views(d, a, cross_edges=mode, seed=SEED)
    inv = np.argsort(opaque_id_permutation(d.num_nodes, SEED))
    held = np.concatenate([inv[v.node_ids.numpy()] for v in views])
    assert views[0].num_nodes == 0 and not set(held) & set(dropped.tolist())
    assert len(held) == d.num_nodes - dropped.size
    perm = opaque_id_permutation(d.num_nodes, SEED)
    for v in views:
        assert not set(v.external_edges[1].tolist()) & set(perm[dropped].tolist())
        assert v.external_owner.numel() == 0 or int(v.external_owner.min()) >= 1


def test_missing_masks_rejected(world):
    d, a = world
    d2 = Data(x=d.x, y=d.y, edge_index=d.edge_index, num_nodes=d.num_nodes)
    with pytest.raises(ValueError, match="train_mask"):
        build_client_views(d2, a)
