"""Every DP mechanism's public output stays within its claimed ε; the check has power."""

import dataclasses

import pytest

from attacks.dp_checks import checks, clip_noise_check, edge_check, poisson_check, run_check


@pytest.mark.parametrize("check", checks(), ids=lambda c: c.name)
def test_each_mechanism_keeps_to_its_claimed_epsilon(check):
    row = run_check(check)
    assert row["holds"], row
    assert 0 <= row["epsilon_lower_bound"] <= row["epsilon_claimed"]


@pytest.mark.parametrize(
    "broken",
    [
        clip_noise_check(mode="central", noise_scale=0.1),  # a tenth of the claimed noise
        clip_noise_check(mode="distributed", noise_scale=0.1),
        dataclasses.replace(poisson_check(sigma=0.3), epsilon=0.5),  # amplification overclaimed
        dataclasses.replace(edge_check("edgerand", 4.0), epsilon=0.5),  # ε understated
        # LapGraph's noisy edge count (1 % of ε) blurs one pair's bit: a wider gap
        dataclasses.replace(edge_check("lapgraph", 4.0), epsilon=0.05),
    ],
    ids=lambda c: c.name,
)
def test_a_mechanism_that_breaks_its_claim_is_caught(broken):
    assert not run_check(broken)["holds"]
