"""FeSoG's averages: weighted by w_u (its code) or uniform (the default under a secure
aggregation, whose per-row weight sums would otherwise name who links to whom in a single
round): the counts and sums each gives, in the clear and under the protocol; the setting on
its way from the experiment to the run, its checkpoint and its result."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from protocols.settings import ProtocolSettings
from securefgl.algorithms.recommendation.aggregation import (
    aggregate_uploads,
    plain_sums,
    secure_support,
    support_indicators,
)
from securefgl.algorithms.recommendation.settings import aggregating
from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
from securefgl.algorithms.recommendation.uploads import Uploads, from_payloads, to_payload
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import synthetic_ratings
from tests.securefgl.algorithms.recommendation.fesog_uploads import fesog_uploads

COHORT = np.array([1, 5, 8, 11, 17, 23])


@pytest.fixture(scope="module")
def views() -> ClientViews:
    return ClientViews.from_data(synthetic_ratings(n_users=120, n_items=200, per_user=12))


def _uploaders_per_user_row(up: Uploads) -> torch.Tensor:
    """How many cohort users upload each user row (sorted by row id)."""
    pairs = torch.unique(torch.stack([up.user_slot, up.user_idx]), dim=1)
    return torch.unique(pairs[1], return_counts=True)[1].float()


@pytest.mark.parametrize(
    ("averages", "aggregation", "uniform"),
    [("auto", "plain", False), ("auto", "ideal", True), ("auto", "secagg+", True),
     ("weighted", "secagg", False), ("uniform", "plain", True)],
)  # fmt: skip
def test_auto_averages_uniformly_only_under_a_secure_aggregation(
    averages: str, aggregation: str, uniform: bool
) -> None:
    cfg = RecConfig(method="fesog", averages=averages, **aggregating(aggregation))
    assert cfg.uniform_averages is uniform


def test_averages_is_fesogs_option() -> None:
    with pytest.raises(ConfigError, match="FeSoG's option"):
        RecConfig(method="fedgnn", averages="uniform")
    with pytest.raises(ConfigError, match="unknown averages"):
        RecConfig(method="fesog", averages="mean")


def test_uniform_counts_are_numbers_of_users_and_weighted_ones_weight_sums(
    views: ClientViews,
) -> None:
    """Under a secure aggregation the server learns the counts: uniform, each user row's is
    the number of cohort users uploading it and the weight total the cohort's size; weighted
    (FeSoG's aggregator), they are sums of the users' w_u (the documented leak)."""
    uniform, weighted = (fesog_uploads(views, COHORT, 8, u) for u in (True, False))
    assert not torch.equal(weighted.weight, torch.ones(COHORT.size))  # distinct w_u
    u_sums, w_sums = plain_sums(uniform), plain_sums(weighted)
    torch.testing.assert_close(u_sums.user_count, _uploaders_per_user_row(uniform))
    assert u_sums.weight_sum == COHORT.size
    assert w_sums.weight_sum == float(weighted.weight.sum())
    assert not torch.equal(w_sums.user_count, _uploaders_per_user_row(weighted))
    # item rows keep FeSoG's w_u inside their sums either way; counts are numbers of users
    torch.testing.assert_close(u_sums.item_sum, w_sums.item_sum)
    torch.testing.assert_close(u_sums.item_count, w_sums.item_count)
    # uniform: the user rows and the model are plain means of the users' gradients
    slot_rows = uniform.user_idx == u_sums.user_idx[0]
    torch.testing.assert_close(u_sums.user_sum[0], uniform.user_grad[slot_rows].sum(0))


def test_uniform_averages_travel_and_hold_under_the_protocol(views: ClientViews) -> None:
    up = from_payloads([to_payload(fesog_uploads(views, COHORT, 8, True))])
    assert torch.equal(up.averaging_weight(), torch.ones(COHORT.size))
    plain = plain_sums(up)
    enc, _ = aggregate_uploads(up, "secagg", 0, views.n_items, views.n_users)
    torch.testing.assert_close(enc.user_count, plain.user_count)
    torch.testing.assert_close(enc.user_sum, plain.user_sum, rtol=1e-6, atol=1e-5)
    assert enc.weight_sum == pytest.approx(COHORT.size, abs=1e-4)


@pytest.mark.parametrize(("aggregation", "cohort_total"), [("ideal", True), ("plain", False)])
def test_a_secure_run_sends_uniform_averages(
    views: ClientViews, aggregation: str, cohort_total: bool
) -> None:
    """The server's weight total is the cohort's size under a secure aggregation (auto), the
    users' weight sum in the clear."""
    cfg = RecConfig(method="fesog", rounds=1, users_per_round=16, keep_views=1,
                    **aggregating(aggregation))  # fmt: skip
    with FedRecTrainer(views, cfg) as trainer:
        view = trainer.round(0)
    sums = view.sums if view.per_user is None else plain_sums(view.per_user)
    assert sums is not None
    assert (sums.weight_sum == view.users.size) is cohort_total


@pytest.mark.parametrize(("method", "averages", "aggregation", "warned"),
                         [("fesog", "weighted", "ideal", True), ("fesog", "auto", "ideal", False),
                          ("fesog", "weighted", "plain", False),
                          ("fedgnn", "auto", "ideal", False)])  # fmt: skip
def test_weighted_averages_under_secure_sums_are_named(
    views: ClientViews, caplog, method: str, averages: str, aggregation: str, warned: bool
) -> None:
    cfg = RecConfig(method=method, rounds=1, users_per_round=8, averages=averages,
                    **aggregating(aggregation))  # fmt: skip
    with caplog.at_level("WARNING"), FedRecTrainer(views, cfg):
        pass
    assert ("the server learns each user row's weight sum" in caplog.text) == warned


@pytest.mark.parametrize("uniform", [True, False])
def test_the_support_phase_counts_user_rows_by_the_averaging_weight(
    views: ClientViews, uniform: bool
) -> None:
    """Phase 1's user-row counts are what the server learns under a real protocol: numbers
    of cohort users with uniform averages, weight sums Σ w_u with weighted ones."""
    up = fesog_uploads(views, COHORT, 8, uniform)
    X = support_indicators(up, views.n_items, views.n_users)
    user_part = torch.from_numpy(X[:, views.n_items :])
    expected = up.averaging_weight().double().unsqueeze(1).expand_as(user_part)
    assert torch.equal(user_part[user_part != 0], expected[user_part != 0])
    _, _, ui, ucnt = secure_support(up, "secagg", 0, views.n_items, views.n_users)
    sums = plain_sums(up)
    assert torch.equal(ui, sums.user_idx)
    torch.testing.assert_close(ucnt, sums.user_count, rtol=0, atol=1e-4)
    if uniform:
        torch.testing.assert_close(ucnt, _uploaders_per_user_row(up), rtol=0, atol=1e-4)


@pytest.mark.parametrize("uniform", [True, False])
def test_model_sums_weigh_each_user_by_its_averaging_weight(
    views: ClientViews, uniform: bool
) -> None:
    """The model parameters' sums are Σ_u a_u g_u (a_u = 1 uniform, w_u weighted), in the
    clear and under the protocol alike."""
    up = fesog_uploads(views, COHORT, 8, uniform)
    a = torch.ones(COHORT.size) if uniform else up.weight
    sums = plain_sums(up)
    enc, _ = aggregate_uploads(up, "secagg", 0, views.n_items, views.n_users)
    for k, g in up.model.items():
        expected = (g * a.view(-1, *([1] * (g.dim() - 1)))).sum(0)
        torch.testing.assert_close(sums.model_sum[k], expected)
        torch.testing.assert_close(enc.model_sum[k], expected, rtol=1e-5, atol=1e-5)
    assert enc.weight_sum == pytest.approx(float(a.sum()), abs=1e-4)


@pytest.mark.parametrize(("averages", "stack", "uniform"),
                         [("weighted", ["secagg+"], False), ("uniform", [], True),
                          ("auto", ["secagg+"], True), ("auto", [], False)])  # fmt: skip
def test_the_experiments_averages_reach_the_run(averages: str, stack: list[str], uniform: bool):
    config = ExperimentConfig(task="recommendation", dataset="FilmTrust",
                              protocol=ProtocolSettings(stack=stack),
                              recommendation={"averages": averages})  # fmt: skip
    cfg = RecConfig.from_experiment(config, "fesog", 0)
    assert cfg.averages == averages and cfg.uniform_averages is uniform


@pytest.mark.parametrize(("saved", "resumed"), [("weighted", "auto"), ("auto", "weighted"),
                                                ("uniform", "weighted")])  # fmt: skip
def test_a_resumed_run_refuses_other_averages(
    views: ClientViews, tmp_path, saved: str, resumed: str
) -> None:
    """A checkpoint's averages hold for the rest of its run: another setting is refused,
    not switched to silently halfway through."""
    cfg = RecConfig(method="fesog", rounds=2, users_per_round=8, averages=saved,
                    **aggregating("ideal"))  # fmt: skip
    with FedRecTrainer(views, cfg) as trainer:
        trainer.save_checkpoint(tmp_path, {"round": 0})
    with FedRecTrainer(views, replace(cfg, rounds=4)) as trainer:  # rounds may change
        assert trainer.load_checkpoint(tmp_path) == {"round": 0}
    changed = f"another configuration \\(averages '{saved}' → '{resumed}'\\)"
    other = FedRecTrainer(views, replace(cfg, averages=resumed))
    with other, pytest.raises(ConfigError, match=changed):
        other.load_checkpoint(tmp_path)


@pytest.mark.parametrize(("averages", "aggregation", "recorded"),
                         [("auto", "plain", "weighted"), ("auto", "ideal", "uniform"),
                          ("weighted", "ideal", "weighted"),
                          ("uniform", "plain", "uniform")])  # fmt: skip
def test_a_fesog_result_records_its_averages(
    views: ClientViews, averages: str, aggregation: str, recorded: str
) -> None:
    cfg = RecConfig(method="fesog", rounds=1, eval_every=1, users_per_round=8,
                    averages=averages, **aggregating(aggregation))  # fmt: skip
    with FedRecTrainer(views, cfg) as trainer:
        assert trainer.run().privacy["averages"] == recorded


def test_a_fedgnn_result_records_no_averages(views: ClientViews) -> None:
    cfg = RecConfig(method="fedgnn", rounds=1, eval_every=1, users_per_round=8, pseudo_items=2)
    with FedRecTrainer(views, cfg) as trainer:
        assert "averages" not in trainer.run().privacy
