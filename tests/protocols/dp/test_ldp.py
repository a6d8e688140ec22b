"""protocols.dp.ldp: per-coordinate clip-and-noise LDP (FedGNN, FeSoG)."""

from __future__ import annotations

import numpy as np
import pytest
from opacus.accountants import RDPAccountant

from protocols import PlainAggregation, aggregate
from protocols.dp import (
    DPAggregation,
    GaussianLDP,
    HeuristicLDP,
    LaplaceLDP,
    PrivacyAccountant,
    PureDPAccountant,
    clip_coordinates,
    fedgnn_epsilon,
    make_rng,
)

D = 40_000


def noise_of(mech, dim: int = D, seed: int = 0) -> np.ndarray:
    return mech.apply(np.zeros(dim), make_rng(seed))


@pytest.mark.parametrize(
    ("per", "expected_scale"),
    [("coordinate", 2 * 0.3 / 2.0), ("vector", 2 * 0.3 * D / 2.0)],
)
def test_laplace_scale_per_coordinate(per: str, expected_scale: float) -> None:
    mech = LaplaceLDP(clip=0.3, epsilon=2.0, per=per)
    assert mech.scale(D) == pytest.approx(expected_scale)
    noise = noise_of(mech)
    assert np.std(noise) == pytest.approx(np.sqrt(2) * expected_scale, rel=0.03)
    # Laplace: mean |X| = b
    assert np.mean(np.abs(noise)) == pytest.approx(expected_scale, rel=0.03)


def test_laplace_noise_is_independent_per_coordinate() -> None:
    noise = noise_of(LaplaceLDP(clip=0.1, epsilon=1.0, per="coordinate"), seed=1)
    # FeSoG/FedGNN code adds one scalar to the whole tensor; ours draws per coordinate
    assert len(np.unique(noise)) == noise.size
    assert abs(np.corrcoef(noise[:-1], noise[1:])[0, 1]) < 0.03
    halves = noise.reshape(2, -1)
    assert abs(np.corrcoef(halves[0], halves[1])[0, 1]) < 0.03


def test_laplace_clips_each_coordinate() -> None:
    x = np.array([-5.0, -0.05, 0.0, 0.07, 9.0])
    np.testing.assert_array_equal(clip_coordinates(x, 0.1), [-0.1, -0.05, 0.0, 0.07, 0.1])
    nearly_noiseless = LaplaceLDP(clip=0.1, epsilon=1e12, per="coordinate")
    np.testing.assert_allclose(
        nearly_noiseless.apply(x, make_rng(0)), clip_coordinates(x, 0.1), atol=1e-9
    )


def test_epsilon_per_release_and_composition() -> None:
    coord = LaplaceLDP(clip=0.1, epsilon=0.5, per="coordinate")
    vec = LaplaceLDP(clip=0.1, epsilon=0.5, per="vector")
    assert coord.epsilon_per_release(64) == pytest.approx(32.0)
    assert vec.epsilon_per_release(64) == pytest.approx(0.5)
    # same noise scale ⇔ same per-update guarantee
    assert LaplaceLDP(0.1, 32.0, per="vector").scale(64) == pytest.approx(coord.scale(64))
    ledger = PureDPAccountant()
    vec.account(ledger, dim=64, releases=10)
    assert ledger.epsilon() == pytest.approx(5.0)


def test_fedgnn_rule() -> None:
    assert fedgnn_epsilon(0.1, 0.2) == pytest.approx(1.0)
    mech = LaplaceLDP.fedgnn(clip=0.1, lam=0.05)
    assert mech.per == "coordinate"
    assert mech.epsilon == pytest.approx(4.0)
    assert mech.scale(1000) == pytest.approx(0.05)  # the Laplace scale is λ
    assert mech.epsilon_per_release(1000) == pytest.approx(4000.0)  # per update: d·2δ/λ
    assert LaplaceLDP.fedgnn(clip=0.1, epsilon=1.0).scale(7) == pytest.approx(0.2)


def test_heuristic_mode_reports_no_epsilon() -> None:
    mech = HeuristicLDP(clip=0.3, lam=0.1)
    assert mech.epsilon is None
    ledger = PureDPAccountant()
    ledger.step(1.0)
    mech.account(ledger)
    assert ledger.epsilon() is None
    g = np.full(D, 0.2)
    g[::2] = 2.0  # mean 1.1 taken before clipping; every coordinate then clipped to 0.3
    out = mech.apply(g, make_rng(2))
    scale = 0.1 * 1.1
    noise = out - clip_coordinates(g, 0.3)
    assert np.std(noise) == pytest.approx(np.sqrt(2) * scale, rel=0.03)
    assert len(np.unique(noise)) == noise.size
    zero_mean = np.tile([1.0, -1.0], 50)
    np.testing.assert_array_equal(
        mech.apply(zero_mean, make_rng(3)), clip_coordinates(zero_mean, 0.3)
    )


def test_gaussian_ldp_scale_and_accounting() -> None:
    mech = GaussianLDP(clip_norm=0.5, noise_multiplier=1.5)
    noise = noise_of(mech, seed=4)
    assert np.std(noise) == pytest.approx(1.5 * 2 * 0.5, rel=0.03)
    x = np.full(100, 10.0)
    assert np.linalg.norm(GaussianLDP(0.5, 1e-12).apply(x, make_rng(0))) == pytest.approx(0.5)
    acc = PrivacyAccountant("rdp", 1e-5)
    mech.account(acc, releases=20)
    ref = RDPAccountant()
    for _ in range(20):
        ref.step(noise_multiplier=1.5, sample_rate=1.0)
    assert acc.epsilon() == pytest.approx(ref.get_epsilon(1e-5))
    assert mech.epsilon(1e-5, releases=20) == pytest.approx(acc.epsilon())


def test_invalid_ldp_configs_raise() -> None:
    for bad in (
        lambda: LaplaceLDP(0.0, 1.0),
        lambda: LaplaceLDP(0.1, 0.0),
        lambda: LaplaceLDP(0.1, 1.0, per="row"),
        lambda: GaussianLDP(1.0, 0.0),
    ):
        with pytest.raises(ValueError):
            bad()


def test_ldp_as_a_stack_layer_over_plain() -> None:
    rng = np.random.default_rng(5)
    inputs = {f"u{i}": (rng.normal(0, 1, 2000), 1.0) for i in range(5)}
    mech = LaplaceLDP(clip=0.2, epsilon=1.0, per="coordinate")
    proto = DPAggregation(PlainAggregation(), mech, seed=9)
    assert proto.name == "ldp_laplace+plain"
    parties = proto.create_parties("server", list(inputs), 2000)
    res = aggregate(proto, parties, 0, inputs)
    clean = np.mean([clip_coordinates(v, 0.2) for v, _ in inputs.values()], axis=0)
    noise = res.mean - clean
    # mean of 5 independent Laplace(b) draws per coordinate: std √2·b/√5
    assert np.std(noise) == pytest.approx(np.sqrt(2) * 0.4 / np.sqrt(5), rel=0.06)


def test_a_round_nobody_took_part_in_is_not_charged() -> None:
    mech = GaussianLDP(clip_norm=0.5, noise_multiplier=1.5)
    acc = mech.new_accountant("rdp", 1e-5)
    mech.account_round(acc, sample_rate=0.5, survivors=0, dim=10)  # Poisson: none joined
    assert acc.epsilon() == 0.0
    mech.account_round(acc, sample_rate=0.5, survivors=3, dim=10)
    assert acc.epsilon() > 0
