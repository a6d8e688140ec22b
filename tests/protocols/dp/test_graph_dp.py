"""protocols.dp.graph_dp: EdgeRand and LapGraph (LinkTeller) on sparse adjacency blocks."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import scipy.sparse as sp

from protocols.dp import edge_rand, edge_rand_flip_probability, graph_dp, lap_graph, make_rng


def random_graph(n: int, m: int, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, n, 2 * m), rng.integers(0, n, 2 * m)
    keep = rows < cols
    pairs = np.unique(np.stack([rows[keep], cols[keep]], 1), axis=0)[:m]
    A = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    return (A + A.T).tocsr()


def n_edges(A: sp.spmatrix) -> int:
    return int(sp.triu(A, 1).nnz)


def overlap(A: sp.spmatrix, B: sp.spmatrix) -> int:
    return int(sp.triu(A.multiply(B), 1).nnz)


def assert_valid_symmetric(B: sp.spmatrix, n: int) -> None:
    assert isinstance(B, sp.csr_matrix)
    assert B.shape == (n, n)
    assert (B != B.T).nnz == 0
    assert B.diagonal().sum() == 0
    assert set(np.unique(B.data)) <= {1.0}


A = random_graph(400, 1200)
M = n_edges(A)
PAIRS = 400 * 399 // 2


@pytest.mark.parametrize(
    "mechanism",
    [
        lambda A, s: edge_rand(A, 3.0, rng=s),
        lambda A, s: edge_rand(A, 3.0, preserve_sparsity=True, rng=s),
        lambda A, s: lap_graph(A, 3.0, rng=s),
    ],
)
def test_deterministic_given_a_seed_and_well_formed(mechanism) -> None:
    B1, B2, B3 = mechanism(A, 7), mechanism(A, 7), mechanism(A, 8)
    assert_valid_symmetric(B1, 400)
    assert (B1 != B2).nnz == 0
    assert (B1 != B3).nnz > 0


def test_edge_rand_is_randomised_response_with_flip_probability() -> None:
    eps = 2.0
    p = edge_rand_flip_probability(eps)
    assert p == pytest.approx((2 / (math.exp(eps) + 1)) / 2)
    kept, false = [], []
    for seed in range(5):
        B = edge_rand(A, eps, rng=seed)
        kept.append(overlap(A, B))
        false.append(n_edges(B) - overlap(A, B))
    zeros = PAIRS - M
    # 5 repetitions: binomial means within 5 standard errors
    assert np.mean(kept) == pytest.approx(M * (1 - p), abs=5 * math.sqrt(M * p / 5))
    assert np.mean(false) == pytest.approx(zeros * p, abs=5 * math.sqrt(zeros * p / 5))
    # likelihood ratio P[1|1]/P[1|0] = e^ε
    ratio = (np.mean(kept) / M) / (np.mean(false) / zeros)
    assert ratio == pytest.approx(math.exp(eps), rel=0.1)


def test_sparsity_preserving_edge_rand_keeps_the_expected_edge_count() -> None:
    counts = [
        n_edges(edge_rand(A, 2.0, preserve_sparsity=True, count_fraction=0.1, rng=s))
        for s in range(20)
    ]
    assert np.mean(counts) == pytest.approx(M, rel=0.03)
    dense = n_edges(edge_rand(A, 2.0, rng=0))
    assert dense > 5 * M  # the plain version is dense at this ε (≈ 9·|E| here)
    # more budget, more true edges kept
    weak = overlap(A, edge_rand(A, 1.0, preserve_sparsity=True, rng=1))
    strong = overlap(A, edge_rand(A, 10.0, preserve_sparsity=True, rng=1))
    assert strong > 0.9 * M > weak


def test_lap_graph_keeps_exactly_the_noisy_edge_count() -> None:
    for seed in range(10):
        eps1 = 0.01 * 2.0
        t = round(float(np.clip(M + make_rng(seed).laplace(0.0, 1 / eps1), 0, PAIRS)))
        assert n_edges(lap_graph(A, 2.0, rng=seed)) == t  # T is the first draw of the stream


def test_lap_graph_keeps_about_the_true_edge_count() -> None:
    for seed in range(5):
        B = lap_graph(A, 4.0, count_fraction=0.1, rng=seed)
        assert abs(n_edges(B) - M) < 10 / 0.4  # T = |E| + Lap(1/ε₁), ε₁ = 0.4
    assert overlap(A, lap_graph(A, 12.0, rng=0)) > 0.95 * M
    assert overlap(A, lap_graph(A, 0.5, rng=0)) < 0.1 * M


def _dense_lap_graph(A: sp.spmatrix, eps: float, frac: float, rng) -> sp.csr_matrix:
    """Reference LapGraph on the dense upper triangle (LinkTeller's code, rounded T)."""
    n = A.shape[0]
    iu = np.triu_indices(n, 1)
    vals = A.toarray()[iu] + rng.laplace(0, 1 / (eps * (1 - frac)), size=iu[0].size)
    t = int(round(np.clip(n_edges(A) + rng.laplace(0, 1 / (eps * frac)), 0, iu[0].size)))
    top = np.argsort(-vals)[:t]
    B = sp.coo_matrix((np.ones(t), (iu[0][top], iu[1][top])), shape=(n, n))
    return (B + B.T).tocsr()


def test_lap_graph_sampling_matches_the_dense_reference(monkeypatch) -> None:
    # tiny threshold steps → the threshold-lowering loop runs many times per call
    monkeypatch.setattr(graph_dp, "_SHORTFALL", 0.1)
    monkeypatch.setattr(graph_dp, "_MARGIN_SD", 0.0)
    monkeypatch.setattr(graph_dp, "_MARGIN_ABS", 0.0)
    bands = []
    band = graph_dp._laplace_band
    monkeypatch.setattr(graph_dp, "_laplace_band", lambda *a: bands.append(1) or band(*a))
    small = random_graph(40, 80, seed=3)
    m = n_edges(small)
    eps, frac, reps = 1.5, 0.3, 300
    ours = [overlap(small, lap_graph(small, eps, count_fraction=frac, rng=s)) for s in range(reps)]
    assert len(bands) > 5 * reps
    rng = np.random.default_rng(12345)
    ref = [overlap(small, _dense_lap_graph(small, eps, frac, rng)) for _ in range(reps)]
    se = math.sqrt(np.var(ours) / reps + np.var(ref) / reps)
    assert abs(np.mean(ours) - np.mean(ref)) < 4 * se
    assert 0.2 * m < np.mean(ours) < 0.9 * m  # a regime where the test has power


def test_rectangular_cross_client_block() -> None:
    rng = np.random.default_rng(4)
    block = sp.random(300, 500, density=0.01, random_state=rng, format="csr")
    m = block.nnz
    out = lap_graph(block, 5.0, symmetric=False, count_fraction=0.2, rng=0)
    assert out.shape == (300, 500)
    assert abs(out.nnz - m) < 20
    er = edge_rand(block, 2.0, symmetric=False, preserve_sparsity=True, count_fraction=0.2, rng=0)
    assert er.shape == (300, 500)
    counts = [
        edge_rand(
            block, 2.0, symmetric=False, preserve_sparsity=True, count_fraction=0.2, rng=s
        ).nnz
        for s in range(20)
    ]
    assert np.mean(counts) == pytest.approx(m, rel=0.05)
    with pytest.raises(ValueError, match="square"):
        edge_rand(block, 1.0, symmetric=True)


def test_large_sparse_block_is_never_densified() -> None:
    n = 200_000
    big = random_graph(n, 100_000, seed=5)
    start = time.perf_counter()
    out = lap_graph(big, 2.0, count_fraction=0.1, rng=0)
    er = edge_rand(big, 2.0, preserve_sparsity=True, count_fraction=0.1, rng=0)
    assert time.perf_counter() - start < 10  # ~2·10^10 pairs: impossible densely
    assert abs(n_edges(out) - n_edges(big)) < 200
    assert n_edges(er) == pytest.approx(n_edges(big), rel=0.05)
    with pytest.raises(ValueError, match="max_nnz"):
        edge_rand(big, 1.0, rng=0)  # plain EdgeRand would emit ~5·10^9 edges


def test_input_is_binarised_and_self_loops_dropped() -> None:
    W = A.copy() * 3.5
    W.setdiag(1.0)
    np.testing.assert_array_equal(
        lap_graph(W, 3.0, rng=2).toarray(), lap_graph(A, 3.0, rng=2).toarray()
    )
    upper = sp.triu(A, 1)  # one direction only: symmetric mode treats it as undirected
    assert (edge_rand(upper, 3.0, rng=4) != edge_rand(A, 3.0, rng=4)).nnz == 0


def test_invalid_budgets_raise() -> None:
    with pytest.raises(ValueError):
        edge_rand(A, 0.0)
    with pytest.raises(ValueError):
        lap_graph(A, 1.0, count_fraction=1.0)


@pytest.mark.parametrize("epsilon", [40.0, 200.0])
def test_edge_rand_with_a_huge_budget_returns_the_graph(epsilon: float) -> None:
    """Flip probabilities far below 2^-63 (geometric gaps overflowing int64) keep the graph."""
    for preserve in (False, True):
        out = edge_rand(A, epsilon, preserve_sparsity=preserve, rng=1)
        assert_valid_symmetric(out, 400)
        assert overlap(out, A) == n_edges(out) == M
