"""Every secure-sum mode equals the plain sum (dense, sparse, local-only, repeated rounds)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from protocols.base import ProtocolError
from protocols.secure_sum import (
    Support,
    run_secure_sums,
)
from protocols.secure_sum.parties import TAG_CONTRIBUTION
from tests.protocols.secure_sum.helpers import (
    MODES,
    Recorder,
    as_dense,
    client_ids,
    make_parties,
    random_block,
    run_mode,
    simple_jobs,
    tolerance_for,
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(n=st.integers(2, 8), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_every_mode_equals_the_plain_sum(n, seed, data) -> None:
    ids = client_ids(n)
    rng = np.random.default_rng(seed)
    receivers = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=n, unique=True))
    jobs, supports = {}, {}
    for r in receivers:
        others = [c for c in ids if c != r]
        senders = data.draw(st.lists(st.sampled_from(others), min_size=1, unique=True))
        members = senders + ([r] if data.draw(st.booleans()) else [])  # r: local term
        shape = (data.draw(st.integers(1, 6)), data.draw(st.integers(1, 9)))
        kind = data.draw(st.sampled_from(["dense", "sparse", "mixed"]))
        jobs[r] = {
            k: random_block(rng, shape, kind == "sparse" or (kind == "mixed" and i % 2 == 0))
            for i, k in enumerate(members)
        }
        where = data.draw(st.sampled_from(["dense", "rows", "union"]))
        event(f"{kind} blocks, {where} support")
        if where == "rows":
            rows = np.flatnonzero(sum(np.abs(as_dense(b)).sum(axis=1) for b in jobs[r].values()))
            supports[r] = Support.product(shape, rows=rows)
        elif where == "union":
            supports[r] = Support.union_of(jobs[r].values())
    for mode in MODES:
        # one-sender jobs included (correctness, not the min_senders policy): allowed
        results = run_mode(
            mode, n, jobs, supports=supports, round_idx=seed % 1000, options={"min_senders": 1}
        )
        assert set(results) == set(receivers)
        for r, blocks in jobs.items():
            res = results[r]
            expected = sum(as_dense(b) for b in blocks.values())
            assert res.receiver == r and res.includes_local == (r in blocks)
            assert res.senders == tuple(k for k in blocks if k != r)
            assert sp.issparse(res.total) == all(sp.issparse(b) for b in blocks.values())
            np.testing.assert_allclose(
                as_dense(res.total), expected, rtol=0, atol=tolerance_for(mode, len(res.senders))
            )


def test_ckks_error_with_20_senders_values_in_unit_interval() -> None:
    n, d = 21, 5000  # 3 ciphertexts per block
    rng = np.random.default_rng(7)
    jobs = {"c00": {k: rng.uniform(0, 1, (1, d)) for k in client_ids(n)[1:]}}
    expected = sum(jobs["c00"].values())
    total = run_mode("ckks", n, jobs)["c00"].total
    err = float(np.abs(total - expected).max())
    assert err < 2e-7  # measured ~3e-8 (scale 2^40, rounded to 2^-24)


def test_sparse_blocks_give_csr_and_zeros_stay_exact() -> None:
    jobs = simple_jobs(4, shape=(20, 30), seed=3, sparse=True)
    for mode in MODES:
        for r, res in run_mode(mode, 4, jobs).items():
            assert isinstance(res.total, sp.csr_array)
            expected = sum(as_dense(b) for b in jobs[r].values())
            # entries that are zero in every block come back as exact zeros (no CKKS noise)
            assert not np.any(as_dense(res.total)[expected == 0]), mode


def test_local_only_job_sends_nothing() -> None:
    local = np.arange(6.0).reshape(2, 3)
    for mode in MODES:
        rec = Recorder()
        protocol, parties = make_parties(mode, 3)
        res = run_secure_sums(protocol, parties, {"c01": {"c01": local}}, rec, round_idx=1)
        assert rec.log == []
        np.testing.assert_array_equal(res["c01"].total, local)
        assert res["c01"].senders == () and res["c01"].includes_local


def test_several_rounds_reuse_setup_but_not_round_idx() -> None:
    for mode in MODES:
        protocol, parties = make_parties(mode, 3)
        for r in range(2):
            jobs = simple_jobs(3, seed=r)
            out = run_secure_sums(protocol, parties, jobs, round_idx=r)
            for rec, res in out.items():
                expected = sum(jobs[rec].values())
                np.testing.assert_allclose(res.total, expected, atol=tolerance_for(mode, 2))
        with pytest.raises(ProtocolError, match="already used"):
            run_secure_sums(protocol, parties, simple_jobs(3), round_idx=1)


# ------------------------------------------------------------------------------ what leaks


def test_secure_sum_senders_send_one_message_per_round() -> None:
    n = 5
    rec = Recorder()
    run_mode("masked", n, simple_jobs(n), rec)
    sent = [e.sender for e in rec.log if e.tag == TAG_CONTRIBUTION]
    assert sorted(sent) == client_ids(n)  # one bundle each, not one per receiver
    assert len(rec.to("server", TAG_CONTRIBUTION)) == n * (n - 1)  # every part inside
