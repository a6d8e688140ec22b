"""FedStruct's L-hop adjacency Ā: central reference and federated Algorithm 3."""

import dataclasses
import math
import types

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data

from protocols.base import Envelope
from protocols.wire import Payload, WireFormatError
from securefgl.algorithms.fedstruct.abar_build import PlainHopSum, build_abar
from securefgl.algorithms.fedstruct.abar_central import (
    central_abar,
    keep_top_values,
    normalized_adjacency,
)
from securefgl.algorithms.fedstruct.abar_client import (
    BLOCK_TAG,
    SIZE_TAG,
    AdjacencyClient,
    AdjacencyRelay,
    SparseRows,
)
from securefgl.data import (
    build_client_views,
    csbm,
    opaque_id_permutation,
    partition_graph,
    random_split,
)
from securefgl.federation import Channel, LocalExecutor

SEED = 7


# ---------------------------------------------------------------- simulator helpers


def make_world(n=150, K=3, method="random", seed=0, view_seed=SEED):
    d = csbm(n, num_classes=3, num_features=4, avg_degree=5.0, seed=seed)
    d.train_mask, d.val_mask, d.test_mask = random_split(d.num_nodes, seed=seed)
    part = partition_graph(d, K, method, seed=seed)
    views = build_client_views(d, part, cross_edges="known", seed=view_seed)
    return d, np.asarray(part.assignment), views


def hand_world():
    """App. D.2's 9-node graph, 3 clients {1,2,3} {4,5,6} {7,8,9}, the A_44 typo removed."""
    A = np.array(
        [
            [0, 1, 1, 0, 0, 0, 0, 0, 0],
            [1, 0, 1, 0, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 1, 0, 0, 0],
            [0, 0, 0, 0, 1, 1, 0, 0, 0],
            [0, 0, 0, 1, 0, 1, 0, 0, 0],
            [0, 0, 1, 1, 1, 0, 0, 0, 1],
            [0, 0, 0, 0, 0, 0, 0, 1, 1],
            [0, 0, 0, 0, 0, 0, 1, 0, 1],
            [0, 0, 0, 0, 0, 1, 1, 1, 0],
        ]
    )
    assert (A == A.T).all()
    ei = torch.tensor(np.vstack(np.nonzero(A)), dtype=torch.long)
    d = Data(x=torch.randn(9, 2), y=torch.zeros(9, dtype=torch.long), edge_index=ei)
    d.train_mask, d.val_mask, d.test_mask = random_split(9, seed=0)
    assignment = np.repeat(np.arange(3), 3)
    return d, assignment, build_client_views(d, assignment, cross_edges="known", seed=SEED)


def federate(views, relay=True):
    clients = {f"client-{v.client_id}": AdjacencyClient(v) for v in views}
    parties = dict(clients)
    if relay:
        parties["server"] = AdjacencyRelay("server", list(clients))
    channel = Channel()
    return clients, channel, LocalExecutor(parties), ("server" if relay else None)


def to_opaque(m: sp.spmatrix, view_seed=SEED) -> sp.csr_matrix:
    """Global-id matrix -> opaque ids on both axes (the simulator's permutation)."""
    inv = np.argsort(opaque_id_permutation(m.shape[0], view_seed))
    return sp.csr_matrix(m)[inv][:, inv]


def dense_abar(edge_index, n, hops, beta):
    A = np.zeros((n, n))
    ei = np.asarray(edge_index)
    A[ei[0], ei[1]] = 1
    A[ei[1], ei[0]] = 1
    np.fill_diagonal(A, 1)
    a_hat = A / A.sum(1, keepdims=True)
    out, p = np.zeros((n, n)), np.eye(n)
    for b in beta:
        p = a_hat @ p
        out += b * p
    return out


def max_err(clients, ref_opaque):
    return max(
        float(abs(c.abar - ref_opaque[c.row_ids]).max()) if c.num_nodes else 0.0
        for c in clients.values()
    )


# ---------------------------------------------------------------- central reference


def test_central_matches_dense_with_selfloops_and_duplicates():
    rng = np.random.default_rng(0)
    n = 30
    ei = rng.integers(0, n, size=(2, 80))
    ei = np.hstack([ei, ei[:, :10], [[3, 4], [3, 4]]])  # duplicates + self-loops
    beta = [0.3, -0.2, 0.9]
    ref = dense_abar(ei[:, ei[0] != ei[1]], n, 3, beta)
    got = central_abar(torch.as_tensor(ei), n, 3, beta)
    assert sp.issparse(got) and got.shape == (n, n)
    np.testing.assert_allclose(got.toarray(), ref, atol=1e-12)
    np.testing.assert_allclose(normalized_adjacency(ei, n).sum(1), 1.0)
    # default beta: one-hot at L_s
    one_hot = central_abar(ei, n, 3).toarray()
    np.testing.assert_allclose(one_hot, dense_abar(ei[:, ei[0] != ei[1]], n, 3, [0, 0, 1]))


def test_central_prune_keeps_global_top_values():
    d, _, _ = make_world(120, 2)
    n = d.num_nodes
    p = 2
    full = central_abar(d.edge_index, n, 1)
    pruned = central_abar(d.edge_index, n, 1, prune=p)
    assert pruned.nnz == min(p * n, full.nnz) < full.nnz
    dropped = (full - pruned).tocsr()
    dropped.eliminate_zeros()
    assert pruned.data.min() >= dropped.data.max()  # a top-k selection, not renormalised
    assert central_abar(d.edge_index, n, 4, prune=p).nnz <= p * n


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_central_paper_tie_rule_agrees_without_ties_at_the_cut_off(hops):
    """``ties="paper"`` (the official code's argsort) keeps as many entries as the canonical
    rule, and the same ones when no tie straddles a cut-off on the way."""
    d, _, _ = make_world(120, 2)
    n, ei = d.num_nodes, np.asarray(d.edge_index)
    a_hat = normalized_adjacency(ei, n)

    def tie_free(k):  # no tie at the cut-off of any hop of the (canonical) pruned chain
        pm = sp.identity(n, format="csr")
        for _ in range(hops):
            pm = sp.csr_matrix(a_hat @ pm)
            top = np.sort(pm.data)[::-1]
            if k < top.size and top[k - 1] == top[k]:
                return False
            pm = keep_top_values(pm, k)
        return True

    clean = [k for k in range(1, 200) if tie_free(k)]
    assert clean and len(clean) < 199  # both cases occur on this graph
    for k in sorted({*clean[:4], *range(1, 200, 23)}):
        p = (k - 0.5) / n  # ⌈p·n⌉ = k
        canonical = central_abar(ei, n, hops, prune=p)
        paper = central_abar(ei, n, hops, prune=p, ties="paper")
        assert (central_abar(ei, n, hops, prune=p, ties="canonical") != canonical).nnz == 0
        assert paper.nnz == canonical.nnz
        if k in clean:
            assert (paper != canonical).nnz == 0
    with pytest.raises(ValueError, match="ties"):
        central_abar(ei, n, hops, prune=1, ties="storage")


def test_keep_top_values_edge_cases():
    m = sp.csr_matrix(np.array([[0.5, 0, 0.2], [0.1, 0.9, 0]]))
    assert keep_top_values(m, 10) is m
    assert keep_top_values(m, 0).nnz == 0
    dup = sp.csr_matrix((np.array([0.2, 0.3, 0.4]), np.array([1, 1, 2]), np.array([0, 3])))
    np.testing.assert_allclose(keep_top_values(dup, 2).toarray(), [[0, 0.5, 0.4]])  # merged
    np.testing.assert_allclose(keep_top_values(m, 2).toarray(), [[0.5, 0, 0], [0, 0.9, 0]])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 60))
def test_keep_top_values_ties_do_not_depend_on_storage_order(seed, k):
    """Equal values straddling the cut-off: the same entries are kept however they are
    stored (each row's entries shuffled), namely the first ties in (row, column) order."""
    rng = np.random.default_rng(seed)
    dense = rng.choice([0.0, 0.0, 0.25, 0.5, 1.0], size=(8, 12))  # few distinct values
    canonical = sp.csr_matrix(dense)
    shuffled = canonical.copy()
    for r in range(shuffled.shape[0]):
        lo, hi = shuffled.indptr[r], shuffled.indptr[r + 1]
        perm = lo + rng.permutation(hi - lo)
        shuffled.indices[lo:hi] = shuffled.indices[perm].copy()
        shuffled.data[lo:hi] = shuffled.data[perm].copy()
    shuffled.has_sorted_indices = False
    kept = keep_top_values(canonical, k)
    assert (keep_top_values(shuffled, k) != kept).nnz == 0
    expected = np.sort(canonical.data)[::-1][:k]
    np.testing.assert_array_equal(np.sort(kept.data)[::-1], expected)  # a top-k multiset
    if k < canonical.nnz:  # ties at the cut-off: the earliest in row-major order are kept
        cut = expected[-1]
        tied = np.flatnonzero(dense.ravel() == cut)
        kept_tied = np.flatnonzero(kept.toarray().ravel() == cut)
        np.testing.assert_array_equal(kept_tied, tied[: kept_tied.size])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 60), split=st.booleans())
def test_keep_top_values_matches_a_full_sort(seed, k, split):
    """Against the definition: merge duplicates, order every entry by (-value, row, column),
    keep the first k. Stored unsorted, optionally with entries split into duplicates."""
    rng = np.random.default_rng(seed)
    dense = rng.choice([0.0, 0.0, 0.25, 0.5, 1.0], size=(7, 9)) * rng.choice([1, 2], (7, 9))
    r, c = np.nonzero(dense)
    v = dense[r, c]
    if split:  # some entries stored as two halves, in a shuffled order
        half = rng.random(v.size) < 0.5
        r, c = np.concatenate([r, r[half]]), np.concatenate([c, c[half]])
        v = np.concatenate([np.where(half, v / 2, v), v[half] / 2])
    order = rng.permutation(v.size)
    by_row = np.argsort(r[order], kind="stable")
    idx = order[by_row]
    indptr = np.searchsorted(r[idx], np.arange(dense.shape[0] + 1))
    m = sp.csr_matrix((v[idx], c[idx], indptr), shape=dense.shape)
    assert m.nnz == v.size  # stored as given: unsorted, duplicates kept

    kept = keep_top_values(m, k)
    rows, cols = np.nonzero(dense)  # row-major order
    top = np.lexsort((cols, rows, -dense[rows, cols]))[:k]
    expected = np.zeros_like(dense)
    expected[rows[top], cols[top]] = dense[rows[top], cols[top]]
    np.testing.assert_array_equal(kept.toarray(), expected if m.nnz > k else dense)
    if m.nnz > k:
        assert kept.has_canonical_format and kept.nnz == min(k, rows.size)


# ---------------------------------------------------------------- federated == central


@pytest.mark.parametrize("relay", [True, False])
def test_appendix_d2_example(relay):
    d, assignment, views = hand_world()
    clients, channel, ex, server = federate(views, relay)
    build_abar(clients, channel, ex, hops=2, server_id=server)
    ref = to_opaque(central_abar(d.edge_index, 9, 2))
    assert max_err(clients, ref) < 1e-12
    # the block client 1 (party client-0) sends client 2 (client-1) at hop 2: the only
    # row of client 2 adjacent to client 1 is node 6, whose one neighbour there is node 3,
    # so the row is row 3 of Â: 1/4 at nodes 1, 2, 3, 6 (the paper's B_211 in row 3,
    # not its printed transpose)
    perm = opaque_id_permutation(9, SEED)
    msgs = [
        e
        for e in channel.transcript.view("client-1").messages(BLOCK_TAG)
        if e.payload.meta["from"] == "client-0"
    ]
    assert len(msgs) == 1
    block = SparseRows.from_payload(msgs[0].payload, 9)
    np.testing.assert_array_equal(block.row_ids, [perm[5]])
    expected = np.zeros(9)
    expected[perm[[0, 1, 2, 5]]] = 0.25
    np.testing.assert_allclose(block.matrix.toarray()[0], expected)
    # clients 1 and 3 share no edge: nothing flows between them
    assert not [
        e
        for e in channel.transcript.view("client-2").messages(BLOCK_TAG)
        if e.payload.meta["from"] == "client-0"
    ]


@pytest.mark.parametrize("K", [2, 3, 5])
@pytest.mark.parametrize("hops", [1, 2, 3, 5])
@pytest.mark.parametrize("method", ["random", "louvain"])
def test_unpruned_federated_rows_equal_central(K, hops, method):
    d, _, views = make_world(160, K, method, seed=K * 10 + hops)
    beta = np.random.default_rng(hops).normal(size=hops).tolist()
    clients, channel, ex, server = federate(views, relay=(K != 3))
    report = build_abar(clients, channel, ex, hops, beta=beta, server_id=server)
    ref = to_opaque(central_abar(d.edge_index, d.num_nodes, hops, beta))
    assert max_err(clients, ref) < 1e-6
    for c in clients.values():
        assert c.abar.shape == (c.num_nodes, d.num_nodes)
    assert len(report.hops) == hops
    assert report.bytes == channel.transcript.total_bytes()
    assert (report.bytes > 0) == (hops > 1)


def test_default_beta_is_one_hot_and_ids_list_accepted():
    d, _, views = make_world(100, 3)
    clients, channel, ex, server = federate(views)
    build_abar(list(clients), channel, ex, hops=3, server_id=server)
    ref = to_opaque(central_abar(d.edge_index, d.num_nodes, 3, beta=[0, 0, 1]))
    assert max_err(clients, ref) < 1e-12


def test_hidden_mode_raises():
    d, assignment, _ = make_world(60, 2)
    hidden = build_client_views(d, assignment, cross_edges="hidden")
    with pytest.raises(ValueError, match="known"):
        AdjacencyClient(hidden[0])


# ---------------------------------------------------------------- transcript and leakage


class CountingChannel(Channel):
    """Counts the bytes of every envelope handed to the channel, independently."""

    def __init__(self):
        super().__init__()
        self.sizes = []

    def transmit(self, envelopes):
        self.sizes += [len(e.payload.to_bytes()) for e in envelopes]
        return super().transmit(envelopes)


@pytest.mark.parametrize("relay", [True, False])
@pytest.mark.parametrize("prune", [None, "sender"])
def test_every_byte_on_transcript(relay, prune):
    d, assignment, views = make_world(150, 4)
    clients, _, ex, server = federate(views, relay)
    channel = CountingChannel()
    report = build_abar(clients, channel, ex, 4, prune=prune, p=5, server_id=server)
    entries = channel.transcript.entries
    assert sum(channel.sizes) == channel.transcript.total_bytes() == report.bytes > 0
    assert len(channel.sizes) == len(entries) == report.messages
    assert {e.tag for e in entries} == ({BLOCK_TAG, SIZE_TAG} if prune else {BLOCK_TAG})
    # one block per ordered pair of clients sharing an edge, per hop (x2 when relayed)
    pairs = {
        (int(a), int(b))
        for a, b in zip(*assignment[np.asarray(d.edge_index)], strict=True)
        if a != b
    }
    blocks = [e for e in entries if e.tag == BLOCK_TAG]
    assert len(blocks) == 3 * len(pairs) * (2 if relay else 1)
    if relay:  # all traffic goes through the server
        assert all("server" in (e.sender, e.receiver) for e in entries)


@pytest.mark.parametrize("relay", [True, False])
def test_plain_receiver_sees_each_individual_block(relay):
    """The baseline leak of the paper's scheme: client i receives every B_ik itself
    (a secure hop sum must make this test's assertion fail)."""
    d, assignment, views = make_world(140, 3, seed=3)
    clients, channel, ex, server = federate(views, relay)
    hops = 3
    build_abar(clients, channel, ex, hops, server_id=server)
    n = d.num_nodes
    perm = opaque_id_permutation(n, SEED)
    inv = np.argsort(perm)
    a_hat = normalized_adjacency(d.edge_index, n)
    a_tilde = (a_hat > 0).astype(np.float64).tocsr()
    powers = [sp.identity(n, format="csr")]
    for _ in range(hops):
        powers.append(sp.csr_matrix(a_hat @ powers[-1]))
    for i in range(3):
        view = channel.transcript.view(f"client-{i}")
        Vi = np.flatnonzero(assignment == i)
        for k in range(3):
            if k == i:
                continue
            Vk = np.flatnonzero(assignment == k)
            rows = Vi[np.asarray(a_tilde[Vi][:, Vk].sum(1)).ravel() > 0]
            msgs = [m for m in view.messages(BLOCK_TAG) if m.payload.meta["from"] == f"client-{k}"]
            assert len(msgs) == (hops - 1 if rows.size else 0)
            for m in msgs:
                hop = m.payload.meta["hop"]
                B = a_tilde[rows][:, Vk] @ powers[hop - 1][Vk]  # Eq. 35, simulator side
                order = np.argsort(perm[rows])
                expected = sp.csr_matrix(B)[order][:, inv].toarray()
                block = SparseRows.from_payload(m.payload, n)
                np.testing.assert_array_equal(block.row_ids, perm[rows][order])
                np.testing.assert_allclose(block.matrix.toarray(), expected, atol=1e-12)
    if relay:  # the relaying server saw the same blocks
        assert len(list(channel.transcript.view("server").messages(BLOCK_TAG))) == len(
            list(channel.transcript.view("client-0").messages(BLOCK_TAG))
        ) + len(list(channel.transcript.view("client-1").messages(BLOCK_TAG))) + len(
            list(channel.transcript.view("client-2").messages(BLOCK_TAG))
        )


# ---------------------------------------------------------------- pruning


def run(views, **kw):
    clients, channel, ex, server = federate(views)
    report = build_abar(clients, channel, ex, server_id=server, **kw)
    return clients, channel, report


def test_receiver_pruning_bounds_entries_and_bytes():
    d, _, views = make_world(200, 4, seed=5)
    hops, p = 4, 3
    full_clients, _, full = run(views, hops=hops)
    clients, channel, report = run(views, hops=hops, prune="receiver", p=p)
    for c, f in zip(clients.values(), full_clients.values(), strict=True):
        assert 0 < c.abar.nnz <= math.ceil(p * c.num_nodes) < f.abar.nnz
        # pruning only removes mass: entrywise below the exact Ā (non-negative β)
        assert (c.abar - f.abar).max() <= 1e-12
    assert all(h.nnz <= p * d.num_nodes + 4 for h in report.hops)
    assert report.bytes < full.bytes
    # L_s = 1: exactly the top ⌈p·n_i⌉ values of the client's rows of Â
    one, _, _ = run(views, hops=1, prune="receiver", p=p)
    ref = to_opaque(central_abar(d.edge_index, d.num_nodes, 1))
    for c in one.values():
        rows = ref[c.row_ids]
        assert c.abar.nnz == min(math.ceil(p * c.num_nodes), rows.nnz)
        dropped = (rows - c.abar).tocsr()
        dropped.eliminate_zeros()
        assert dropped.nnz == 0 or c.abar.data.min() >= dropped.data.max()


def test_sender_pruning_bounds_each_block_and_bytes():
    d, _, views = make_world(200, 4, seed=6)
    hops, p, K = 4, 6, 4
    full_clients, _, full = run(views, hops=hops)
    clients, channel, report = run(views, hops=hops, prune="sender", p=p)
    sizes = {pid: c.num_nodes for pid, c in clients.items()}
    blocks = [e for e in channel.transcript.entries if e.tag == BLOCK_TAG]
    assert blocks
    for e in blocks:
        payload = e.payload()
        cap = math.ceil(p / K) * sizes[payload.meta["to"]]
        assert payload.array("vals").size <= cap
    sizes_sent = [e for e in channel.transcript.entries if e.tag == SIZE_TAG]
    assert sizes_sent  # n_i announced to neighbours (a documented leak)
    for c, f in zip(clients.values(), full_clients.values(), strict=True):
        # at most ⌈p/K⌉·n_i from each of ≤ K contributions (own term included)
        assert c.abar.nnz <= K * math.ceil(p / K) * c.num_nodes
        assert c.abar.nnz < f.abar.nnz
        assert (c.abar - f.abar).max() <= 1e-12
    assert report.bytes < full.bytes


def test_pruning_with_huge_p_is_exact():
    d, _, views = make_world(100, 3, seed=2)
    ref = to_opaque(central_abar(d.edge_index, d.num_nodes, 3))
    for prune in ("sender", "receiver"):
        clients, _, _ = run(views, hops=3, prune=prune, p=1e6)
        assert max_err(clients, ref) < 1e-12


# ---------------------------------------------------------------- isolation and validation


def reachable(obj, seen=None):
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, type | types.ModuleType | types.FunctionType):
        return
    seen.add(id(obj))
    yield obj
    if isinstance(obj, np.ndarray | sp.spmatrix | sp.sparray | torch.Tensor):
        return
    if isinstance(obj, dict):
        children = list(obj.keys()) + list(obj.values())
    elif isinstance(obj, list | tuple | set | frozenset):
        children = list(obj)
    elif dataclasses.is_dataclass(obj):
        children = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    elif hasattr(obj, "__dict__"):
        children = list(vars(obj).values())
    else:
        children = []
    for child in children:
        yield from reachable(child, seen)


@pytest.mark.parametrize("prune", [None, "sender", "receiver"])
def test_no_party_holds_other_clients_rows(prune):
    d, assignment, views = make_world(150, 3, seed=4)
    clients, channel, ex, server = federate(views)
    n = d.num_nodes
    for c in clients.values():  # before, in the middle of and after the build
        assert not [o for o in reachable(c) if sp.issparse(o) and o.shape[0] != c.num_nodes]
    build_abar(clients, channel, ex, 3, prune=prune, p=4, server_id=server)
    for pid, c in clients.items():
        # its own external edges as incidences Ã^[i]_k (rows: i's nodes adjacent to it) are
        # its own data; everything else it holds has its own rows
        own = {id(c._incidences().matrix)}
        assert c._incidences().matrix.nnz == c._ext_ids.size
        mats = [o for o in reachable(c) if sp.issparse(o) and id(o) not in own]
        assert mats and all(m.shape[0] == c.num_nodes for m in mats), pid
        assert all(m.shape[1] in (c.num_nodes, n) for m in mats)
        assert c.abar.shape == (c.num_nodes, n)
    relay = ex.parties["server"]
    assert not [o for o in reachable(relay) if sp.issparse(o) or isinstance(o, np.ndarray)]


def test_rows_match_the_clients_own_nodes():
    d, assignment, views = make_world(120, 3, seed=8)
    perm = opaque_id_permutation(d.num_nodes, SEED)
    clients, channel, ex, server = federate(views)
    build_abar(clients, channel, ex, 2, server_id=server)
    for i, c in enumerate(clients.values()):
        assert set(c.row_ids.tolist()) == set(perm[assignment == i].tolist())


@pytest.mark.parametrize("K", [2, 5])
def test_global_contributions_are_the_blocks_in_global_rows(K):
    """The secure sums' batched path (one stacked product per sender) gives every B_ik
    exactly as the per-receiver blocks do, in canonical form."""
    d, _, views = make_world(160, K, seed=11)
    clients, _, _, _ = federate(views, relay=False)
    for c in clients.values():
        c.init_abar(2, [0.0, 1.0], None, 30, K)
        blocks, batched = c.contributions(2), c.global_contributions(2)
        assert list(batched) == list(blocks) == c.neighbours
        for pid, block in blocks.items():
            want = block.in_global_rows(d.num_nodes)
            got = batched[pid]
            assert got.has_canonical_format and got.shape == (d.num_nodes, d.num_nodes)
            flat = got.row * d.num_nodes + got.col
            assert np.all(np.diff(flat) > 0) and np.all(got.data != 0)
            np.testing.assert_array_equal(flat, want.row * d.num_nodes + want.col)
            np.testing.assert_array_equal(got.data, want.data)


def test_receiver_rejects_malformed_or_foreign_blocks():
    d, assignment, views = make_world(120, 3, seed=9)
    clients, channel, ex, server = federate(views, relay=False)
    for c in clients.values():
        c.init_abar(2, [0.0, 1.0], None, 30, 3)
    a, b = "client-0", "client-1"
    good = clients[b].send_blocks(2)
    to_a = [e for e in good if e.receiver == a]
    assert to_a
    # a block whose rows are not the receiver's nodes shared with the sender
    bad = Payload(dict(to_a[0].payload.fields), dict(to_a[0].payload.meta))
    other_rows = np.setdiff1d(clients[b].row_ids, [])[: bad.array("rows").size]
    bad.fields["rows"] = np.sort(other_rows).astype(np.int64)
    with pytest.raises(ValueError):
        clients[a].receive_blocks(2, [Envelope(b, a, BLOCK_TAG, bad)])
    # malformed CSR
    broken = Payload(dict(to_a[0].payload.fields), dict(to_a[0].payload.meta))
    broken.fields["cols"] = broken.array("cols") + d.num_nodes
    with pytest.raises(WireFormatError):
        SparseRows.from_payload(broken, d.num_nodes)
    # a missing neighbour's block
    others = [e for e in clients["client-2"].send_blocks(2) if e.receiver == a]
    if others:
        with pytest.raises(RuntimeError, match="no block"):
            clients[a].receive_blocks(2, to_a)
    # hops out of order
    with pytest.raises(RuntimeError, match="out of order"):
        clients[a].send_blocks(3)


def test_complete_hop_accepts_an_externally_summed_block():
    """A secure-sum strategy hands the receiver only Σ_k B_ik: same result."""
    d, _, views = make_world(120, 3, seed=10)
    clients, channel, ex, server = federate(views)

    class OracleSum(PlainHopSum):
        """Sums the plain blocks outside the receiver, in the common [n, n] opaque-row
        shape a secure sum would use (stand-in for protocols.secure_sum)."""

        def run_hop(self, hop, ctx):
            sent = ctx.executor.map(ctx.clients, AdjacencyClient.send_blocks, hop, ctx.server_id)
            inbox = ctx.deliver([e for batch in sent for e in batch])
            n = d.num_nodes
            for cid in ctx.clients:
                me = clients[cid]
                support = set(me.boundary_rows().tolist())
                total = sp.csr_matrix((n, n))
                for env in inbox[cid]:
                    blk = SparseRows.from_payload(env.payload, n)
                    assert set(blk.row_ids.tolist()) <= support
                    total = total + blk.in_global_rows(n)
                me.complete_hop_global(hop, sp.csr_array(total))  # the receiver's own step

    beta = [0.5, 0.25, 0.25]
    build_abar(clients, channel, ex, 3, beta=beta, hop_sum=OracleSum(), server_id=server)
    ref = to_opaque(central_abar(d.edge_index, d.num_nodes, 3, beta))
    assert max_err(clients, ref) < 1e-12


def test_build_abar_validates_arguments():
    _, _, views = make_world(60, 2)
    clients, channel, ex, server = federate(views)
    with pytest.raises(ValueError, match="prune"):
        build_abar(clients, channel, ex, 2, prune="global")
    with pytest.raises(ValueError, match="beta"):
        build_abar(clients, channel, ex, 2, beta=[1.0])
    with pytest.raises(ValueError, match="hops"):
        build_abar(clients, channel, ex, 0)


@pytest.mark.parametrize("prune", ["sender", "receiver"])
def test_pruned_build_is_deterministic(prune):
    _, _, views = make_world(150, 3, seed=11)
    a, _, ra = run(views, hops=3, prune=prune, p=2)
    b, _, rb = run(views, hops=3, prune=prune, p=2)
    assert ra.bytes == rb.bytes
    for x, y in zip(a.values(), b.values(), strict=True):
        assert (x.abar != y.abar).nnz == 0
