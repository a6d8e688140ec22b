"""The cross-round attacks on FeSoG's per-row counts under secure aggregation: social
links from the user rows, rated items from the item support."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attacks.row_counts import (
    count_correlation_auc,
    evaluate_interaction_elimination,
    evaluate_link_counts,
    interaction_elimination,
    link_count_attack,
    popular_precision,
)
from securefgl.algorithms.recommendation import fesog
from securefgl.algorithms.recommendation.aggregation import (
    AggregateSums,
    ServerView,
    aggregate_uploads,
)
from securefgl.data.rating_views import CSR, ClientViews
from securefgl.data.ratings import synthetic_ratings


@pytest.fixture(scope="module")
def views() -> ClientViews:
    return ClientViews.from_data(synthetic_ratings(n_users=60, n_items=80, per_user=6, n_trust=120))


def _secure_views(
    views: ClientViews, rounds: int, cohort: int, uniform: bool, seed: int = 0
) -> list[ServerView]:
    """What the server of a FeSoG run under the ideal secure sum sees, round by round (one
    fixed model state: the counts do not depend on it)."""
    state = fesog.init_fesog(views.n_users, views.n_items, 4, torch.Generator().manual_seed(0))
    cfg = fesog.FeSoGConfig(4, 2, uniform_averages=uniform)
    rng = np.random.default_rng(seed)
    out = []
    for r in range(rounds):
        users = np.sort(rng.choice(views.n_users, cohort, replace=False))
        up = fesog.local_gradients(state, views, users, cfg, rng)
        out.append(aggregate_uploads(up, "ideal", r, views.n_items, views.n_users)[1])
    return out


def test_uniform_counts_name_every_link_over_enough_rounds(views: ClientViews) -> None:
    res = evaluate_link_counts(_secure_views(views, 60, 8, uniform=True), views)
    assert res.users_seen == views.n_users
    assert res.candidate_recall == 1.0  # exact counts never eliminate a true link
    assert res.confirmed_correct == res.confirmed == res.links  # every link, no mistake
    assert res.leaks and res.baseline_precision < 0.1


def test_weight_sums_are_read_as_support_only(views: ClientViews) -> None:
    secure = _secure_views(views, 60, 8, uniform=False)
    res = evaluate_link_counts(secure, views, counts="weights")
    assert res.candidate_recall == 1.0 and res.confirmed == 0
    assert res.candidate_precision > 2 * res.baseline_precision


def test_one_round_names_no_link_for_sure_in_a_large_cohort(views: ClientViews) -> None:
    res = evaluate_link_counts(_secure_views(views, 1, 40, uniform=True), views)
    assert res.candidate_recall == 1.0
    assert res.confirmed_correct == res.confirmed


def test_views_without_sums_are_refused(views: ClientViews) -> None:
    plain = ServerView(0, "plain", np.arange(4), None, None)
    with pytest.raises(ValueError, match="holds no sums"):
        link_count_attack([plain], views.n_users)
    with pytest.raises(ValueError, match="at least one round"):
        link_count_attack([], views.n_users)
    with pytest.raises(ValueError, match="'users' or 'weights'"):
        link_count_attack(_secure_views(views, 1, 4, True), views.n_users, counts="sums")  # type: ignore[arg-type]


def _count_view(r: int, cohort: np.ndarray, adj: np.ndarray) -> ServerView:
    """A secure view whose user-row counts are exactly FeSoG's with uniform averages."""
    count = adj[cohort].sum(0) + np.isin(np.arange(adj.shape[0]), cohort)
    idx = np.flatnonzero(count)
    z = torch.zeros(0)
    user_count = torch.from_numpy(count[idx]).double()
    sums = AggregateSums(
        z.long(), z, z, torch.from_numpy(idx), z, user_count, {}, float(cohort.size)
    )
    return ServerView(r, "ideal", cohort, None, sums)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(4, 14),
    density=st.floats(0.05, 0.6),
    rounds=st.integers(1, 12),
    cohort=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_the_attack_is_sound_on_any_graph(
    n: int, density: float, rounds: int, cohort: int, seed: int
) -> None:
    """Candidates always hold every scored link and confirmed links are all true."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < density, 1)
    adj = (upper | upper.T).astype(np.int64)
    views = [_count_view(r, np.sort(rng.choice(n, min(cohort, n), replace=False)), adj)
             for r in range(rounds)]  # fmt: skip
    cand, confirmed = link_count_attack(views, n)
    seen = np.zeros(n, bool)
    for v in views:
        seen[v.users] = True
    scored = seen[:, None] | seen[None, :]
    truth = adj.astype(bool) & scored
    c, f = cand.toarray() > 0, confirmed.toarray() > 0
    assert not (truth & ~c).any()
    assert not (f & ~truth).any()
    assert (c == c.T).all() and (f == f.T).all()


def test_rated_items_stay_candidates_and_the_rest_thin_out_over_rounds(views: ClientViews) -> None:
    secure = _secure_views(views, 60, 8, uniform=True)
    early, late = (evaluate_interaction_elimination(secure[:k], views) for k in (2, 60))
    assert early.recall == late.recall == 1.0  # a rated item is uploaded whenever its user joins
    assert late.candidates_per_user < early.candidates_per_user
    assert late.leaks and late.precision > 5 * late.baseline_precision
    with pytest.raises(ValueError, match="at least one round"):
        interaction_elimination([], views.n_users, views.n_items)


def test_item_counts_rank_a_users_items_across_rounds(views: ClientViews) -> None:
    secure = _secure_views(views, 80, 8, uniform=True)
    auc, prior = count_correlation_auc(secure, views)
    assert auc > 0.8 and auc > prior + 0.1
    sampled, _ = count_correlation_auc(secure, views, sample=10)
    assert 0.5 < sampled <= 1.0
    one_round, _ = count_correlation_auc(secure[:1], views)  # no other round to compare
    assert np.isnan(one_round)


def test_the_popular_guess_takes_each_users_top_items_among_the_others() -> None:
    # items 0..4 rated by users 0..3: item 0 by all four, item 1 by three, item 2 by two
    rows = [[0, 1, 2], [0, 1], [0, 1, 3], [0, 2, 4]]
    user = np.repeat(np.arange(4), [len(r) for r in rows])
    items = np.concatenate(rows)
    train = CSR.build(user, items, np.ones(items.size), 4)
    k = np.array([1, 2, 0, 2])
    # user 0: among the others item 0 (3) leads -> hit; user 1: items 0 (3) and 1 (2) -> 2
    # hits; user 3: items 0 (3) and 1 (3) -> 1 hit (item 1 it did not rate); user 2 guesses none
    assert popular_precision(train, 5, np.array([0, 1, 2, 3]), k) == pytest.approx(4 / 5)
