"""What FED-PUB's functional embeddings tell the server (Baek et al., ICML 2023, §4.1).

FED-PUB argues that h̃_i (client i's mean output on a public random graph) "maintains
privacy" because it is computed on no real data. Adversary: the honest-but-curious server,
reading only the h̃_i it received (every round: the audit keeps ``fedpub/embedding``) and
the similarity matrix S it forms from them; under ``embedding = "gaussian"`` each h̃_i is
clipped and noised (ε in the run's privacy report). Since h̃_i changes slowly and its noise
is fresh every round, the server averages the last half of the rounds it kept (the
accountant charges every release, so this stays within the stated ε).

* **Community** (headline ``community_auc``): which clients share a community, i.e. hold
  similar label distributions. Truth: the cosine of two clients' label histograms (all
  their nodes), a pair is positive above the median. Score: S_ij. Baseline: chance (0.5);
  margin: 1.96 × the Hanley–McNeil standard error. ``community_spearman`` is kept beside.
* **Label distribution** (``label_tv``, lower is better): the server colludes with half of
  the clients (their histograms are known) and predicts each other client's histogram as
  the softmax(τ'·S)-weighted mix of the colluders' (τ' picked by leave-one-out among the
  colluders). Baseline: the colluders' mean histogram (their knowledge without h̃).
  Averaged over 40 random halves; margin 0.02 (total-variation units).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from attacks.base import SERVER, AttackResult, not_applicable
from attacks.metrics import roc_auc
from attacks.naive import CHANCE_AUC, auc_margin
from attacks.simulation import AuditRun
from securefgl.algorithms.fedpub.parties import TAG_EMBEDDING

NAME = "fedpub_embedding_inference"
TAUS = (1.0, 3.0, 10.0, 30.0, 100.0)
SPLITS = 40
TV_MARGIN = 0.02


def received_embeddings(run: AuditRun) -> tuple[np.ndarray, list[int]] | None:
    """The server's h̃ (clients × d, in view order) averaged over the last half of the
    rounds whose payloads were kept, and those rounds; None if some client is missing."""
    ids = [f"client-{v.client_id}" for v in run.views]
    by_round: dict[int, dict[str, np.ndarray]] = {}
    for e in run.view(SERVER).entries:
        if e.tag == TAG_EMBEDDING and e.data is not None:
            by_round.setdefault(e.round, {})[e.sender] = e.payload().array("h")
    rounds = sorted(r for r, got in by_round.items() if set(got) >= set(ids))
    if not rounds:
        return None
    used = rounds[len(rounds) // 2 :]
    h = np.mean([np.stack([by_round[r][c] for c in ids]) for r in used], axis=0)
    return h, used


def cosine_matrix(h: np.ndarray) -> np.ndarray:
    u = h / np.maximum(np.linalg.norm(h, axis=1, keepdims=True), 1e-12)
    return u @ u.T


def label_histograms(run: AuditRun) -> np.ndarray:
    c = run.views[0].num_classes
    hist = np.stack([np.bincount(v.y.numpy(), minlength=c) for v in run.views]).astype(float)
    return hist / np.maximum(hist.sum(1, keepdims=True), 1)


def _mix(s: np.ndarray, known: np.ndarray, tau: float) -> np.ndarray:
    z = np.exp(tau * (s - s.max(1, keepdims=True)))
    return (z / z.sum(1, keepdims=True)) @ known


def _tv(a: np.ndarray, b: np.ndarray) -> float:
    return float(0.5 * np.abs(a - b).sum(1).mean())


def label_inference(s: np.ndarray, truth: np.ndarray, splits: int = SPLITS,
                    seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """(attack TV, baseline TV), mean over random colluding halves."""
    k = len(truth)
    rng = np.random.default_rng(seed)
    att, base = [], []
    for _ in range(splits):
        perm = rng.permutation(k)
        anchors, targets = perm[: k // 2], perm[k // 2 :]
        loo = []  # leave-one-out among the colluders picks τ'
        for tau in TAUS:
            errs = []
            for a in range(len(anchors)):
                rest = np.delete(anchors, a)
                pred = _mix(s[np.ix_(anchors[[a]], rest)], truth[rest], tau)
                errs.append(_tv(pred, truth[anchors[[a]]]))
            loo.append(np.mean(errs))
        tau = TAUS[int(np.argmin(loo))]
        att.append(_tv(_mix(s[np.ix_(targets, anchors)], truth[anchors], tau), truth[targets]))
        base.append(_tv(np.repeat(truth[anchors].mean(0, keepdims=True), len(targets), 0),
                        truth[targets]))  # fmt: skip
    return float(np.mean(att)), float(np.mean(base))


def fedpub_embedding_inference(run: AuditRun) -> AttackResult:
    got = received_embeddings(run)
    if got is None:
        return not_applicable(NAME, SERVER, "no functional embeddings reached the server")
    h, rounds = got
    k = h.shape[0]
    if k < 4:
        return not_applicable(NAME, SERVER, "needs at least 4 clients")
    s = cosine_matrix(h)
    truth = label_histograms(run)
    t = cosine_matrix(truth)
    iu = np.triu_indices(k, 1)
    pos = t[iu] > np.median(t[iu])
    auc = roc_auc(s[iu], pos)
    rho = float(spearmanr(s[iu], t[iu]).statistic)
    tv, tv_base = label_inference(s, truth)
    result = AttackResult(NAME, SERVER, {"community_auc": auc, "community_spearman": rho,
                                         "label_tv": tv}, "community_auc")  # fmt: skip
    result.baselines.update(community_auc=CHANCE_AUC, label_tv=tv_base)
    result.margins.update(community_auc=auc_margin(auc, int(pos.sum()), int((~pos).sum())),
                          label_tv=TV_MARGIN)  # fmt: skip
    privacy = run.result.privacy
    result.details.update(clients=k, rounds_averaged=len(rounds),
                          embedding_epsilon=privacy.get("embedding_epsilon"),
                          embedding_delta=privacy.get("embedding_delta"))  # fmt: skip
    return result
