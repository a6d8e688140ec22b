"""Row DP (:mod:`securefgl.algorithms.recommendation.row_dp`): bounded uploads, the noise the
server's counts and sums carry (ideal and protocol), the accountant and the run's claim."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.dp.accounting import PrivacyAccountant
from protocols.names import HONEST_BUT_CURIOUS, MALICIOUS
from securefgl.algorithms.recommendation import aggregation
from securefgl.algorithms.recommendation.aggregation import aggregate_uploads, plain_sums
from securefgl.algorithms.recommendation.row_dp import RowDPConfig, bound_uploads, part_norms
from securefgl.algorithms.recommendation.settings import aggregating
from securefgl.algorithms.recommendation.trainer import (
    FedRecTrainer,
    RecConfig,
    row_dp_summands,
)
from securefgl.config import ConfigError
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import synthetic_ratings
from tests.securefgl.algorithms.recommendation.fesog_uploads import fesog_uploads

COHORT = np.array([2, 3, 7, 11, 12, 30, 41])


@pytest.fixture(scope="module")
def views() -> ClientViews:
    return ClientViews.from_data(synthetic_ratings(n_users=60, n_items=80, per_user=9, n_trust=150))


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 12), clip=st.floats(1e-3, 50.0), seed=st.integers(0, 2**16))
def test_bounded_uploads_hold_the_row_cap_and_each_parts_norm(views, rows, clip, seed) -> None:
    up = fesog_uploads(views, COHORT, neighbour_rows=False)
    dp = RowDPConfig(1.0, clip, clip / 10, clip / 3, rows)
    got = bound_uploads(up, dp, np.random.default_rng(seed))
    per_user = torch.bincount(got.item_slot, minlength=up.n)
    before = torch.bincount(up.item_slot, minlength=up.n)
    assert torch.equal(per_user, torch.minimum(before, torch.tensor(rows)))
    # the kept rows are the user's own rows
    pairs = set(zip(up.item_slot.tolist(), up.item_idx.tolist(), strict=True))
    assert set(zip(got.item_slot.tolist(), got.item_idx.tolist(), strict=True)) <= pairs
    norms, bounded = part_norms(up), part_norms(got)
    for part, bound in (("items", dp.clip_items), ("users", dp.clip_users),
                        ("model", dp.clip_model)):  # fmt: skip
        assert float(bounded[part].max()) <= bound
        for j in range(up.n):  # a part within its bound (and rows within the cap) is kept
            if norms[part][j] <= bound * (1 - 1e-6) and (part != "items" or before[j] <= rows):
                assert math.isclose(float(bounded[part][j]), float(norms[part][j]),
                                    rel_tol=1e-6)  # fmt: skip


def _noise(views: ClientViews, how: str, dp: RowDPConfig, seed: int):
    own_rows = fesog_uploads(views, COHORT, neighbour_rows=False)
    up = bound_uploads(own_rows, dp, np.random.default_rng(0))
    exact = plain_sums(up)
    sums, _ = aggregate_uploads(up, how, 0, views.n_items, views.n_users,
                                dp=(dp, np.random.default_rng(seed)))  # fmt: skip
    return up, exact, sums


@pytest.mark.parametrize("how", ["ideal", "secagg"])
def test_the_server_gets_noisy_counts_on_every_row_and_noisy_sums(views, how) -> None:
    dp = RowDPConfig(noise=0.5, clip_items=1.0, clip_users=0.1, clip_model=0.3, rows=4,
                     threshold=-50.0)  # every item row kept  # fmt: skip
    count_dev, item_dev, user_dev, model_dev = [], [], [], []
    for seed in range(8 if how == "ideal" else 2):
        up, exact, sums = _noise(views, how, dp, seed)
        assert sums.item_idx.tolist() == list(range(views.n_items))
        counts = torch.zeros(views.n_items).index_add_(0, exact.item_idx, exact.item_count)
        count_dev.append((sums.item_count - counts).numpy())
        isum = torch.zeros(views.n_items, 4).index_copy_(0, exact.item_idx, exact.item_sum)
        item_dev.append((sums.item_sum - isum).flatten().numpy())
        user_dev.append((sums.user_sum - exact.user_sum).flatten().numpy())
        model_dev += [(sums.model_sum[k] - v).flatten().numpy() for k, v in exact.model_sum.items()]
        assert torch.equal(sums.user_idx, exact.user_idx)  # the cohort's own rows: public
        assert sums.weight_sum == pytest.approx(up.n)
    count_dev = np.concatenate(count_dev)
    assert np.std(count_dev) == pytest.approx(dp.count_std, rel=0.15)
    for part, dev in (("items", item_dev), ("users", user_dev), ("model", model_dev)):
        assert np.std(np.concatenate(dev)) == pytest.approx(dp.sum_std(part), rel=0.15)
    assert abs(np.mean(count_dev)) < 4 * dp.count_std / math.sqrt(count_dev.size)


def test_the_protocol_carries_no_exact_count(views, monkeypatch) -> None:
    """Phase 2 sends no count columns for item rows; phase 1's item counts are noised."""
    sent: list[np.ndarray] = []
    real = aggregation._run_protocol

    def spy(X, *args, **kwargs):
        sent.append(X.copy())
        return real(X, *args, **kwargs)

    monkeypatch.setattr(aggregation, "_run_protocol", spy)
    dp = RowDPConfig(noise=1.0, rows=4, threshold=-50.0)
    up, _, sums = _noise(views, "secagg", dp, 0)
    phase1, phase2 = sent
    items = phase1[:, : views.n_items]
    assert not np.isin(items, (0.0, 1.0)).any()  # every entry carries a noise share
    ni, d = sums.item_idx.numel(), 4
    assert not phase2[:, ni * d : ni * (d + 1)].any()  # no item count columns
    torch.testing.assert_close(sums.item_count, torch.from_numpy(phase1.sum(0)[: views.n_items])
                               .float(), atol=1e-4, rtol=0)  # fmt: skip


def test_a_high_threshold_keeps_only_rows_above_it(views) -> None:
    dp = RowDPConfig(noise=0.01, rows=4, threshold=3.0)
    _, exact, sums = _noise(views, "ideal", dp, 0)
    assert set(sums.item_idx.tolist()) <= set(exact.item_idx.tolist())
    assert bool((sums.item_count >= 3 * dp.count_std).all())


def test_epsilon_is_the_accountants_for_the_joint_mechanism() -> None:
    dp = RowDPConfig(noise=2.0, rows=8, delta=1e-5)
    acc = PrivacyAccountant("rdp", 1e-5)
    acc.step(2.0 / math.sqrt(4), 1.0, 50)  # counts, item rows, user rows, model
    assert dp.epsilon(50, 4, 10, 10) == pytest.approx(acc.epsilon())
    assert dp.epsilon(10, 4, 10, 10) < dp.epsilon(50, 4, 10, 10)
    assert dp.epsilon(50, 4, 10, 10) < RowDPConfig(noise=1.0).epsilon(50, 4, 10, 10)
    assert dp.epsilon(50, 3, 10, 10) < dp.epsilon(50, 4, 10, 10)
    # 6 of 10 shares in the opened sum, 2 of them the server's: z·√(4/10) per part
    colluding = RowDPConfig(noise=2.0, rows=8, colluding=2)
    acc = PrivacyAccountant("rdp", 1e-5)
    acc.step(2.0 * math.sqrt(4 / 10) / 2, 1.0, 50)
    assert colluding.epsilon(50, 4, 6, 10) == pytest.approx(acc.epsilon())
    assert RowDPConfig(noise=2.0, colluding=6).epsilon(50, 4, 6, 10) == math.inf


def _exact_gaussian_epsilon(multiplier: float, releases: int, delta: float) -> float:
    """ε at δ of ``releases`` Gaussian releases of noise multiplier ``multiplier``, exactly:
    μ-GDP with μ = √T/σ (Dong, Roth & Su 2022, Cor. 3.3) and its (ε, δ) curve (Cor. 2.13)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    mu = math.sqrt(releases) / multiplier

    def excess(eps: float) -> float:  # log δ(ε) − log δ, decreasing in ε
        tail = norm.logcdf(-eps / mu + mu / 2)
        rest = eps + norm.logcdf(-eps / mu - mu / 2)
        return tail + math.log1p(-math.exp(rest - tail)) - math.log(delta)

    return brentq(excess, 0.0, mu * mu / 2 + 10 * mu + 10)


@pytest.mark.parametrize("noise", [0.5, 2.0, 8.0])
@pytest.mark.parametrize("releases", [50, 300])
def test_the_epsilon_bounds_the_exact_one_closely(noise: float, releases: int) -> None:
    # a valid bound (never below the exact ε of the composed releases), and a close one
    dp = RowDPConfig(noise=noise)
    exact = _exact_gaussian_epsilon(dp.multiplier(3, 256, 256), releases, dp.delta)
    assert exact <= dp.epsilon(releases, 3, 256, 256) <= 1.1 * exact


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"transport": "plain"}, "secure"),
     ({"social_rows": "neighbours"}, "own"),
     ({"averages": "weighted"}, "uniform")],
)  # fmt: skip
def test_row_dp_refuses_what_it_cannot_cover(changes, message) -> None:
    base = {"method": "fesog", "row_dp": RowDPConfig(noise=1.0), **aggregating("ideal")}
    if changes.get("transport") == "plain":
        base["ideal_sums"] = False
    with pytest.raises(ConfigError, match=message):
        RecConfig(**{**base, **changes})


@pytest.mark.parametrize("field", ["noise", "clip_items", "clip_users", "clip_model", "rows",
                                   "delta", "colluding"])  # fmt: skip
def test_bad_bounds_are_refused(field) -> None:
    with pytest.raises(ValueError, match=field):
        RowDPConfig(**{field: -1})


@pytest.mark.parametrize(("method", "threat"), [("fesog", HONEST_BUT_CURIOUS),
                                                ("fedgnn", HONEST_BUT_CURIOUS),
                                                ("fesog", MALICIOUS)])  # fmt: skip
def test_a_run_states_its_epsilon_against_its_server(views, method, threat) -> None:
    dp = RowDPConfig(noise=1.0, rows=4, colluding=1)
    cfg = RecConfig(method=method, users_per_round=8, rounds=6, eval_every=3, pseudo_items=2,
                    row_dp=dp, threat_model=threat, **aggregating("ideal"))  # fmt: skip
    with FedRecTrainer(views, cfg) as tr:
        res = tr.run()
    claim = next(c for c in res.privacy["guarantees"] if c["delta"] == dp.delta)
    releases = res.privacy["max_releases"]
    assert 1 <= releases <= cfg.rounds
    floor = row_dp_summands(cfg, 8)
    assert (floor == 8) == (threat == HONEST_BUT_CURIOUS) and floor >= 2
    parts = 4 if method == "fesog" else 3
    assert claim["epsilon"] == pytest.approx(dp.epsilon(releases, parts, floor, 8))
    assert "choosing the cohorts" in claim["adversary"] and "1 colluding" in claim["adversary"]
    assert ("malicious" in claim["adversary"]) == (threat == MALICIOUS)
    assert res.privacy["noise"] == "secret" and res.privacy["row_dp"]["noise"] == 1.0
    assert RecConfig.from_json(cfg.to_json()) == cfg
