"""The experiment's protocol section reaches the recommendation transport, and fields the
task cannot honour are refused rather than ignored."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from protocols.settings import ProtocolSettings
from securefgl.algorithms.recommendation import fesog
from securefgl.algorithms.recommendation.aggregation import (
    aggregate_uploads,
    plain_sums,
    users_transport,
)
from securefgl.algorithms.recommendation.settings import RecConfig
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import synthetic_ratings


def _config(**protocol: object) -> ExperimentConfig:
    return ExperimentConfig(
        task="recommendation", dataset="FilmTrust", protocol=ProtocolSettings(**protocol)
    )


def test_threat_model_and_threshold_reach_the_users_secure_aggregation() -> None:
    config = _config(stack=["secagg+"], threat_model="malicious", secagg_threshold=0.75,
                     secagg_k=4)  # fmt: skip
    options = RecConfig.from_experiment(config, "fesog", 0).transport_options()
    proto = users_transport("secagg+", "test", options)
    assert proto.threat_model == "malicious" and proto.threshold == 0.75 and proto.k == 4


def test_the_masked_ring_options_reach_the_users_secure_aggregation() -> None:
    config = _config(stack=["secagg+"], secagg_value_bound=1000.0, secagg_ring_bits=64,
                     secagg_precision_bits=16)  # fmt: skip
    options = RecConfig.from_experiment(config, "fesog", 0).transport_options()
    codec = users_transport("secagg+", "test", options).config_for(256).codec
    assert (codec.word_bits, codec.bound, codec.frac_bits) == (64, 1000.0, 45)
    default = RecConfig.from_experiment(_config(stack=["secagg+"]), "fesog", 0)
    codec = users_transport("secagg+", "test", default.transport_options()).config_for(256).codec
    assert (codec.word_bits, codec.bound, codec.frac_bits) == (64, None, 24)


def test_malicious_secagg_sums_equal_the_plain_sums() -> None:
    views = ClientViews.from_data(synthetic_ratings(n_users=30, n_items=25))
    state = fesog.init_fesog(views.n_users, views.n_items, 4, torch.Generator().manual_seed(0))
    up = fesog.local_gradients(
        state, views, np.arange(6), fesog.FeSoGConfig(4, 2), np.random.default_rng(0)
    )
    sums, _ = aggregate_uploads(
        up, "secagg", 0, views.n_items, views.n_users, {"threat_model": "malicious"}
    )
    expected = plain_sums(up)
    torch.testing.assert_close(sums.item_sum, expected.item_sum.double(), atol=1e-4, rtol=0,
                               check_dtype=False)  # fmt: skip


@pytest.mark.parametrize("field", ["dp_noise", "dp_clip", "dp_colluding_clients"])
def test_dp_mechanism_fields_are_refused(field: str) -> None:
    value = {"dp_noise": 2.0, "dp_clip": 0.5, "dp_colluding_clients": 1}[field]
    with pytest.raises((ConfigError, ValueError), match=field):
        _config(**{field: value})


@pytest.mark.parametrize("field", ["ldp_clip", "ldp_lambda", "item_std"])
@pytest.mark.parametrize("value", [float("inf"), 0.0, 1e-320])
def test_scales_must_be_finite_and_positive(field: str, value: float) -> None:
    from securefgl.algorithms.recommendation.settings import RecommendationSettings

    with pytest.raises(ValueError, match=field):
        RecommendationSettings(**{field: value})


def test_a_budget_that_overflows_is_refused() -> None:
    from securefgl.algorithms.recommendation.settings import RecommendationSettings

    with pytest.raises(ValueError, match="overflows"):
        RecommendationSettings(ldp_clip=1e300, ldp_lambda=1e-300)


def test_the_stack_refuses_settings_it_would_not_read() -> None:
    from securefgl.algorithms.recommendation.runner import run_recommendation

    config = _config(stack=["ckks"], secagg_threshold=0.9)
    with pytest.raises(ConfigError, match="would ignore secagg_threshold"):
        run_recommendation(config)


def test_the_cohort_and_threshold_are_checked_against_the_users_of_a_round() -> None:
    ok = ExperimentConfig(task="recommendation", dataset="FilmTrust",
                          recommendation={"users_per_round": 64},
                          protocol=ProtocolSettings(stack=["secagg"], min_cohort=20))  # fmt: skip
    assert ok.resolved()["protocol"]["min_cohort_enforced"] == 20  # not the node task's clients
    for protocol, message in (({"min_cohort": 9}, "exceeds the 8 clients"),
                              ({"secagg_threshold": 3}, "at most half of the 8")):  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            ExperimentConfig(task="recommendation", dataset="FilmTrust",
                             recommendation={"users_per_round": 8},
                             protocol=ProtocolSettings(stack=["secagg"], **protocol))  # fmt: skip


def test_more_pseudo_items_than_a_user_has_unrated_is_a_configuration_error() -> None:
    from securefgl.algorithms.recommendation.trainer import FedRecTrainer
    from securefgl.data.rating_views import ClientViews
    from securefgl.data.ratings import synthetic_ratings

    views = ClientViews.from_data(synthetic_ratings(n_users=20, n_items=30, seed=0), seed=0)
    with pytest.raises(ConfigError, match="pseudo_items = 30: a user who rated"):
        FedRecTrainer(views, RecConfig(method="fedgnn", rounds=1, users_per_round=4,
                                       pseudo_items=30))  # fmt: skip


def test_fedgnns_own_settings_set_for_fesog_are_named(caplog) -> None:
    config = ExperimentConfig(task="recommendation", dataset="FilmTrust",
                              recommendation={"arch": "star", "loss": "sse"})  # fmt: skip
    with caplog.at_level("WARNING"):
        RecConfig.from_experiment(config, "fedgnn", 0)
        assert not caplog.text
        RecConfig.from_experiment(config, "fesog", 0)
    assert "fesog does not read arch, loss" in caplog.text


def test_a_malicious_server_over_plain_aggregation_is_refused() -> None:
    with pytest.raises(ConfigError, match="nothing to sign"):
        _config(threat_model="malicious")
    _config(stack=["secagg"], threat_model="malicious")
