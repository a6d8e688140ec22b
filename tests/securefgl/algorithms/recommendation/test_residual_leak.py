"""What the per-row counts still reveal across rounds under a secure aggregation, with
uniform averages too (the family's README, 'What the counts reveal'): a round's item-row
counts sum to the cohort's Σ w_u (w_u: the user's ratings + pseudo items, one item row each),
so rounds with different cohorts are a linear system in the users' weights; FeSoG's user-row
counts sum to the cohort's Σ (1 + #neighbours), or its size with own rows only. The trainer
says so on every secure run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from securefgl.algorithms.recommendation.aggregation import ServerView
from securefgl.algorithms.recommendation.row_dp import RowDPConfig
from securefgl.algorithms.recommendation.settings import aggregating
from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import synthetic_ratings

N_USERS, PSEUDO = 24, 3
CROSS_ROUND = "across rounds the server's item-row counts give each user's rating count"
LINKS = "across rounds the server's user-row counts name who links to whom"
WEIGHT_SUM = "the server learns each user row's weight sum"


@pytest.fixture(scope="module")
def views() -> ClientViews:
    """Users with different numbers of ratings (5 + u mod 11), so different weights."""
    data = synthetic_ratings(n_users=N_USERS, n_items=60, per_user=16, n_trust=50)
    keep = np.concatenate([np.arange(5 + u % 11) + 16 * u for u in range(N_USERS)])
    return ClientViews.from_data(replace(data, user=data.user[keep], item=data.item[keep],
                                         rating=data.rating[keep]))  # fmt: skip


def _weights(views: ClientViews, users: np.ndarray) -> np.ndarray:
    """w_u: the user's training ratings + its pseudo items (the item rows it uploads)."""
    return views.train.lengths(users) + PSEUDO


def _rounds(
    views: ClientViews, averages: str, aggregation: str, rounds: int, social_rows: str = "auto"
) -> list[ServerView]:
    cfg = RecConfig(method="fesog", rounds=rounds, users_per_round=6, pseudo_items=PSEUDO,
                    keep_views=rounds, averages=averages, social_rows=social_rows,
                    **aggregating(aggregation))  # fmt: skip
    with FedRecTrainer(views, cfg) as trainer:
        return [trainer.round(r) for r in range(rounds)]


@pytest.mark.parametrize(("averages", "social_rows", "aggregation", "rounds"),
                         [("auto", "auto", "ideal", 40), ("uniform", "neighbours", "secagg", 1),
                          ("auto", "own", "secagg", 1),
                          ("weighted", "neighbours", "ideal", 3)])  # fmt: skip
def test_a_rounds_item_counts_sum_to_the_cohorts_weight_whatever_the_averages(
    views: ClientViews, averages: str, social_rows: str, aggregation: str, rounds: int
) -> None:
    own = social_rows != "neighbours"  # auto: own rows only under a secure aggregation
    for view in _rounds(views, averages, aggregation, rounds, social_rows):
        assert view.sums is not None
        assert float(view.sums.item_count.sum()) == pytest.approx(
            _weights(views, view.users).sum(), abs=1e-3
        )
        neighbours = 0 if own else views.gather_social(view.users)[1].size
        if averages != "weighted":  # user-row counts: each user's own row (and its links)
            assert float(view.sums.user_count.sum()) == pytest.approx(
                view.users.size + neighbours, abs=1e-3
            )


def test_uniform_averages_leave_every_users_rating_count_recoverable_across_rounds(
    views: ClientViews,
) -> None:
    """The server solves the rounds' cohorts against their item-count totals."""
    rounds = _rounds(views, "auto", "ideal", 40)
    cohorts, totals = np.zeros((len(rounds), N_USERS)), np.zeros(len(rounds))
    for r, view in enumerate(rounds):
        assert view.sums is not None and view.sums.weight_sum == view.users.size  # uniform
        cohorts[r, view.users] = 1
        totals[r] = float(view.sums.item_count.sum())
    joined = cohorts.any(0)
    assert np.linalg.matrix_rank(cohorts[:, joined]) == joined.sum()
    solved = np.linalg.lstsq(cohorts[:, joined], totals, rcond=None)[0]
    truth = _weights(views, np.flatnonzero(joined))
    assert np.unique(truth).size > 5  # the users' weights differ
    np.testing.assert_array_equal(np.round(solved), truth)


@pytest.mark.parametrize(
    ("method", "averages", "social_rows", "aggregation", "cross_round", "weight_sum", "links"),
    [("fesog", "auto", "auto", "ideal", True, False, False),
     ("fesog", "auto", "auto", "ckks", True, False, False),
     ("fesog", "auto", "neighbours", "secagg", True, False, True),
     ("fesog", "uniform", "auto", "secagg+", True, False, False),
     ("fesog", "weighted", "neighbours", "ideal", True, True, True),
     ("fesog", "auto", "auto", "plain", False, False, False),
     ("fesog", "uniform", "neighbours", "plain", False, False, False),
     ("fedgnn", "auto", "auto", "ideal", True, False, False),
     ("fedgnn", "auto", "auto", "plain", False, False, False)],
)  # fmt: skip
def test_every_secure_run_warns_of_the_counts_across_rounds(
    views: ClientViews, caplog, method: str, averages: str, social_rows: str,
    aggregation: str, cross_round: bool, weight_sum: bool, links: bool,
) -> None:  # fmt: skip
    cfg = RecConfig(method=method, rounds=1, users_per_round=6, pseudo_items=PSEUDO,
                    averages=averages, social_rows=social_rows,
                    **aggregating(aggregation))  # fmt: skip
    with caplog.at_level("WARNING"), FedRecTrainer(views, cfg):
        pass
    assert (CROSS_ROUND in caplog.text) == cross_round
    assert (WEIGHT_SUM in caplog.text) == weight_sum
    assert (LINKS in caplog.text) == links


@pytest.mark.parametrize("method", ["fesog", "fedgnn"])
def test_a_row_dp_run_states_its_mechanism_not_the_cross_round_leak(
    views: ClientViews, caplog, method: str
) -> None:
    cfg = RecConfig(method=method, rounds=1, users_per_round=6, pseudo_items=PSEUDO,
                    row_dp=RowDPConfig(noise=1.0), **aggregating("ideal"))  # fmt: skip
    # the trainer's own logger: another test may have raised the package's level
    trainer_log = "securefgl.algorithms.recommendation.trainer"
    with caplog.at_level("INFO", logger=trainer_log), FedRecTrainer(views, cfg):
        pass
    assert CROSS_ROUND not in caplog.text and "with row DP (z = 1" in caplog.text
