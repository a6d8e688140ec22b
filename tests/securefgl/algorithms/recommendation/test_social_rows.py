"""FeSoG's user rows: its own and its neighbours' (the paper) or its own only, which takes
the links out of a secure aggregation's per-row counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.row_counts import evaluate_link_counts
from protocols.settings import ProtocolSettings
from securefgl.algorithms.recommendation.settings import aggregating
from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import synthetic_ratings
from tests.securefgl.algorithms.recommendation.fesog_uploads import fesog_uploads

COHORT = np.array([2, 3, 7, 11, 12, 30, 41])


@pytest.fixture(scope="module")
def views() -> ClientViews:
    return ClientViews.from_data(synthetic_ratings(n_users=60, n_items=80, per_user=6, n_trust=150))


def test_own_rows_upload_each_users_row_and_nothing_else_changes(views: ClientViews) -> None:
    both = fesog_uploads(views, COHORT, neighbour_rows=True)
    own = fesog_uploads(views, COHORT, neighbour_rows=False)
    assert own.user_slot.tolist() == list(range(COHORT.size))
    assert own.user_idx.tolist() == COHORT.tolist()
    assert both.user_idx.numel() > own.user_idx.numel()  # the cohort has social links
    # the own rows' gradients are the ones FeSoG uploads for them, and every other part of
    # the upload is FeSoG's (the neighbours' embeddings are constants, not cut from the model)
    own_part = both.user_idx.numel() - COHORT.size
    torch.testing.assert_close(own.user_grad, both.user_grad[own_part:])
    torch.testing.assert_close(own.item_grad, both.item_grad)
    for k in both.model:
        torch.testing.assert_close(own.model[k], both.model[k])


@pytest.mark.parametrize("rows", ["neighbours", "auto"])
def test_the_link_attack_names_links_only_from_neighbour_rows(
    views: ClientViews, rows: str
) -> None:
    cfg = RecConfig(method="fesog", social_rows=rows, users_per_round=8, rounds=40,
                    keep_views=40, pseudo_items=2, **aggregating("ideal"))  # fmt: skip
    with FedRecTrainer(views, cfg) as tr:
        for r in range(cfg.rounds):
            tr.round(r)
        res = evaluate_link_counts(tr.server_views, views)
    if rows == "neighbours":
        assert res.leaks and res.confirmed_correct == res.confirmed > res.links // 2
    else:  # own rows: every row count is the member itself, nothing to eliminate or confirm
        assert not res.leaks and res.confirmed == 0


def test_social_rows_is_fesogs_option_and_reaches_the_run() -> None:
    with pytest.raises(ConfigError, match="FeSoG's option"):
        RecConfig(method="fedgnn", social_rows="own")
    with pytest.raises(ConfigError, match="unknown social_rows"):
        RecConfig(method="fesog", social_rows="none")
    config = ExperimentConfig(task="recommendation", dataset="FilmTrust",
                              recommendation={"social_rows": "own"},
                              protocol=ProtocolSettings(stack=["secagg+"]))  # fmt: skip
    assert RecConfig.from_experiment(config, "fesog", 0).social_rows == "own"
    assert RecConfig.from_experiment(config, "fedgnn", 0).social_rows == "auto"


@pytest.mark.parametrize(
    ("social_rows", "aggregation", "own"),
    [("auto", "plain", False), ("auto", "ideal", True), ("auto", "secagg+", True),
     ("auto", "ckks", True), ("neighbours", "secagg", False), ("own", "plain", True)],
)  # fmt: skip
def test_auto_uploads_own_rows_only_under_a_secure_aggregation(
    social_rows: str, aggregation: str, own: bool
) -> None:
    cfg = RecConfig(method="fesog", social_rows=social_rows, **aggregating(aggregation))
    assert cfg.own_user_rows is own


@pytest.mark.parametrize(("aggregation", "recorded"), [("plain", "neighbours"), ("ideal", "own")])
def test_a_fesog_result_records_its_user_rows(
    views: ClientViews, aggregation: str, recorded: str
) -> None:
    cfg = RecConfig(method="fesog", rounds=1, eval_every=1, users_per_round=8, pseudo_items=2,
                    **aggregating(aggregation))  # fmt: skip
    with FedRecTrainer(views, cfg) as trainer:
        assert trainer.run().privacy["social_rows"] == recorded
