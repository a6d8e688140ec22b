"""Interaction inference against federated recommenders (FeSoG / FedGNN).

Adversary: the honest-but-curious server, on what it received in a round
(:class:`securefgl.algorithms.recommendation.aggregation.ServerView`); goal: which items did user u
rate (ground truth: u's training items). Scores per (user, item): ``"rows"`` (1 for every
item row in u's upload), ``"magnitude"`` (the L2 norm of the uploaded row: FeSoG's pseudo
rows tend to be smaller); under secure aggregation (``ckks`` / ``secagg`` / ``ideal``
views) only the cohort's per-row norms, the same for every user (a popularity prior).
Metrics, averaged over the round's users: ROC AUC over all items (ties ½) beside the AUC
of a public prior alone (each item's popularity among the users outside the round;
``leaks`` when the guess beats it by more than 0.05), the AUC among the user's
uploaded rows (real vs pseudo items; ½ = indistinguishable, and far below ½ distinguishes
them too), precision@k.
Against FedGNN's graph expansion: :func:`token_dictionary_attack` (the third party
colluding with a key holder: exact recovery) and :func:`frequency_attack` (the third party
with the server's popularity knowledge, no key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from attacks.base import DEFAULT_MARGIN
from protocols.wire import Payload
from securefgl.algorithms.recommendation.aggregation import ServerView
from securefgl.algorithms.recommendation.expansion import TOKEN_BYTES, item_tokens
from securefgl.data.rating_views import ClientViews

Score = Literal["rows", "magnitude"]


def auc_from_scores(scores: np.ndarray, positive: np.ndarray) -> float:
    """ROC AUC (Mann–Whitney, ties ½) of ``scores`` for the boolean labels ``positive``."""
    pos, n = int(positive.sum()), positive.size
    if pos == 0 or pos == n:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    ranks = np.empty(n)
    # average ranks for ties
    _, start, counts = np.unique(s, return_index=True, return_counts=True)
    avg = start + (counts + 1) / 2.0
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[positive].sum() - pos * (pos + 1) / 2.0) / (pos * (n - pos)))


def precision_at_k(
    scores: np.ndarray, positive: np.ndarray, k: int, rng: np.random.Generator
) -> float:
    """Precision of the top-k scores (ties broken at random)."""
    k = min(k, scores.size)
    jitter = rng.random(scores.size) * 1e-12
    top = np.argpartition(-(scores + jitter), k - 1)[:k]
    return float(positive[top].mean())


@dataclass
class InferenceResult:
    auc: float  # over all items
    auc_uploaded: float  # among the user's uploaded rows only: real vs pseudo (nan if none)
    precision_at_k: float
    k: int
    users: int
    view: str
    #: the AUC of a public prior alone: each item's popularity among the other users
    baseline_auc: float = float("nan")

    @property
    def leaks(self) -> bool:
        """The guess beats the popularity prior by more than the AUC margin."""
        return bool(self.auc - self.baseline_auc > DEFAULT_MARGIN)

    def as_dict(self) -> dict[str, float | int | str | bool]:
        return {
            "auc": self.auc,
            "baseline_auc": self.baseline_auc,
            "leaks": self.leaks,
            "auc_uploaded": self.auc_uploaded,
            "precision_at_k": self.precision_at_k,
            "k": self.k,
            "users": self.users,
            "view": self.view,
        }


def _user_scores(view: ServerView, score: Score, n_items: int) -> list[np.ndarray]:
    up = view.per_user
    out = []
    if up is not None:
        norms = (
            up.item_grad.norm(dim=1).numpy()
            if score == "magnitude"
            else np.ones(up.item_idx.numel())
        )
        slot = up.item_slot.numpy()
        idx = up.item_idx.numpy()
        order = np.argsort(slot, kind="stable")
        bounds = np.searchsorted(slot[order], np.arange(up.n + 1))
        for j in range(up.n):
            sel = order[bounds[j] : bounds[j + 1]]
            s = np.zeros(n_items)
            s[idx[sel]] = norms[sel] + (1.0 if score == "magnitude" else 0.0)
            out.append(s)
        return out
    sums = view.sums
    s = np.zeros(n_items)
    if sums is not None and sums.item_idx.numel():
        agg = sums.item_sum.norm(dim=1) if score == "magnitude" else sums.item_count
        s[sums.item_idx.numpy()] = torch.as_tensor(agg).double().numpy() + 1.0
    return [s] * len(view.users)


def interaction_inference(
    view: ServerView,
    views: ClientViews,
    score: Score = "magnitude",
    k: int = 10,
    seed: int = 0,
) -> InferenceResult:
    """Average per-user AUC / precision@k of the server's guess of each user's items."""
    rng = np.random.default_rng(seed)
    scores = _user_scores(view, score, views.n_items)
    aucs, precs, up_aucs, prior_aucs = [], [], [], []
    per_user = view.per_user is not None
    items = [views.view(int(u)).train_items for u in view.users]
    popularity = np.bincount(views.train.col, minlength=views.n_items).astype(np.float64)
    for own in items:  # the prior: the items' popularity among the users outside the round
        np.subtract.at(popularity, own, 1.0)
    for own, s in zip(items, scores, strict=True):
        truth = np.zeros(views.n_items, bool)
        truth[own] = True
        a = auc_from_scores(s, truth)
        if np.isfinite(a):
            aucs.append(a)
            precs.append(precision_at_k(s, truth, k, rng))
            prior_aucs.append(auc_from_scores(popularity, truth))
        if per_user:
            up = s > 0
            b = auc_from_scores(s[up], truth[up])
            if np.isfinite(b):
                up_aucs.append(b)

    def mean(x: list[float]) -> float:
        return float(np.mean(x)) if x else float("nan")

    kind = "per-user uploads" if per_user else "aggregate only"
    return InferenceResult(mean(aucs), mean(up_aucs), mean(precs), k, len(aucs), kind,
                           mean(prior_aucs))  # fmt: skip


def token_dictionary_attack(upload: Payload, key: bytes, n_items: int) -> np.ndarray:
    """Third party colluding with a key holder: item id of every uploaded token (−1 if none)."""
    table = item_tokens(key, np.arange(n_items))
    tv = np.ascontiguousarray(table).view(np.dtype((np.void, TOKEN_BYTES))).ravel()
    uv = np.ascontiguousarray(upload.array("tokens")).view(np.dtype((np.void, TOKEN_BYTES))).ravel()
    order = np.argsort(tv)
    pos = np.searchsorted(tv[order], uv)
    pos = np.minimum(pos, n_items - 1)
    hit = tv[order][pos] == uv
    return np.where(hit, order[pos], -1)


def frequency_attack(upload: Payload, item_popularity: np.ndarray) -> np.ndarray:
    """Third party + server without the key: map the i-th most frequent token to the i-th
    most popular item (popularity as the server learns it from aggregated row counts)."""
    tok = (
        np.ascontiguousarray(upload.array("tokens")).view(np.dtype((np.void, TOKEN_BYTES))).ravel()
    )
    uniq, inv, cnt = np.unique(tok, return_inverse=True, return_counts=True)
    tok_rank = np.empty(uniq.size, np.int64)
    tok_rank[np.argsort(-cnt, kind="stable")] = np.arange(uniq.size)
    items_by_pop = np.argsort(-np.asarray(item_popularity), kind="stable")
    guess = np.full(uniq.size, -1)
    m = min(uniq.size, items_by_pop.size)
    ok = tok_rank < m
    guess[ok] = items_by_pop[tok_rank[ok]]
    return guess[inv]
