"""protocols.dp.accounting: Opacus-backed (ε, δ) and pure-DP composition."""

from __future__ import annotations

import math

import pytest
from opacus.accountants import PRVAccountant, RDPAccountant

from protocols.dp import PrivacyAccountant, PureDPAccountant, noise_for_budget

SIGMA, Q, STEPS, DELTA = 1.1, 0.01, 1000, 1e-5


def opacus_epsilon(kind: str, sigma: float, q: float, steps: int, delta: float) -> float:
    acc = RDPAccountant() if kind == "rdp" else PRVAccountant()
    for _ in range(steps):
        acc.step(noise_multiplier=sigma, sample_rate=q)
    return acc.get_epsilon(delta=delta)


@pytest.mark.parametrize("kind", ["rdp", "prv"])
def test_epsilon_equals_opacus(kind: str) -> None:
    ours = PrivacyAccountant(kind, DELTA)
    ours.step(SIGMA, Q, steps=STEPS)
    expected = opacus_epsilon(kind, SIGMA, Q, STEPS, DELTA)
    assert ours.epsilon() == pytest.approx(expected, rel=1e-9)
    assert len(ours) == STEPS


def test_known_values_from_research_notes() -> None:
    # anchors_privacy.md §3.1: σ=1, q=0.01, 1000 steps, δ=1e-5 → RDP 2.101, PRV 1.838
    for kind, value in [("rdp", 2.101), ("prv", 1.838)]:
        acc = PrivacyAccountant(kind, 1e-5)
        acc.step(1.0, 0.01, 1000)
        assert acc.epsilon() == pytest.approx(value, abs=2e-3)
    assert PrivacyAccountant("rdp").epsilon() == 0.0


def test_steps_merge_and_split_agree() -> None:
    a = PrivacyAccountant("rdp", DELTA)
    a.step(SIGMA, Q, 400)
    a.step(SIGMA, Q, 600)
    b = PrivacyAccountant("rdp", DELTA)
    for _ in range(10):
        b.step(SIGMA, Q, 100)
    assert a.history == b.history == [(SIGMA, Q, STEPS)]
    assert a.epsilon() == b.epsilon()


def test_epsilon_grows_with_steps_and_heterogeneous_history() -> None:
    acc = PrivacyAccountant("rdp", DELTA)
    acc.step(SIGMA, Q, 100)
    e1 = acc.epsilon()
    acc.step(0.8, 0.05, 10)  # a different mechanism: composed, not overwritten
    e2 = acc.epsilon()
    assert e2 > e1
    assert len(acc.history) == 2
    # ε is composed by the accountant, far below the sum of per-step ε
    single = PrivacyAccountant("rdp", DELTA)
    single.step(SIGMA, Q, 1)
    assert e1 < 100 * single.epsilon()


@pytest.mark.parametrize("kind", ["rdp", "prv"])
def test_the_same_sigma_at_another_rate_is_composed_not_merged(kind: str) -> None:
    from opacus.accountants import create_accountant

    acc = PrivacyAccountant(kind, DELTA)
    acc.step(1.0, 0.01, 100)
    acc.step(1.0, 1.0, 10)
    assert acc.history == [(1.0, 0.01, 100), (1.0, 1.0, 10)]
    reference = create_accountant(kind)
    reference.history = [(1.0, 0.01, 100), (1.0, 1.0, 10)]
    assert acc.epsilon() == pytest.approx(reference.get_epsilon(delta=DELTA), rel=1e-6)
    merged = PrivacyAccountant(kind, DELTA)
    merged.step(1.0, 0.01, 110)
    assert acc.epsilon() > 5 * merged.epsilon()


def test_noiseless_step_is_infinite_and_zero_rate_is_free() -> None:
    acc = PrivacyAccountant("rdp", DELTA)
    acc.step(1.0, 0.0, 50)
    assert acc.epsilon() == 0.0
    acc.step(0.0, 0.1)
    assert math.isinf(acc.epsilon())


@pytest.mark.parametrize("kind", ["rdp", "prv"])
def test_noise_for_budget_inverts_the_accountant(kind: str) -> None:
    acc = PrivacyAccountant(kind, DELTA)
    acc.step(SIGMA, Q, STEPS)
    target = acc.epsilon()
    sigma = noise_for_budget(target, DELTA, Q, STEPS, kind=kind)
    assert sigma == pytest.approx(SIGMA, abs=0.01)
    check = PrivacyAccountant(kind, DELTA)
    check.step(sigma, Q, STEPS)
    assert target - 0.02 <= check.epsilon() <= target


def test_noise_for_budget_matches_research_notes() -> None:
    # anchors §3.1: ε=1, δ=1e-5, q=0.01, 1000 steps → σ=1.523 (rdp)
    assert noise_for_budget(1.0, 1e-5, 0.01, 1000, kind="rdp") == pytest.approx(1.523, abs=0.01)


def test_full_batch_gaussian_matches_opacus() -> None:
    acc = PrivacyAccountant("rdp", 1e-4)
    acc.step(4.0, 1.0, 100)
    assert acc.epsilon() == pytest.approx(12.80, abs=0.01)  # anchors table
    assert acc.epsilon() == pytest.approx(opacus_epsilon("rdp", 4.0, 1.0, 100, 1e-4))


def test_state_dict_roundtrip() -> None:
    acc = PrivacyAccountant("prv", 1e-6)
    acc.step(1.3, 0.02, 30)
    acc.step(2.0, 0.1, 5)
    clone = PrivacyAccountant.from_state_dict(acc.state_dict())
    assert clone.history == acc.history
    assert clone.epsilon() == acc.epsilon()


@pytest.mark.parametrize(
    "bad",
    [
        lambda: PrivacyAccountant("gdp2", 1e-5),
        lambda: PrivacyAccountant("rdp", 0.0),
        lambda: PrivacyAccountant("rdp", 1e-5).step(-1.0, 0.1),
        lambda: PrivacyAccountant("rdp", 1e-5).step(1.0, 1.5),
        lambda: noise_for_budget(0.0, 1e-5, 0.01, 10),
    ],
)
def test_invalid_arguments_raise(bad) -> None:
    with pytest.raises(ValueError):
        bad()


def test_pure_dp_basic_composition() -> None:
    ledger = PureDPAccountant()
    assert ledger.epsilon() == 0.0
    ledger.step(0.5, 10)
    ledger.step(2.0)
    assert ledger.epsilon() == pytest.approx(7.0)
    assert len(ledger) == 11


def test_pure_dp_advanced_composition() -> None:
    ledger = PureDPAccountant()
    ledger.step(0.01, 10_000)
    eps, k, delta = 0.01, 10_000, 1e-5
    expected = k * eps * math.tanh(eps / 2) + math.sqrt(2 * k * eps**2 * math.log(1 / delta))
    assert ledger.epsilon_advanced(delta) == pytest.approx(expected)
    assert ledger.epsilon_advanced(delta) < ledger.epsilon() == pytest.approx(100.0)
    few = PureDPAccountant()
    few.step(2.0, 3)
    assert few.epsilon_advanced(delta) == few.epsilon()  # never worse than basic


def test_pure_dp_release_without_guarantee_poisons_the_ledger() -> None:
    ledger = PureDPAccountant()
    ledger.step(1.0, 3)
    ledger.step(None)
    assert not ledger.guaranteed
    assert ledger.epsilon() is None
    assert ledger.epsilon_advanced(1e-5) is None
