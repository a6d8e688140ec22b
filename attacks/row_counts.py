"""What a secure aggregation's per-row counts tell FeSoG's server across rounds.

Adversary: the honest-but-curious server of a FeSoG run over a secure aggregation; it reads,
round by round, only what :class:`securefgl.algorithms.recommendation.aggregation.ServerView`
holds: the cohort's ids and the aggregate's rows with their counts (phase 1 of the secure
aggregation reveals the per-row counts, :func:`~securefgl.algorithms.recommendation.
aggregation.secure_support`). Both attacks are exact elimination across rounds, no learning.

**Social links** (:func:`link_count_attack`). FeSoG (Liu et al., ACM TIST 2022, §4) has
every user upload the rows of itself and its social neighbours, so with uniform averages
row v's count in a round is [v in the cohort] + #{cohort users linked to v}. Goal: which
pairs of users are linked (ground truth: the union of trust directions, FeSoG's
neighbourhood).

* **candidates**: (u, v) survives while row v has a non-zero count in every round u joined,
  and (links being symmetric) v's rows show u in every round v joined; a pair neither of
  whose users ever joined says nothing and is not scored;
* **confirmed**: a candidate (u, v) with a round where u joined and v's count (less v's own
  row) equals the number of v's candidates in that cohort: every one of them is a neighbour
  (repeated to a fixed point, as in group testing).

With exact counts every true link stays a candidate (recall 1 is a check of the view, not a
result); what the server learns is the candidates' precision and the confirmed links. The
baseline is the precision of guessing every scored pair (the link density). With weighted
averages (the counts are weight sums) only the support is used, so the attack is the same
or weaker there than the subset-sum decoding the family's README describes.

**Rated items** (:func:`interaction_elimination`). A user uploads every item it rated
(beside q random pseudo items) in every round it joins, so item i stays a candidate for u
while i is in the support of every round u joined. Ground truth: u's training items;
baseline: their density among the items. Pseudo items widen each round's support and defeat
the elimination, not the counts: :func:`count_correlation_auc` scores (u, i) by item i's
mean count in the rounds u joined less its mean in the other rounds (each of u's items adds
1 whenever u joins, the pseudo draws are the same in both), a per-user ROC AUC over all
items beside the AUC of the items' popularity among the other users (a public prior).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from attacks.interaction_inference import auc_from_scores
from securefgl.algorithms.recommendation.aggregation import AggregateSums, ServerView
from securefgl.data.rating_views import CSR, ClientViews


@dataclass
class LinkCountResult:
    rounds: int
    users_seen: int  # users who joined at least one observed round
    links: int  # true links with at least one endpoint seen (undirected)
    pairs_scored: int  # undirected pairs with at least one endpoint seen
    candidates: int
    candidate_precision: float
    candidate_recall: float  # 1.0 with exact counts (a check of the view)
    confirmed: int
    confirmed_correct: int
    baseline_precision: float  # the link density among the scored pairs

    @property
    def leaks(self) -> bool:
        """The server names links beyond guessing: confirmed links, or candidates at
        least twice as precise as the density."""
        return self.confirmed_correct > 0 or self.candidate_precision > 2 * self.baseline_precision

    def as_dict(self) -> dict[str, float | int | bool]:
        return {**asdict(self), "leaks": self.leaks}


Counts = Literal["users", "weights"]


def _sums(views: Sequence[ServerView]) -> list[AggregateSums]:
    """Each round's aggregate (refused where the view holds none)."""
    if not views:
        raise ValueError("the attack needs at least one round's view")
    for view in views:
        if view.sums is None:
            raise ValueError(
                f"round {view.round}: the view holds no sums ({view.aggregation}); the attack "
                "reads a secure aggregation's per-row counts (keep the views: keep_views)"
            )
    return [v.sums for v in views if v.sums is not None]


def _rows(per_round: list[np.ndarray], n_cols: int, values: list[np.ndarray] | None = None
          ) -> sp.csr_matrix:  # fmt: skip
    """[T, n_cols]: row t holds ``values[t]`` (default 1) at the columns ``per_round[t]``."""
    r = np.concatenate([np.full(c.size, t) for t, c in enumerate(per_round)])
    v = np.ones(r.size) if values is None else np.concatenate(values)
    m = sp.csr_matrix((v, (r, np.concatenate(per_round))), shape=(len(per_round), n_cols))
    m.eliminate_zeros()
    return m


def _cohorts(views: Sequence[ServerView], n_users: int) -> sp.csr_matrix:
    """X [T, n_users]: X[t, u] = 1 if u joined round t."""
    _sums(views)
    return _rows([np.unique(np.asarray(v.users, np.int64)) for v in views], n_users)


def _user_row_counts(views: Sequence[ServerView], n_users: int, counts: Counts) -> sp.csr_matrix:
    """C [T, n_users]: the number of round t's members that uploaded row v, v itself left out
    (0: none did). With weight-sum counts only presence is known, and a member's own row
    tells nothing (inf)."""
    idx, vals = [], []
    for view, sums in zip(views, _sums(views), strict=True):
        i = sums.user_idx.numpy().astype(np.int64)
        own = np.isin(i, np.asarray(view.users, np.int64))
        cnt = sums.user_count.double().numpy()
        # users: a member always uploads its own row; weights: present, uploaders unknown
        vals.append(np.rint(cnt) - own if counts == "users" else np.where(own, np.inf, 1.0))
        idx.append(i)
    return _rows(idx, n_users, vals)


def _matrix(csr: CSR, n_cols: int, rows: np.ndarray | None = None) -> sp.csr_matrix:
    """A :class:`CSR` of the client views as a 0/1 scipy matrix (only ``rows`` if given)."""
    n = csr.ptr.size - 1
    src = np.repeat(np.arange(n), np.diff(csr.ptr))
    keep = np.ones(src.size, bool) if rows is None else np.isin(src, rows)
    return _bool(sp.csr_matrix((np.ones(int(keep.sum())), (src[keep], csr.col[keep])),
                               shape=(n, n_cols)))  # fmt: skip


def _bool(m: sp.spmatrix) -> sp.csr_matrix:
    """A 0/1 float copy of m's non-zero pattern."""
    m = sp.csr_matrix(m, dtype=np.float64, copy=True)
    m.eliminate_zeros()
    m.data[:] = 1.0
    return m


def _where_equal(C: sp.csr_matrix, N: sp.csr_matrix) -> sp.csr_matrix:
    """0/1 [T, n]: the entries where row v has uploaders (C > 0) and C equals N."""
    where = _bool(C)
    unequal = _bool(C - N.multiply(where)).multiply(where)
    return _bool(where - unequal)


def link_count_attack(
    views: Sequence[ServerView], n_users: int, counts: Counts = "users", max_passes: int = 50
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The server's (candidates, confirmed) links, 0/1 [n_users, n_users] and symmetric,
    from the secure views of several rounds. ``counts``: ``"users"`` (FeSoG's uniform
    averages: each count is a number of cohort users) or ``"weights"`` (weighted averages:
    only the support is used)."""
    if counts not in ("users", "weights"):
        raise ValueError(f"counts must be 'users' or 'weights', got {counts!r}")
    X, C = _cohorts(views, n_users), _user_row_counts(views, n_users, counts)
    joined = np.asarray(X.sum(0)).ravel()
    # D[u, v]: row v had uploaders besides v in every round u joined
    present = (X.T @ _bool(C)).tocsr()
    present.setdiag(0)
    present.eliminate_zeros()
    coo = present.tocoo()
    keep = coo.data == joined[coo.row]
    D = sp.csr_matrix(
        (np.ones(int(keep.sum())), (coo.row[keep], coo.col[keep])), shape=(n_users,) * 2
    )
    # links are symmetric: both ends must agree, except an end never seen
    unseen = sp.diags((joined == 0).astype(np.float64))
    one_sided = D @ unseen
    cand = _bool(D.multiply(D.T) + one_sided + one_sided.T)
    confirmed = sp.csr_matrix((n_users, n_users))
    if counts == "weights":
        return cand, confirmed
    for _ in range(max_passes):  # peeling, as in group testing
        n_cand = (X @ cand).tocsr()  # [T, n]: v's candidates among round t's cohort
        n_conf = (X @ confirmed).tocsr()
        # every candidate in the cohort is a neighbour where the count says so
        sure = (X.T @ _where_equal(C, n_cand)).multiply(cand)
        # every neighbour in the cohort is confirmed: the other candidates are not
        full = X.T @ _where_equal(C, n_conf)
        absent = full.multiply(cand) - full.multiply(cand).multiply(_bool(sure + confirmed))
        new_conf = _bool(confirmed + sure + sure.T)
        new_cand = _bool(cand - _bool(absent + absent.T).multiply(cand))
        if (new_conf != confirmed).nnz == 0 and (new_cand != cand).nnz == 0:
            break
        confirmed, cand = new_conf, new_cand
    return cand, confirmed


def evaluate_link_counts(
    views: Sequence[ServerView], users: ClientViews, counts: Counts = "users"
) -> LinkCountResult:
    """Run :func:`link_count_attack` on the server's ``views`` and score it against the true
    links (``users``' social neighbourhoods: ground truth, not the adversary's)."""
    n = users.n_users
    truth = _matrix(users.social, n)
    truth = _bool(truth + truth.T)
    truth.setdiag(0)
    truth.eliminate_zeros()
    cand, confirmed = link_count_attack(views, n, counts)
    seen = np.asarray(_cohorts(views, n).sum(0)).ravel() > 0
    s = int(seen.sum())
    pairs = s * (s - 1) // 2 + s * (n - s)

    def scored(m: sp.spmatrix) -> sp.csr_matrix:
        """The upper triangle's pairs with at least one end seen."""
        m = sp.triu(m, k=1).tocsr()
        r, c = m.nonzero()
        keep = seen[r] | seen[c]
        return sp.csr_matrix((np.ones(int(keep.sum())), (r[keep], c[keep])), shape=(n, n))

    t, k, f = scored(truth), scored(cand), scored(confirmed)
    hit_k, hit_f = int(k.multiply(t).nnz), int(f.multiply(t).nnz)
    return LinkCountResult(
        rounds=len(views),
        users_seen=s,
        links=int(t.nnz),
        pairs_scored=pairs,
        candidates=int(k.nnz),
        candidate_precision=hit_k / k.nnz if k.nnz else float("nan"),
        candidate_recall=hit_k / t.nnz if t.nnz else float("nan"),
        confirmed=int(f.nnz),
        confirmed_correct=hit_f,
        baseline_precision=t.nnz / pairs if pairs else float("nan"),
    )


@dataclass
class InteractionEliminationResult:
    rounds: int
    users_seen: int
    rated: int  # (user, training item) pairs of the users seen
    candidates: int
    precision: float
    recall: float  # 1.0: a rated item is in every round's support its user joined
    candidates_per_user: float
    rated_per_user: float
    baseline_precision: float  # the rated pairs' density among all (user seen, item) pairs
    #: the precision of guessing, for each user, as many items as it has candidates, the
    #: most popular among the other users (a public prior: a noisy support keeps the popular
    #: items, whose precision is popularity, not a leak)
    popular_precision: float = float("nan")

    @property
    def leaks(self) -> bool:
        """The candidates are at least twice as precise as the density and as guessing the
        popular items."""
        popular = 0.0 if np.isnan(self.popular_precision) else self.popular_precision
        return self.precision > 2 * max(self.baseline_precision, popular)

    def as_dict(self) -> dict[str, float | int | bool]:
        return {**asdict(self), "leaks": self.leaks}


def interaction_elimination(
    views: Sequence[ServerView], n_users: int, n_items: int, batch: int = 256
) -> sp.csr_matrix:
    """0/1 [n_users, n_items]: item i stays a candidate for user u while it was in the item
    support of every round u joined (users who never joined have no row; ``batch`` users at
    a time bound the intermediate matrix)."""
    X = _cohorts(views, n_users)
    S = _rows([s.item_idx.numpy().astype(np.int64) for s in _sums(views)], n_items)
    joined = np.asarray(X.sum(0)).ravel()
    XT = X.T.tocsr()
    rows_k, cols_k = [], []
    for start in range(0, n_users, batch):
        present = (XT[start : start + batch] @ S).tocoo()
        keep = present.data == joined[start + present.row]
        rows_k.append(start + present.row[keep])
        cols_k.append(present.col[keep])
    r, c = np.concatenate(rows_k), np.concatenate(cols_k)
    return sp.csr_matrix((np.ones(r.size), (r, c)), shape=(n_users, n_items))


def evaluate_interaction_elimination(
    views: Sequence[ServerView], users: ClientViews
) -> InteractionEliminationResult:
    """Run :func:`interaction_elimination` and score it against the users' training items
    (ground truth, not the adversary's)."""
    n, m, train = users.n_users, users.n_items, users.train
    cand = interaction_elimination(views, n, m)
    seen = np.asarray(_cohorts(views, n).sum(0)).ravel() > 0
    truth = _matrix(train, m, np.flatnonzero(seen))
    s, hit = int(seen.sum()), int(cand.multiply(truth).nnz)
    per_user = np.diff(cand.indptr)
    return InteractionEliminationResult(
        rounds=len(views),
        users_seen=s,
        rated=int(truth.nnz),
        candidates=int(cand.nnz),
        precision=hit / cand.nnz if cand.nnz else float("nan"),
        recall=hit / truth.nnz if truth.nnz else float("nan"),
        candidates_per_user=cand.nnz / s if s else float("nan"),
        rated_per_user=truth.nnz / s if s else float("nan"),
        baseline_precision=truth.nnz / (s * m) if s else float("nan"),
        popular_precision=popular_precision(train, m, np.flatnonzero(per_user), per_user),
    )


def popular_precision(train: CSR, n_items: int, users: np.ndarray, k: np.ndarray) -> float:
    """Precision of guessing, for each of ``users``, its ``k[u]`` items most rated by the
    other users (ties by item id), pooled over the users."""
    popularity = np.bincount(train.col, minlength=n_items).astype(np.int64)
    order = np.lexsort((np.arange(n_items), -popularity))  # most popular first
    hits = guesses = 0
    for u in users:
        own = train.row(int(u))[0]
        prefix = order[: min(n_items, int(k[u]) + own.size)]  # own items only move down
        score = popularity[prefix] - np.isin(prefix, own)
        top = prefix[np.argsort(-score, kind="stable")[: int(k[u])]]
        hits += int(np.isin(top, own).sum())
        guesses += top.size
    return hits / guesses if guesses else float("nan")


def count_correlation_auc(
    views: Sequence[ServerView], users: ClientViews, sample: int | None = None, batch: int = 256
) -> tuple[float, float]:
    """(mean per-user AUC of the count-correlation scores, mean AUC of the popularity
    prior) over the users who joined some but not all rounds and have training items
    (``sample``: at most that many of them, a fixed random subset)."""
    n, m, train = users.n_users, users.n_items, users.train
    X, rounds = _cohorts(views, n), len(views)
    C = _rows([s.item_idx.numpy().astype(np.int64) for s in _sums(views)], m,
              [s.item_count.double().numpy() for s in _sums(views)]).toarray()  # fmt: skip
    joined = np.asarray(X.sum(0)).ravel()
    popularity = np.bincount(train.col, minlength=m).astype(np.float64)
    total = C.sum(0)
    ok = np.flatnonzero((joined > 0) & (joined < rounds) & (np.diff(train.ptr) > 0))
    if sample is not None and ok.size > sample:
        ok = np.sort(np.random.default_rng(0).choice(ok, sample, replace=False))
    aucs, priors = [], []
    for start in range(0, ok.size, batch):
        us = ok[start : start + batch]
        inside = (X[:, us].T @ C) / joined[us, None]  # [b, m]
        outside = (total[None, :] - inside * joined[us, None]) / (rounds - joined[us, None])
        for row, u in zip(inside - outside, us, strict=True):
            own = train.row(int(u))[0]
            truth = np.zeros(m, bool)
            truth[own] = True
            aucs.append(auc_from_scores(row, truth))
            prior = popularity.copy()
            prior[own] -= 1.0
            priors.append(auc_from_scores(prior, truth))
    if not aucs:
        return float("nan"), float("nan")
    return float(np.nanmean(aucs)), float(np.nanmean(priors))
