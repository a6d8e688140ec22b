"""Naive baselines: what the adversary guesses WITHOUT the attack, and the leak margins.

An attack metric is reported beside its baseline (``advantage = value − baseline``,
:class:`attacks.base.AttackResult`). Baselines used here:

* chance: 0.5 for a ROC AUC over positives and negatives; the positive rate for the
  precision of a random guess;
* a heuristic computed from what the adversary already holds: the similarity of node
  features for link attacks (node attributes are prior knowledge in He et al., USENIX
  Security 2021; LinkTeller's adversary holds them, Wu et al., S&P 2022), common neighbours for
  structure reconstruction (Liben-Nowell & Kleinberg, JASIST 2007), the adversary's own
  mean feature or public feature frequencies for feature reconstruction;
  AUC baselines are ``max(0.5, heuristic)``.

Margins: ``1.96 ×`` the Hanley & McNeil (Radiology 1982) standard error for an AUC (at
least :data:`AUC_FLOOR`), a binomial 95 % half-width for a proportion (at least
:data:`attacks.base.DEFAULT_MARGIN`).
"""

from __future__ import annotations

import math

import numpy as np

from attacks.base import DEFAULT_MARGIN
from attacks.metrics import roc_auc, row_support_f1, rowwise_cosine

AUC_FLOOR = 0.02
CHANCE_AUC = 0.5


def auc_margin(auc: float, positives: int, negatives: int, floor: float = AUC_FLOOR) -> float:
    """``max(floor, 1.96 · SE)`` with the Hanley–McNeil standard error of ``auc``."""
    if positives < 1 or negatives < 1 or not math.isfinite(auc):
        return floor
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    var = auc * (1 - auc) + (positives - 1) * (q1 - auc**2) + (negatives - 1) * (q2 - auc**2)
    return max(floor, 1.96 * math.sqrt(max(var, 0.0) / (positives * negatives)))


def proportion_margin(p: float, n: int, floor: float = DEFAULT_MARGIN) -> float:
    """``max(floor, 1.96 · sqrt(p(1 − p)/n))`` (normal approximation)."""
    if n < 1 or not math.isfinite(p):
        return floor
    return max(floor, 1.96 * math.sqrt(max(p * (1 - p), 0.0) / n))


def chance_or(heuristic_auc: float) -> float:
    """The better of chance (0.5) and a heuristic's AUC (NaN → 0.5)."""
    return CHANCE_AUC if not math.isfinite(heuristic_auc) else max(CHANCE_AUC, heuristic_auc)


def heuristic_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """:func:`chance_or` of ``roc_auc(scores, labels)``."""
    return chance_or(roc_auc(scores, labels))


def random_set_guess(predicted: int, positives: int, total: int) -> dict[str, float]:
    """Expected precision / recall / Jaccard of ``predicted`` items drawn at random from
    ``total`` of which ``positives`` are true (a guess as large as the attack's)."""
    total = max(total, 1)
    tp = predicted * positives / total
    return {
        "precision": positives / total,
        "recall": min(1.0, predicted / total),
        "jaccard": tp / max(predicted + positives - tp, 1e-300),
    }


def top_m(prior: np.ndarray, m: int) -> np.ndarray:
    """Boolean mask of the ``m`` largest entries of ``prior`` (ties: lower index first)."""
    prior = np.asarray(prior, np.float64)
    out = np.zeros(prior.size, bool)
    m = int(min(max(m, 0), prior.size))
    if m:
        out[np.argsort(-prior, kind="stable")[:m]] = True
    return out


def mean_row_guess(prior_rows: np.ndarray, true_rows: np.ndarray) -> dict[str, float]:
    """Guess every unknown row as the mean of ``prior_rows`` (the adversary's own or
    public feature rows); its support guess is the mean's top-m entries, m the prior
    rows' mean number of non-zeros. Metrics named as the feature attacks name theirs."""
    prior_rows = np.asarray(prior_rows, np.float64)
    true_rows = np.asarray(true_rows, np.float64)
    k, d = true_rows.shape
    mean = prior_rows.mean(axis=0) if len(prior_rows) else np.zeros(d)
    m = int(round(float((prior_rows != 0).sum(axis=1).mean()))) if len(prior_rows) else 0
    guess = np.broadcast_to(mean, (k, d))
    sup_guess = np.broadcast_to(top_m(mean, m), (k, d))
    sup = true_rows != 0
    tp = int((sup_guess & sup).sum())
    return {
        "cosine": float(rowwise_cosine(guess, true_rows).mean()) if k else float("nan"),
        "mse": float(((guess - true_rows) ** 2).mean()) if k else float("nan"),
        "exact_fraction": float((sup_guess == sup).all(axis=1).mean()) if k else float("nan"),
        "precision": tp / max(int(sup_guess.sum()), 1),
        "recall": tp / max(int(sup.sum()), 1),
        "row_support_f1": float(row_support_f1(sup_guess, sup).mean()) if k else float("nan"),
    }


def cosine_similarity_matrix(x: np.ndarray) -> np.ndarray:
    """``S[a, b] = cos(x_a, x_b)`` (0 for zero rows)."""
    x = np.asarray(x, np.float64)
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    u = np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)
    return u @ u.T
