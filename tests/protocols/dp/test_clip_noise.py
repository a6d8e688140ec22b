"""protocols.dp.clip_noise + protocols.dp.aggregation: DP-FedAvg over any transport."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from protocols import (
    AggregateResult,
    AggregationParties,
    AggregationProtocol,
    Phase,
    PlainAggregation,
    Role,
    aggregate,
)
from protocols.dp import (
    ClipNoiseMechanism,
    DPAggregation,
    PrivacyAccountant,
    clip_l2,
    make_rng,
)
from protocols.secagg import SecAggregation

CLIENTS = [f"c{i}" for i in range(6)]


def updates(dim: int = 5, seed: int = 0) -> dict[str, tuple[np.ndarray, float]]:
    rng = np.random.default_rng(seed)
    return {
        c: (rng.normal(0, 1.0 + 2 * i, size=dim), float(10 * (i + 1)))
        for i, c in enumerate(CLIENTS)
    }


def run(protocol: AggregationProtocol, inputs, round_idx: int = 0, dropped=None, dim=None):
    dim = dim or len(next(iter(inputs.values()))[0])
    parties = protocol.create_parties("server", list(inputs), dim)
    return aggregate(protocol, parties, round_idx, inputs, dropped=dropped), parties


@settings(max_examples=50, deadline=None)
@given(
    arrays(np.float64, st.integers(1, 40), elements=st.floats(-1e6, 1e6)),
    st.floats(1e-3, 1e3),
)
def test_clip_bounds_the_norm_and_keeps_direction(x: np.ndarray, c: float) -> None:
    y = clip_l2(x, c)
    assert np.linalg.norm(y) <= c and np.all(np.abs(y) <= c)  # exactly, not up to ULPs
    if np.linalg.norm(x) <= c:
        np.testing.assert_array_equal(y, x)
    else:
        np.testing.assert_allclose(y * np.linalg.norm(x) / c, x, rtol=1e-9, atol=1e-9)


def test_a_clipped_update_fits_the_value_bound_the_transport_derives() -> None:
    """C·(x/‖x‖) is C·(1 + 2⁻⁵²) for this one-entry update: an honest client's round
    aborted at the secagg value bound w_max·C."""
    x = np.array([-39.693506742163116])
    assert abs(x[0] * (3.0 / np.linalg.norm(x))) > 3.0  # the float product overshoots
    assert np.abs(clip_l2(x, 3.0)).max() <= 3.0
    mech = ClipNoiseMechanism(clip_norm=3.0, noise_multiplier=1.0, expected_clients=3)
    protocol = DPAggregation(SecAggregation("e", value_bound=mech.entry_bound()), mech)
    inputs = {"c0": (x, 1.0), "c1": (np.array([0.5]), 1.0), "c2": (np.array([0.2]), 1.0)}
    result, _ = run(protocol, inputs)
    assert result.participants == ("c0", "c1", "c2")


def test_clip_rejects_non_finite() -> None:
    with pytest.raises(ValueError):
        clip_l2(np.array([1.0, np.nan]), 1.0)


def test_client_apply_clips_and_fixes_weights() -> None:
    rng = make_rng(0)
    mech = ClipNoiseMechanism(clip_norm=0.5, noise_multiplier=1.0, expected_clients=4)
    v, w = mech.client_apply(np.full(10, 3.0), 123.0, rng)
    assert w == 1.0  # uniform weights under DP
    assert np.linalg.norm(v) == pytest.approx(0.5)  # central mode: clipped, no noise
    fixed = ClipNoiseMechanism(0.5, 1.0, weighting="fixed", max_weight=20.0, expected_weight=50.0)
    assert fixed.client_apply(np.ones(3), 123.0, rng)[1] == 20.0
    assert fixed.client_apply(np.ones(3), 7.0, rng)[1] == 7.0
    assert fixed.sensitivity == pytest.approx(10.0)
    with pytest.raises(ValueError):
        fixed.client_apply(np.ones(3), -1.0, rng)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"clip_norm": 0.0, "noise_multiplier": 1.0, "expected_clients": 3},
        {"clip_norm": 1.0, "noise_multiplier": -1.0, "expected_clients": 3},
        {"clip_norm": 1.0, "noise_multiplier": 1.0},  # fixed denominator needs n
        {
            "clip_norm": 1.0,
            "noise_multiplier": 1.0,
            "mode": "distributed",
            "denominator": "participants",
        },  # distributed needs n
        {"clip_norm": 1.0, "noise_multiplier": 1.0, "mode": "local", "expected_clients": 3},
    ],
)
def test_invalid_configs_raise(kwargs) -> None:
    with pytest.raises(ValueError):
        ClipNoiseMechanism(**kwargs)


def test_distributed_shares_sum_to_the_target_variance() -> None:
    n, dim, sigma, clip = 10, 20_000, 1.3, 0.7
    mech = ClipNoiseMechanism(clip, sigma, mode="distributed", expected_clients=n)
    rng = make_rng(1)
    shares = [mech.client_apply(np.zeros(dim), 1.0, rng)[0] for _ in range(n)]
    assert np.std(shares[0]) == pytest.approx(sigma * clip / np.sqrt(n), rel=0.03)
    total = np.sum(shares, axis=0)
    assert np.std(total) == pytest.approx(sigma * clip, rel=0.03)
    assert abs(np.mean(total)) < 4 * sigma * clip / np.sqrt(dim)
    # shares of different clients are independent
    assert abs(np.corrcoef(shares[0], shares[1])[0, 1]) < 0.03


def test_distributed_share_is_scaled_by_the_fixed_weight() -> None:
    n, dim = 4, 20_000
    mech = ClipNoiseMechanism(
        1.0,
        1.0,
        mode="distributed",
        expected_clients=n,
        weighting="fixed",
        max_weight=8.0,
        expected_weight=20.0,
    )
    v, w = mech.client_apply(np.zeros(dim), 5.0, make_rng(2))
    # the protocol sends w·v: its noise must be σ·S/√n with S = w_max·C
    assert np.std(w * v) == pytest.approx(8.0 / 2.0, rel=0.03)


@pytest.mark.parametrize("mode", ["central", "distributed"])
def test_noise_free_limit_equals_plain_mean_of_clipped_updates(mode: str) -> None:
    inputs = updates()
    clip = 1.5
    mech = ClipNoiseMechanism(clip, 0.0, mode=mode, expected_clients=len(CLIENTS))
    result, _ = run(DPAggregation(PlainAggregation(), mech, seed=0), inputs)
    expected = np.mean([clip_l2(v, clip) for v, _ in inputs.values()], axis=0)
    np.testing.assert_allclose(result.mean, expected, rtol=1e-6, atol=1e-7)  # float32 wire
    assert result.total_weight == len(CLIENTS)
    assert set(result.participants) == set(CLIENTS)
    plain, _ = run(PlainAggregation(), {c: (clip_l2(v, clip), 1.0) for c, (v, _) in inputs.items()})
    np.testing.assert_allclose(result.mean, plain.mean, rtol=1e-12)


def test_fixed_weights_noise_free() -> None:
    inputs = updates()
    mech = ClipNoiseMechanism(
        1.0, 0.0, weighting="fixed", max_weight=30.0, denominator="participants"
    )
    result, _ = run(DPAggregation(PlainAggregation(), mech), inputs)
    ws = np.array([min(w, 30.0) for _, w in inputs.values()])
    xs = np.array([clip_l2(v, 1.0) for v, _ in inputs.values()])
    np.testing.assert_allclose(result.mean, ws @ xs / ws.sum(), rtol=1e-6)  # float32 wire
    assert result.total_weight == pytest.approx(ws.sum())


@pytest.mark.parametrize("mode", ["central", "distributed"])
def test_aggregate_noise_has_the_calibrated_std(mode: str) -> None:
    n, dim, sigma, clip = 8, 20_000, 0.9, 2.0
    mech = ClipNoiseMechanism(clip, sigma, mode=mode, expected_clients=n)
    inputs = {f"c{i}": (np.zeros(dim), 1.0) for i in range(n)}
    result, _ = run(DPAggregation(PlainAggregation(), mech, seed=3), inputs)
    noise_on_sum = result.mean * n
    assert np.std(noise_on_sum) == pytest.approx(sigma * clip, rel=0.03)


def test_dropout_weakens_distributed_noise_and_accounting_follows() -> None:
    n, dim, sigma = 8, 20_000, 1.0
    mech = ClipNoiseMechanism(1.0, sigma, mode="distributed", expected_clients=n)
    inputs = {f"c{i}": (np.zeros(dim), 1.0) for i in range(n)}
    dropped = {"c0": "send_update", "c1": "send_update"}
    result, _ = run(DPAggregation(PlainAggregation(), mech, seed=4), inputs, dropped=dropped)
    assert len(result.participants) == 6
    assert np.std(result.mean * n) == pytest.approx(sigma * np.sqrt(6 / 8), rel=0.03)
    assert mech.effective_noise_multiplier(6) == pytest.approx(sigma * np.sqrt(6 / 8))
    assert mech.effective_noise_multiplier(6, colluding=2) == pytest.approx(sigma * np.sqrt(4 / 8))
    acc = PrivacyAccountant("rdp", 1e-5)
    charged = mech.account(acc, sample_rate=0.1, n_survivors=6)
    assert acc.history == [(charged, 0.1, 1)]


def test_a_round_nobody_took_part_in_charges_nothing_under_distributed_noise() -> None:
    mech = ClipNoiseMechanism(1.0, 1.0, mode="distributed", expected_clients=4)
    acc = PrivacyAccountant("rdp", 1e-5)
    mech.account(acc, sample_rate=1.0, n_survivors=3)
    assert mech.account(acc, sample_rate=1.0, n_survivors=0) == float("inf")
    assert len(acc.history) == 1 and np.isfinite(acc.epsilon())
    central = ClipNoiseMechanism(1.0, 1.0, expected_clients=4)  # its noise is still released
    central.account(acc, sample_rate=0.5, n_survivors=0)
    assert len(acc.history) == 2


def test_participants_denominator_charges_replace_one_sensitivity() -> None:
    mech = ClipNoiseMechanism(1.0, 2.0, denominator="participants")
    assert mech.effective_noise_multiplier() == pytest.approx(1.0)
    central = ClipNoiseMechanism(1.0, 2.0, expected_clients=5)
    assert central.effective_noise_multiplier(n_survivors=1, colluding=3) == 2.0


def test_result_is_noised_once_per_round_and_seeded() -> None:
    inputs = updates()
    mech = ClipNoiseMechanism(1.0, 1.0, expected_clients=len(CLIENTS))
    proto = DPAggregation(PlainAggregation(), mech, seed=11)
    parties = proto.create_parties("server", CLIENTS, 5)
    r0 = aggregate(proto, parties, 0, inputs)
    assert parties.server.result() is r0  # cached: no fresh noise on a second read
    r1 = aggregate(proto, parties, 1, inputs)
    assert not np.allclose(r0.mean, r1.mean)  # fresh noise next round
    again, _ = run(DPAggregation(PlainAggregation(), mech, seed=11), inputs)
    np.testing.assert_array_equal(again.mean, r0.mean)
    other, _ = run(DPAggregation(PlainAggregation(), mech, seed=12), inputs)
    assert not np.allclose(other.mean, r0.mean)


def test_wrapper_keeps_protocol_description_and_delegates_phases() -> None:
    mech = ClipNoiseMechanism(1.0, 1.0, mode="distributed", expected_clients=3)
    inner = PlainAggregation()
    proto = DPAggregation(inner, mech)
    assert proto.name == "clip_noise+plain"
    assert proto.round_phases == inner.round_phases
    assert proto.output_role is Role.SERVER
    parties = proto.create_parties("s", ["a", "b"], 4)
    assert callable(parties.clients["a"].send_update)
    assert callable(parties.server.collect)
    with pytest.raises(AttributeError):
        _ = parties.clients["a"].no_such_phase


class _ClientOutput(AggregationProtocol):
    """A stand-in for a protocol that delivers the aggregate to clients (like CKKS)."""

    name = "client_output"
    output_role = Role.CLIENT
    round_phases = (Phase(Role.CLIENT, "send_update"),)

    def create_parties(self, server_id: str, client_ids: Sequence[str], dim: int):
        return AggregationParties(server=None, clients={})  # type: ignore[arg-type]


def test_central_noise_needs_a_server_held_output() -> None:
    central = ClipNoiseMechanism(1.0, 1.0, expected_clients=3)
    with pytest.raises(ValueError, match="distributed"):
        DPAggregation(_ClientOutput(), central)
    distributed = ClipNoiseMechanism(1.0, 1.0, mode="distributed", expected_clients=3)
    assert DPAggregation(_ClientOutput(), distributed).output_role is Role.CLIENT


def test_server_apply_fixed_denominator() -> None:
    mech = ClipNoiseMechanism(1.0, 0.0, expected_clients=10)
    res = mech.server_apply(AggregateResult(np.array([2.0, 4.0]), 4.0, ("a",)), make_rng(0))
    np.testing.assert_allclose(res.mean, [0.8, 1.6])  # sum (8, 16) / 10 expected clients
    assert res.total_weight == 10.0


def test_enforced_minimum_cohort_noise_matches_an_independent_rdp_computation() -> None:
    """σ_eff of distributed noise at the fewest shares a client enforces (a malicious server
    chooses the cohort), against Opacus' RDP analysis of m shares of variance σ²/n each."""
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent
    from opacus.accountants.rdp import RDPAccountant

    from protocols.dp import enforced_noise_multiplier
    from protocols.secagg import SecAggregation

    sigma, n, rounds, delta = 1.0, 10, 20, 1e-5
    orders = RDPAccountant.DEFAULT_ALPHAS

    def independent(m: int) -> float:
        std = np.sqrt(m * sigma**2 / n)  # the sum of m shares N(0, σ²/n)
        rdp = compute_rdp(q=1.0, noise_multiplier=std, steps=rounds, orders=orders)
        return float(get_privacy_spent(orders=orders, rdp=rdp, delta=delta)[0])

    def charged(m: int, colluding: int = 0) -> float:
        acc = PrivacyAccountant("rdp", delta)
        acc.step(enforced_noise_multiplier(sigma, m, n, colluding), 1.0, rounds)
        return acc.epsilon()

    floor = SecAggregation("e", threat_model="malicious").min_summands(n)
    assert floor == 6
    for m in (2, floor, n):
        assert charged(m) == pytest.approx(independent(m), rel=1e-9)
    assert charged(n) == pytest.approx(30.1, abs=0.1)  # what the driver's count charged
    assert charged(2) == pytest.approx(96.1, abs=0.1)  # one pair's sum (issue 45)
    assert charged(n) < charged(floor) < charged(2)
    assert charged(floor, colluding=1) == pytest.approx(independent(floor - 1), rel=1e-9)
    assert enforced_noise_multiplier(2.0, 3, 10, colluding=5) == 0.0
    mech = ClipNoiseMechanism(1.0, sigma, mode="distributed", expected_clients=n)
    assert mech.effective_noise_multiplier(floor) == enforced_noise_multiplier(sigma, floor, n)
    with pytest.raises(ValueError):
        enforced_noise_multiplier(1.0, 2, 0)


def test_the_participants_denominator_is_refused_under_subsampling() -> None:
    """Its σ/2 is replace-one at q = 1; under q < 1 the count is released and Opacus'
    add/remove bound does not hold."""
    mech = ClipNoiseMechanism(1.0, 1.0, denominator="participants")
    mech.account(PrivacyAccountant("rdp", 1e-5), 1.0)
    with pytest.raises(ValueError, match="participants"):
        mech.account(PrivacyAccountant("rdp", 1e-5), 0.5)
