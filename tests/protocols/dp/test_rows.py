"""Row-level mechanisms for released matrices (SpreadFGL's H uploads)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from protocols.dp.accounting import PrivacyAccountant, PureDPAccountant
from protocols.dp.rows import RandomizedResponse, RowGaussian, clip_rows


def test_clip_rows_bounds_every_row_and_keeps_short_ones():
    x = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    out = clip_rows(x, 1.0)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [1.0, 0.5, 0.0])
    np.testing.assert_allclose(out[1], x[1])
    with pytest.raises(ValueError):
        clip_rows(np.array([[np.nan, 1.0]]), 1.0)


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 8), st.integers(1, 30)),
              elements=st.floats(-1e6, 1e6)), st.floats(1e-3, 1e3))  # fmt: skip
def test_clipped_rows_never_exceed_the_bound_by_an_ulp(x: np.ndarray, c: float) -> None:
    out = clip_rows(x, c)
    assert np.all(np.abs(out) <= c)
    assert all(np.linalg.norm(row) <= c for row in out)  # 1-D norms sum differently


def test_row_gaussian_noise_has_the_stated_scale_and_composes_over_releases():
    mech = RowGaussian(clip_norm=0.5, noise_multiplier=2.0)
    rng = np.random.default_rng(0)
    x = np.zeros((4000, 5))
    out = mech.apply(x, rng)
    assert abs(out.std() - 2.0 * 2 * 0.5) < 0.05  # std σ·2C: 2C is the clipped diameter
    acc = mech.new_accountant("rdp", 1e-5)
    assert isinstance(acc, PrivacyAccountant)
    mech.charge(acc)
    one = acc.epsilon()
    mech.charge(acc, 3)
    assert len(acc) == 4 and acc.epsilon() > one  # composed, not constant
    assert acc.epsilon() < 4 * one  # RDP composition beats adding per-release ε


def test_randomized_response_keeps_the_true_class_at_the_stated_rate():
    eps, k = 1.0, 5
    rr = RandomizedResponse(eps)
    p = rr.keep_probability(k)
    assert p == pytest.approx(math.exp(eps) / (math.exp(eps) + k - 1))
    rng = np.random.default_rng(1)
    y = rng.integers(0, k, 20000)
    out = rr.respond(y, k, rng)
    assert abs((out == y).mean() - p) < 0.015
    wrong = out[out != y] - y[out != y]
    counts = np.bincount(wrong % k, minlength=k)[1:]  # every other class equally likely
    assert counts.min() / counts.max() > 0.9
    rows = np.eye(k)[y[:50]] * 0.9 + 0.02
    released = rr.apply(rows, rng)
    assert set(np.unique(released)) == {0.0, 1.0} and (released.sum(1) == 1).all()
    ledger = rr.new_accountant("rdp", 1e-5)
    assert isinstance(ledger, PureDPAccountant)
    rr.charge(ledger, 3)
    assert ledger.epsilon() == pytest.approx(3 * eps)


def test_mechanisms_refuse_bad_parameters():
    with pytest.raises(ValueError):
        RowGaussian(0.0, 1.0)
    with pytest.raises(ValueError):
        RowGaussian(1.0, 0.0)
    with pytest.raises(ValueError):
        RandomizedResponse(-1.0)
