"""Naive baselines, advantages and the leak verdict (attacks.naive, AttackResult)."""

import numpy as np
import pytest

from attacks.base import AttackResult
from attacks.hop2vec_leakage import score_reach
from attacks.link_stealing import attack0
from attacks.linkteller import score_pairs
from attacks.membership import membership_signals, score_members
from attacks.naive import auc_margin, mean_row_guess, top_m


def test_hanley_mcneil_margin():
    # AUC 0.5, 100 vs 100: var = (0.25 + 2·99·(1/3 − 1/4)) / 10^4
    assert np.isclose(auc_margin(0.5, 100, 100), 1.96 * np.sqrt(16.75 / 1e4))
    assert auc_margin(0.5, 10_000, 10_000) == 0.02  # the floor
    assert auc_margin(0.7, 50, 50) > auc_margin(0.7, 500, 500)


def test_verdict_follows_the_margin_and_the_direction():
    r = AttackResult(
        "x", "server", {"auc": 0.9, "mse": 0.5, "other": 3.0}, "auc",
        baselines={"auc": 0.5, "mse": 1.0}, margins={"auc": 0.45},
    )  # fmt: skip
    assert np.isclose(r.advantage(), 0.4) and r.leaks() is False  # 0.4 < margin 0.45
    assert np.isclose(r.advantage("mse"), -0.5) and r.leaks("mse") is True  # lower is better
    assert r.baseline("other") is None and r.leaks("other") is None
    d = r.to_dict()
    assert d["baseline"] == 0.5 and d["leaks"] is False and d["margins"]["mse"] == 0.05


def _noise_pairs(rng, n=400, pairs=600):
    p = rng.integers(0, n, size=(pairs, 2))
    return p, rng.random(pairs) < 0.5


NOISE_ATTACKS = {
    "link_stealing": lambda rng: attack0(
        rng.dirichlet(np.ones(4), 400), (rng.random((400, 30)) < 0.2).astype(float),
        *_noise_pairs(rng),
    ),
    "linkteller": lambda rng: score_pairs(
        rng.random(3000), rng.random(3000), rng.random(3000) < 0.05
    ),
    "membership_inference": lambda rng: score_members(
        membership_signals(rng.dirichlet(np.ones(3), 500), rng.integers(0, 3, 500)),
        rng.random(500) < 0.5,
    ),
    "hop2vec_leakage": lambda rng: score_reach(
        rng.random(2000), rng.random(2000) < 0.3, rng.random(2000) < 0.1
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(NOISE_ATTACKS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_attacks_on_pure_noise_show_no_advantage(name, seed):
    r = NOISE_ATTACKS[name](np.random.default_rng(seed))
    assert abs(r.advantage()) <= r.margin()
    assert not any(r.leaks(m) for m in r.baselines)


def test_a_perfect_attack_leaks_and_a_feature_echo_does_not():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(4), 50)
    onehot = np.eye(4)[groups]
    pairs, _ = _noise_pairs(rng, n=200, pairs=2000)
    linked = groups[pairs[:, 0]] == groups[pairs[:, 1]]
    noise = (rng.random((200, 30)) < 0.2).astype(float)
    perfect = attack0(0.9 * onehot + 0.025, noise, pairs, linked)
    assert perfect.value == 1.0 and perfect.leaks()
    # posteriors that only repeat the features: the features alone already say it
    echo = attack0(0.9 * onehot + 0.025, onehot, pairs, linked)
    assert echo.value == 1.0 and echo.baseline() == 1.0 and not echo.leaks()


def test_mean_row_guess():
    prior = np.array([[1, 1, 0, 0], [1, 0, 1, 0]], float)
    true = np.array([[1, 0, 0, 0], [1, 1, 0, 0]], float)
    g = mean_row_guess(prior, true)
    assert top_m(prior.mean(axis=0), 2).tolist() == [True, True, False, False]
    assert g["exact_fraction"] == 0.5 and g["recall"] == 1.0 and g["precision"] == 0.75
