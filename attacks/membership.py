"""Node membership inference against the released model (threshold attack).

Adversary: the model holder, querying posteriors of nodes on a deployment and knowing
their labels (He et al., "Node-Level Membership Inference Attacks Against Graph Neural
Networks", 2021, arXiv 2102.05429; metric-based attack of Salem et al. 2019 / Yeom et al.
2018). Members are the deployment's training nodes, non-members its test nodes. Signals:
``confidence`` = posterior of the true label (headline), ``max_posterior`` (label-free),
``neg_entropy``. Metrics: ROC AUC and TPR at 1 % FPR (Carlini et al. 2022).

Deviation: threshold attack only (no shadow model: the threshold-free AUC upper-bounds a
threshold chosen on shadow data, so it is the stronger report of this signal); 2-hop
queries (the deployment answers with the node's neighbourhood, as served). Also on
FedStruct's deployments (:mod:`attacks.deployment`).

Baseline: chance, i.e. AUC 0.5 and TPR 0.01 at 1 % FPR (a guess that ignores the model;
the split is random, so no public node property predicts membership).
"""

from __future__ import annotations

import numpy as np

from attacks.base import MODEL_HOLDER, AttackResult, not_applicable
from attacks.deployment import applicability, deployments
from attacks.metrics import roc_auc, tpr_at_fpr
from attacks.naive import CHANCE_AUC, auc_margin, proportion_margin
from attacks.simulation import AuditRun

NAME = "membership_inference"


def membership_signals(posteriors: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    """Per-node scores; larger = more likely a training member."""
    p = np.clip(posteriors, 1e-12, 1.0)
    return {
        "confidence": p[np.arange(len(p)), labels],
        "max_posterior": p.max(axis=1),
        "neg_entropy": (p * np.log(p)).sum(axis=1),
    }


def membership_inference(run: AuditRun) -> AttackResult:
    """Threshold MIA pooled over the deployments of ``run``'s released model."""
    reason = applicability(run)
    if reason is not None:
        return not_applicable(NAME, MODEL_HOLDER, reason)
    signals: dict[str, list[np.ndarray]] = {}
    member: list[np.ndarray] = []
    for dep in deployments(run):
        data = dep.data
        keep = (data.train_mask | data.test_mask).numpy()
        if not keep.any():
            continue
        sig = membership_signals(dep.posteriors(), data.y.numpy())
        for k, v in sig.items():
            signals.setdefault(k, []).append(v[keep])
        member.append(data.train_mask.numpy()[keep])
    y = np.concatenate(member) if member else np.zeros(0, bool)
    if not y.any() or y.all():
        return not_applicable(NAME, MODEL_HOLDER, "needs both training and test nodes")
    return score_members({k: np.concatenate(v) for k, v in signals.items()}, y)


def score_members(signals: dict[str, np.ndarray], member: np.ndarray) -> AttackResult:
    """AUC (headline: ``confidence``) and TPR at 1 % FPR beside chance."""
    y = np.asarray(member, bool)
    pos, neg = int(y.sum()), int((~y).sum())
    aucs = {k: roc_auc(v, y) for k, v in signals.items()}
    tpr = tpr_at_fpr(signals["confidence"], y, 0.01)
    return AttackResult(
        NAME,
        MODEL_HOLDER,
        {"auc": aucs["confidence"], "tpr_at_1pct_fpr": tpr},
        primary="auc",
        details={"auc_by_signal": aucs, "members": pos, "non_members": neg},
        baselines={"auc": CHANCE_AUC, "tpr_at_1pct_fpr": 0.01},
        margins={
            "auc": auc_margin(aucs["confidence"], pos, neg),
            "tpr_at_1pct_fpr": proportion_margin(0.01, pos),
        },
    )
