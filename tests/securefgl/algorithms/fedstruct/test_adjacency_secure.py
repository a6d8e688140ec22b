"""FedStruct's federated Ā with secure hop sums (masked / CKKS) over the channel."""

import logging
import math
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from protocols.base import ProtocolError
from protocols.bundles import unbundle
from protocols.fixedpoint import FixedPointOverflowError
from protocols.secure_sum import Support
from protocols.secure_sum.masked import MaskedSum
from protocols.secure_sum.parties import TAG_CONTRIBUTION, TAG_DELIVERY, TAG_ROUTED_REQUEST
from securefgl.algorithms.fedstruct.abar_build import PlainHopSum, build_abar
from securefgl.algorithms.fedstruct.abar_central import central_abar
from securefgl.algorithms.fedstruct.abar_client import BLOCK_TAG, AdjacencyClient, SparseRows
from securefgl.algorithms.fedstruct.abar_secure import (
    PATTERN_TAG,
    UNION_TAG,
    CKKSHopSum,
    MaskedHopSum,
    SecureHopSum,
    hop_sum_for,
)
from tests.securefgl.algorithms.fedstruct.test_adjacency import (
    CountingChannel,
    federate,
    make_world,
    max_err,
    reachable,
    run,
    to_opaque,
)

MODES = ["masked", "ckks"]
# masked: fixed point in Z_2^32, 2^-(f+1) per summand with f = 26..29 for K <= 20 (~1e-8
# measured). CKKS: public-key encryption noise
# (~2e-8 per sum) plus rounding to 2^-24 (~6e-8), propagated through row-stochastic hops
# (errors add up at most linearly in L_s): ~2e-8 measured here; 1e-6 holds with margin.
TOL = {"masked": 1e-6, "ckks": 1e-6}


def secure_build(views, mode, support="rows", hops=3, channel=None, hop_sum=None, **kw):
    clients, plain_channel, ex, server = federate(views)
    channel = channel if channel is not None else plain_channel
    hop_sum = hop_sum or hop_sum_for(mode, "test-exp", support=support)
    report = build_abar(clients, channel, ex, hops, hop_sum=hop_sum, server_id=server, **kw)
    return clients, channel, report, ex


# ---------------------------------------------------------------- correctness


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("support", ["rows", "union"])
@pytest.mark.parametrize("K", [2, 3, 4])
@pytest.mark.parametrize("hops", [1, 2, 3])
def test_unpruned_secure_rows_equal_central(mode, support, K, hops):
    d, _, views = make_world(120, K, seed=K * 10 + hops)
    beta = np.random.default_rng(hops).uniform(0.1, 1.0, size=hops).tolist()
    # correctness with K = 2 (every client has one neighbouring client): allow one sender
    hop_sum = hop_sum_for(mode, "test-exp", support=support, min_senders=1)
    clients, channel, report, _ = secure_build(views, mode, hops=hops, hop_sum=hop_sum, beta=beta)
    ref = to_opaque(central_abar(d.edge_index, d.num_nodes, hops, beta))
    err = max_err(clients, ref)
    assert err < TOL[mode], err
    assert len(report.hops) == hops
    assert report.bytes == channel.transcript.total_bytes()
    assert (report.bytes > 0) == (hops > 1)  # L_s = 1: no exchange, no key setup
    for c in clients.values():  # no noise entries outside the exact support
        rows = ref[c.row_ids]
        assert ((c.abar != 0).astype(int) - (rows != 0).astype(int)).nnz == 0


def test_masked_is_exact_to_fixed_point_resolution():
    """A tighter check than the shared tolerance: masked errors are fixed-point rounding."""
    d, _, views = make_world(150, 4, seed=3)
    clients, *_ = secure_build(views, "masked", hops=4)
    assert max_err(clients, to_opaque(central_abar(d.edge_index, d.num_nodes, 4))) < 1e-8


@pytest.mark.parametrize("hops", [3, 6])
def test_masked_z32_ring_is_within_its_error_bound(hops):
    """Z_2^32 with the public degree bound 2047: steps of 2^-20, at most 2^-21 per hop."""
    d, _, views = make_world(150, 4, seed=3)
    hop_sum = MaskedHopSum("x", word_bits=32)
    assert hop_sum.protocol.codec_for(4).frac_bits == 20
    clients, *_ = secure_build(views, "masked", hops=hops, hop_sum=hop_sum)
    err = max_err(clients, to_opaque(central_abar(d.edge_index, d.num_nodes, hops)))
    assert 0 < err <= (hops - 1) * 2.0**-21
    tight = MaskedHopSum("y", word_bits=32, degree_bound=255)  # 2^-23 steps
    clients, *_ = secure_build(views, "masked", hops=hops, hop_sum=tight)
    assert max_err(clients, to_opaque(central_abar(d.edge_index, d.num_nodes, hops))) < err


def test_masked_z32_degree_bound_is_checked_before_any_value_is_sent():
    _, _, views = make_world(150, 4, seed=3)
    clients, channel, _, _ = federate(views)
    peak = max(c.boundary_degree_peak() for c in clients.values())
    low = MaskedHopSum("x", word_bits=32, degree_bound=int(peak) - 1)
    with pytest.raises(FixedPointOverflowError, match="exceeds the masked ring's public degree"):
        secure_build(views, "masked", hops=3, hop_sum=low, channel=channel)
    assert not [e for e in channel.transcript.entries if e.tag == TAG_CONTRIBUTION]
    with pytest.raises(ValueError, match="degree_bound"):
        MaskedHopSum("x", word_bits=32, degree_bound=0)
    with pytest.raises(ValueError, match="follows from degree_bound"):
        MaskedHopSum("x", word_bits=32, frac_bits=24)


def test_unsafe_noise_would_be_caught():
    """The comparison can fail: a hop sum that perturbs one entry breaks the bound."""
    d, _, views = make_world(120, 3, seed=1)

    class Off(MaskedHopSum):
        def run_hop(self, hop, ctx):
            super().run_hop(hop, ctx)
            c = ctx.executor.parties[ctx.clients[0]]
            c.abar = c.abar + sp.csr_matrix(([1e-5], ([0], [0])), shape=c.abar.shape)

    clients, *_ = secure_build(views, "masked", hops=2, hop_sum=Off("x"))
    assert max_err(clients, to_opaque(central_abar(d.edge_index, d.num_nodes, 2))) > 1e-6


# ---------------------------------------------------------------- transcript inspection


class Spy(AdjacencyClient):
    """Records every B_ik this client computes (simulator-side ground truth)."""

    blocks: dict = {}

    def contributions(self, hop):
        out = super().contributions(hop)
        for receiver, block in out.items():
            Spy.blocks[(self.party_id, receiver, hop)] = block
        return out

    def global_contributions(self, hop):  # the secure sums' path
        out = super().global_contributions(hop)
        for receiver, block in out.items():
            rows = np.unique(block.row)
            block_rows = SparseRows(rows, sp.csr_matrix(block)[rows])
            Spy.blocks[(self.party_id, receiver, hop)] = block_rows
        return out


def spy_build(views, hop_sum, hops=3, **kw):
    Spy.blocks = {}
    clients, channel, ex, server = federate(views)
    spies = {pid: Spy(v) for pid, v in zip(clients, views, strict=True)}
    ex.parties.update(spies)
    report = build_abar(spies, channel, ex, hops, hop_sum=hop_sum, server_id=server, **kw)
    return spies, channel, report


def leaks(payload, block: SparseRows, codec) -> bool:
    """Does ``payload`` carry ``block``'s values: as floats (raw or inside a byte blob) or
    as its fixed-point words (a masked vector without masks)?"""
    vals = np.unique(block.matrix.data[block.matrix.data != 0])
    if vals.size == 0:
        return False
    words = codec.encode(vals)
    for value in payload.fields.values():
        if isinstance(value, bytes):
            probes = vals[:20]
            if sum(p.tobytes() in value for p in probes) >= max(1, probes.size // 2):
                return True
        elif value.dtype.kind == "f":
            if np.isin(vals, value).mean() > 0.5:
                return True
        elif (
            value.dtype.itemsize == words.itemsize
            and np.isin(words, value.view(words.dtype)).mean() > 0.5
        ):
            return True
    return False


def individual_blocks_seen(channel, codec):
    found = set()
    for e in channel.transcript.entries:
        payload = e.payload()
        for (k, i, hop), block in Spy.blocks.items():
            if e.receiver in (i, "server") and leaks(payload, block, codec):
                found.add((e.receiver, k, i, hop))
    return found


def test_detector_fires_on_the_plain_scheme():
    """Baseline: in plain mode the receiver and the relay see every individual B_ik."""
    _, _, views = make_world(140, 3, seed=3)
    _, channel, _ = spy_build(views, PlainHopSum())
    codec = MaskedSum("x").codec_for(3)
    found = individual_blocks_seen(channel, codec)
    nonempty = {key for key, b in Spy.blocks.items() if b.matrix.nnz}
    assert nonempty
    assert {(i, k, i, h) for k, i, h in nonempty} <= found
    assert {("server", k, i, h) for k, i, h in nonempty} <= found


VARIANTS = {"masked32": {"word_bits": 32}, "masked-rx": {"pair_masks": False}}


@pytest.mark.parametrize("mode", [*MODES, *VARIANTS])
@pytest.mark.parametrize("support", ["rows", "union"])
def test_no_individual_block_reaches_receiver_or_server(mode, support):
    _, assignment, views = make_world(140, 3, seed=3)
    hops = 3
    base = "ckks" if mode == "ckks" else "masked"
    hop_sum = hop_sum_for(base, "test-exp", support=support, **VARIANTS.get(mode, {}))
    spies, channel, report = spy_build(views, hop_sum, hops)
    assert any(b.matrix.nnz for b in Spy.blocks.values())
    codec = (MaskedSum("x") if mode == "ckks" else hop_sum.protocol).codec_for(3)
    assert individual_blocks_seen(channel, codec) == set()
    entries = channel.transcript.entries
    assert not [e for e in entries if e.tag == BLOCK_TAG]
    for e in entries:  # no plaintext floats anywhere
        for value in e.payload().fields.values():
            assert isinstance(value, bytes) or value.dtype.kind != "f", (e.tag, e.receiver)
    # exactly one aggregated message per receiver and hop, from the server, over its senders
    rounds = [report.hops[h - 1].notes["round_idx"] for h in range(2, hops + 1)]
    assert len(set(rounds)) == hops - 1
    for pid, c in spies.items():
        got = Counter(
            e.payload().meta["round"]
            for e in entries
            if e.receiver == pid and e.tag == TAG_DELIVERY
        )
        assert got == (dict.fromkeys(rounds, 1) if c.neighbours else {})
        for e in entries:
            if e.receiver == pid and e.tag == TAG_DELIVERY:
                assert e.sender == "server"
                assert e.payload().meta["senders"] == c.neighbours
    # the server never receives a delivery-sized plaintext: contributions are masked words
    # or ciphertexts only
    for e in entries:
        if e.tag == TAG_CONTRIBUTION:
            for part in unbundle(e.payload(), "test").values():
                assert set(part.fields) == ({"ct", "ct_len"} if mode == "ckks" else {"y"})
                if mode != "ckks":
                    word = np.uint32 if mode == "masked32" else np.uint64
                    assert part.fields["y"].dtype == word


def test_union_support_leaks_exactly_the_individual_patterns_to_the_server():
    """What ``support="union"`` reveals: the server sees supp(B_ik) (no values) for each
    sender; the receiver and its senders see the union U_i = supp(Σ_k B_ik)."""
    _, _, views = make_world(140, 3, seed=3)
    hops = 3
    spies, channel, _ = spy_build(views, MaskedHopSum("x", "union"), hops)
    n = views[0].num_global_nodes
    entries = channel.transcript.entries
    patterns = {
        (e.sender, to, e.payload().meta["hop"]): Support.from_fields((n, n), part).index
        for e in entries
        if e.tag == PATTERN_TAG
        for to, part in unbundle(e.payload(), "test").items()
    }
    assert all(e.receiver == "server" for e in entries if e.tag == PATTERN_TAG)
    assert set(patterns) == set(Spy.blocks)
    for key, block in Spy.blocks.items():
        coo = block.in_global_rows(n).tocoo()
        np.testing.assert_array_equal(patterns[key], np.sort(coo.row * n + coo.col))
    unions = [e for e in entries if e.tag == UNION_TAG]
    assert {e.receiver for e in unions} == {pid for pid, c in spies.items() if c.neighbours}
    for e in unions:
        hop = e.payload().meta["hop"]
        expected = np.unique(
            np.concatenate([patterns[k, e.receiver, hop] for k in spies[e.receiver].neighbours])
        )
        assert np.array_equal(Support.from_fields((n, n), e.payload()).index, expected)


def test_rows_support_publishes_only_the_boundary_rows():
    _, _, views = make_world(140, 3, seed=3)
    spies, channel, _ = spy_build(views, MaskedHopSum("x", "rows"), 3)
    routed = [e for e in channel.transcript.entries if e.tag == TAG_ROUTED_REQUEST]
    assert routed and not [e for e in channel.transcript.entries if e.tag == PATTERN_TAG]
    n = views[0].num_global_nodes
    for e in routed:
        p = e.payload()
        receiver = spies[p.meta["receiver"]]
        np.testing.assert_array_equal(p.array("support_rows"), receiver.boundary_rows())
        np.testing.assert_array_equal(p.array("support_cols"), np.arange(n))


def test_isolation_each_party_holds_only_its_own_state():
    d, _, views = make_world(150, 3, seed=4)
    clients, channel, report, ex = secure_build(views, "masked", hops=3)
    n = d.num_nodes
    for pid, c in clients.items():
        objs = list(reachable(c))
        assert not [o for o in objs if isinstance(o, AdjacencyClient) and o is not c], pid
        own = {id(c._incidences().matrix)}  # its own external edges
        mats = [o for o in objs if sp.issparse(o) and id(o) not in own]
        assert all(m.shape[0] in (c.num_nodes, n) for m in mats)
        # an [n, n] matrix may only be the client's own received sum (its rows only)
        for m in mats:
            if m.shape[0] == n and m.nnz:
                assert set(sp.coo_matrix(m).row.tolist()) <= set(c.row_ids.tolist())
    server = ex.parties["server"]
    held = list(reachable(server))
    assert not [o for o in held if sp.issparse(o)]
    assert not [o for o in held if isinstance(o, np.ndarray) and o.dtype.kind == "f"]


# ---------------------------------------------------------------- pruning


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("support", ["rows", "union"])
def test_receiver_pruning_with_secure_sums(mode, support):
    d, _, views = make_world(200, 4, seed=5)
    p = 3
    # one exchanged hop: the pruned sums equal plain's (ties at the cut hold equal values)
    plain, _, _ = run(views, hops=2, prune="receiver", p=p)
    sec, _, rep2, _ = secure_build(views, mode, support, hops=2, prune="receiver", p=p)
    for a, b in zip(plain.values(), sec.values(), strict=True):
        assert a.abar.nnz == b.abar.nnz <= math.ceil(p * a.num_nodes)
        np.testing.assert_allclose(np.sort(a.abar.data), np.sort(b.abar.data), atol=TOL[mode])
    # three hops: budget and "pruning only removes mass" against the exact Ā
    exact = to_opaque(central_abar(d.edge_index, d.num_nodes, 3))
    sec3, ch3, rep3, _ = secure_build(views, mode, support, hops=3, prune="receiver", p=p)
    for c in sec3.values():
        assert 0 < c.abar.nnz <= math.ceil(p * c.num_nodes)
        assert (c.abar - exact[c.row_ids]).max() <= TOL[mode]
    assert rep3.bytes == ch3.transcript.total_bytes() > rep2.bytes
    if support == "union":  # pruning shrinks what a union-support sum encodes
        full = secure_build(views, mode, support, hops=3)[2]
        assert rep3.bytes < full.bytes
    # p = ∞: exact
    huge, *_ = secure_build(views, mode, support, hops=3, prune="receiver", p=1e6)
    assert max_err(huge, exact) < TOL[mode]


@pytest.mark.parametrize("support", ["rows", "union"])
def test_sender_pruning_is_allowed(support):
    """Senders prune before encoding; with one exchanged hop the sum equals plain's."""
    _, _, views = make_world(200, 4, seed=6)
    plain, _, _ = run(views, hops=2, prune="sender", p=2)
    sec, *_ = secure_build(views, "masked", support, hops=2, prune="sender", p=2)
    for a, b in zip(plain.values(), sec.values(), strict=True):
        assert abs(a.abar - b.abar).max() < 1e-8


# ---------------------------------------------------------------- bytes, rounds, warnings


@pytest.mark.parametrize("mode", MODES)
def test_bytes_are_counted(mode):
    _, _, views = make_world(150, 4)
    channel = CountingChannel()
    clients, channel, report, _ = secure_build(views, mode, hops=3, channel=channel)
    assert sum(channel.sizes) == channel.transcript.total_bytes() == report.bytes > 0
    assert len(channel.sizes) == report.messages
    h2, h3 = report.hops[1], report.hops[2]
    assert h2.notes["setup_bytes"] > 0 and h3.notes["setup_bytes"] == 0  # keys once per build
    assert h2.bytes > h2.notes["setup_bytes"] and h3.bytes > 0
    assert all("server" in (e.sender, e.receiver) for e in channel.transcript.entries)


def test_single_neighbouring_client_is_warned_and_counted(caplog):
    d, _, views = make_world(120, 2, seed=2)
    allow = MaskedHopSum("x", min_senders=1)  # explicitly allowed: then warned and counted
    with caplog.at_level(logging.WARNING, logger="securefgl.algorithms.fedstruct.abar_secure"):
        clients, _, report, _ = secure_build(views, "masked", hops=3, hop_sum=allow)
    assert max_err(clients, to_opaque(central_abar(d.edge_index, d.num_nodes, 3))) < 1e-6
    assert [h.notes["single_sender_receivers"] for h in report.hops[1:]] == [2, 2]
    assert "single neighbouring client" in caplog.text
    _, _, views4 = make_world(150, 4, seed=2)
    report4 = secure_build(views4, "masked", hops=3)[2]
    assert [h.notes["single_sender_receivers"] for h in report4.hops[1:]] == [0, 0]


def test_fresh_round_and_keys_per_hop_and_build():
    _, _, views = make_world(120, 3, seed=7)
    hop_sum = MaskedHopSum("x")
    r1 = secure_build(views, "masked", hops=3, hop_sum=hop_sum)[2]
    r2 = secure_build(views, "masked", hops=3, hop_sum=hop_sum)[2]
    rounds = [h.notes["round_idx"] for r in (r1, r2) for h in r.hops[1:]]
    assert len(set(rounds)) == len(rounds) == 4
    assert r1.hops[1].notes["setup_bytes"] > 0 and r2.hops[1].notes["setup_bytes"] > 0


@pytest.mark.parametrize("mode", MODES)
def test_min_senders_two_refuses_single_sender_sums(mode):
    _, _, views = make_world(120, 2, seed=2)
    clients, channel, _, _ = federate(views)
    assert hop_sum_for(mode, "x").protocol.min_senders == 2  # the default
    with pytest.raises(ProtocolError, match=r"receiver 'client-\d'.*min_senders=2"):
        secure_build(views, mode, hops=2, channel=channel)
    assert not [e for e in channel.transcript.entries if e.tag == TAG_CONTRIBUTION]


def test_factory_and_validation():
    assert isinstance(hop_sum_for("plain"), PlainHopSum)
    m = hop_sum_for("masked", "exp", support="union", frac_bits=24)
    assert isinstance(m, MaskedHopSum) and m.support == "union" and m.protocol.frac_bits == 24
    c = hop_sum_for("ckks")
    assert isinstance(c, CKKSHopSum) and c.sum_mode == "ckks" and c.noise_floor == 2.0**-24
    assert m.noise_floor == 0.0
    with pytest.raises(ValueError, match="sum_mode must be one of"):
        hop_sum_for("secagg")
    with pytest.raises(ValueError, match="support"):
        hop_sum_for("masked", support="dense")
    with pytest.raises(TypeError):
        SecureHopSum("masked")  # type: ignore[arg-type]
    _, _, views = make_world(80, 2)
    clients, channel, ex, _ = federate(views, relay=False)
    with pytest.raises(ValueError, match="server"):
        build_abar(clients, channel, ex, 2, hop_sum=MaskedHopSum("x"), server_id=None)
