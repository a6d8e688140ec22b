"""The edge server's potential links, AE + assessor and the repaired-subgraph message."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.wire import Payload
from securefgl.algorithms.common.edge.model import Factored, Features, SageNet, propagation
from securefgl.algorithms.spreadfgl.imputation import Imputer, potential_links
from securefgl.algorithms.spreadfgl.patch import build_patch, patch_edges, read_patch
from securefgl.algorithms.spreadfgl.settings import SpreadFGLSettings


def _brute_top_k(h, owner, k, scope):
    sim = h @ h.T
    np.fill_diagonal(sim, -np.inf)
    same = owner[:, None] == owner[None, :]
    if scope != "all":
        sim[same if scope == "cross_client" else ~same] = -np.inf
    return np.argsort(-sim, axis=1, kind="stable")[:, :k]


@pytest.mark.parametrize("scope", ["all", "cross_client", "own_client"])
def test_potential_links_are_the_top_k_of_hh_t_in_chunks(scope):
    rng = np.random.default_rng(0)
    h = rng.dirichlet(np.ones(4), size=37).astype(np.float32)
    owner = rng.integers(0, 3, 37)
    got = potential_links(h, owner, 3, scope=scope, chunk=5)
    want = _brute_top_k(h, owner, 3, scope)
    sim = h @ h.T
    for u in range(37):  # same scores (ties may order differently)
        np.testing.assert_allclose(np.sort(sim[u, got[u]]), np.sort(sim[u, want[u]]), rtol=1e-5)
        assert u not in got[u]
        if scope != "all":
            assert ((owner[got[u]] == owner[u]) == (scope == "own_client")).all()


@given(seed=st.integers(0, 2**32 - 1), ties=st.booleans())
@settings(max_examples=25, deadline=None)
def test_random_tie_breaking_never_reorders_different_scores(seed, ties):
    rng = np.random.default_rng(seed)
    h = rng.dirichlet(np.ones(4), size=23).astype(np.float32)
    if ties:  # one-hot rows: every same-class pair ties
        h = np.eye(4, dtype=np.float32)[h.argmax(1)]
    got = potential_links(h, np.zeros(23), 5, chunk=7, rng=np.random.default_rng(seed + 1))
    sim = (h @ h.T).astype(np.float64)
    np.fill_diagonal(sim, -np.inf)
    kth = -np.sort(-sim, axis=1)[:, 4]
    for u in range(23):  # the k best scores, best first
        s = sim[u, got[u]]
        assert (np.diff(s) <= 0).all() and s.min() >= kth[u]


def test_ties_are_broken_at_random_not_by_index():
    """Randomised response releases one-hot rows: every same-class pair ties, and the links
    must spread over the class instead of all going to the same few nodes."""
    h = np.eye(3, dtype=np.float32)[np.arange(300) % 3]
    at_random = potential_links(h, np.zeros(300), 5, rng=np.random.default_rng(0))
    assert np.unique(at_random).size > 250
    assert np.bincount(at_random.ravel()).max() <= 25  # mean in-degree 5; hubs would be ~100
    assert (h[at_random].argmax(2) == h.argmax(1)[:, None]).all()  # still the same class


def test_potential_links_refuse_an_unknown_scope():
    with pytest.raises(ValueError, match="scope"):
        potential_links(np.eye(3, dtype=np.float32), np.zeros(3), 2, scope="cross")


def test_potential_links_pad_when_there_are_too_few_candidates():
    h = np.eye(3, dtype=np.float32)
    out = potential_links(h, np.array([0, 0, 1]), 4, scope="cross_client")
    assert (out[0] == [2, -1, -1, -1]).all() and (out[2][:2] >= 0).all()


def test_the_autoencoder_learns_to_reconstruct_h():
    rng = np.random.default_rng(1)
    h = rng.dirichlet(np.ones(3) * 0.3, size=60).astype(np.float32)
    st = SpreadFGLSettings(assessor=False, ae_iterations=60, ae_lr=0.01)
    imp = Imputer(3, 12, st, seed=0)
    before = imp._ae_loss(
        torch.as_tensor(h),
        torch.ones(60, 3),
        imp._decode(imp._code(imp._noise(60, torch.arange(60)))),
    ).item()
    after = imp.fit(h)["ae"]
    assert after < 0.5 * before
    gen = imp.generate(60, np.array([0, 5]))
    assert isinstance(gen, Factored) and gen.dense().shape == (2, 12)


def test_adversarial_training_runs_with_both_gan_losses():
    h = np.random.default_rng(2).dirichlet(np.ones(4), size=30).astype(np.float32)
    for loss in ("bce", "paper"):
        st = SpreadFGLSettings(gan_loss=loss, ae_iterations=2, feature_act="sigmoid")
        out = Imputer(4, 6, st, seed=0).fit(h)
        assert np.isfinite(out["ae"]) and np.isfinite(out["assessor"])
        dense = Imputer(4, 6, st, seed=0).generate(30, np.arange(3))
        assert isinstance(dense, np.ndarray) and (dense >= 0).all() and (dense <= 1).all()


def test_factored_features_equal_the_dense_rows_in_the_model():
    rng = np.random.default_rng(3)
    own = (rng.random((5, 6)) < 0.4).astype(np.float32)
    fac = Factored(
        rng.normal(size=(4, 2)).astype(np.float32),
        rng.normal(size=(2, 6)).astype(np.float32),
        rng.normal(size=6).astype(np.float32),
    )
    edges = np.array([[0, 1, 5, 0], [1, 0, 0, 5]])
    prop = propagation(edges, 9, "gcn")
    torch.manual_seed(0)
    net = SageNet([6, 4, 3], "gcn", dropout=0.0).eval()
    a = net(Features(own, [fac]), prop)
    b = net(Features(own, [fac.dense()]), prop)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_patch_message_dedups_and_links_local_neighbours_by_position():
    owner = np.array([0, 0, 1, 1, 1])
    position = np.array([0, 1, 0, 1, 2])
    cand = np.array([[1, 2], [2, 3], [0, 1], [2, 4], [3, -1]])

    def gen(rows):
        return np.asarray(rows, np.float32)[:, None] * np.ones((1, 3), np.float32)

    deduped = build_patch(0, cand, owner, position, gen, 0, dedup=True, local_edges=True)
    links, block = read_patch(Payload.from_bytes(deduped.payload.to_bytes()))
    # client 0's rows 0, 1: row 0 -> own position 1 (real edge) and server row 2;
    # row 1 -> server rows 2, 3: two distinct generated rows
    assert links.tolist() == [[-3, 0], [0, 1]]
    np.testing.assert_array_equal(block[:, 0], [2, 3])
    assert deduped.owners.tolist() == [1, 1] and deduped.positions.tolist() == [0, 1]
    plain = build_patch(0, cand, owner, position, gen, 0, dedup=False, local_edges=False)
    links, block = read_patch(plain.payload)
    assert links.tolist() == [[0, 1], [2, 3]] and len(block) == 4
    edges = patch_edges(np.array([4, 7]), np.array([[-3, 0], [0, -1]]), offset=10)
    pairs = set(map(tuple, edges.T.tolist()))
    assert pairs == {(4, 7), (7, 4), (4, 10), (10, 4), (7, 10), (10, 7)}
