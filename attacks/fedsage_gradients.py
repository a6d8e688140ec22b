"""Feature reconstruction from FedSage+'s answered gradients (client i).

FedSage+ (Zhang et al., NeurIPS 2021, Eq. 5): client ``j`` answers client ``i``'s generated
row ``g`` with ``∂/∂g min_{u ∈ V_j} ‖g − x_u‖² = 2(g − x_{u*})``
(:mod:`securefgl.algorithms.fedsage.clients`), so ``i`` reads ``x̂ = g − answer/2``: exactly the
features of ``j``'s node nearest to its query (FedSage+'s cross-client loss, Zhang et al.,
returns gradients that point at ``j``'s real features). Adversary: client ``i``, from the
queries it sent and the answers it received (round −1, the set-up traffic), last federated
epoch.

Metrics, each reconstructed row against the true features of ``j``'s nearest node to the
query (ground truth from ``j``'s view): mean cosine over non-zero true rows (headline), the
fraction recovered
exactly (every feature within 1e-3), and the fraction of distinct nodes of ``j`` hit.
Baseline: ``i``'s own mean feature row (:func:`attacks.naive.mean_row_guess`). With
``cross_clip`` / ``cross_noise`` the answer is clipped and noised and ``i`` rescales
nothing (it does not know the clip was active).

Under ``cross_sum`` client ``i`` holds only ``Σ_j answer_j`` over its n answerers for one
common query ``g``: it reads ``x̂ = g − Σ_j answer_j / (2n)``, the mean of their nearest
rows, and the metrics score it against each answerer's true nearest row in turn.
"""

from __future__ import annotations

import numpy as np

from attacks.base import AttackResult, not_applicable
from attacks.metrics import rowwise_cosine
from attacks.naive import mean_row_guess
from attacks.simulation import AuditRun
from securefgl.algorithms.fedsage.clients import ANSWER_TAG, QUERY_TAG

NAME = "fedsage_gradient_features"
ADVERSARY = "client i (each in turn)"


def fedsage_gradient_features(run: AuditRun) -> AttackResult:
    algo = run.state.algorithm
    clients = getattr(algo, "clients", {})
    if not any(getattr(c, "neighgen", None) for c in clients.values()):
        return not_applicable(NAME, ADVERSARY, "no cross-client generator training")
    est_all, true_all, base_cos, exact, hit = [], [], [], [], []
    for cid, client in clients.items():
        sent = {}
        for e in run.transcript.sent_by(cid):
            if e.tag == QUERY_TAG and e.data is not None:
                p = e.payload()
                sent[(e.receiver, p.meta["epoch"])] = p.array("g").astype(np.float64)
        answers = {}
        for env in run.view(cid).messages(ANSWER_TAG):
            answers[(env.sender, env.payload.meta["epoch"])] = env.payload.array("grad")
        if not answers:
            got = getattr(client.neighgen, "received_sum", None) if client.neighgen else None
            if got is None:
                continue
            g, total, peers = got
            est = g - total / (2.0 * len(peers))
            for peer in peers:  # the same estimate against each answerer's nearest rows
                x = clients[peer].x_own.toarray().astype(np.float64)
                nearest = ((g**2).sum(1)[:, None] - 2 * g @ x.T + (x**2).sum(1)[None]).argmin(1)
                true = x[nearest]
                est_all.append(est)
                true_all.append(true)
                exact.append(np.abs(est - true).max(axis=1) < 1e-3)
                hit.append(len(np.unique(nearest)) / len(x))
                live = true[np.abs(true).sum(axis=1) > 0]
                if len(live):
                    base_cos.append(mean_row_guess(client.x_own.toarray(), live)["cosine"])
            continue
        last = max(epoch for _, epoch in answers)
        for (peer, epoch), grad in answers.items():
            if epoch != last or (peer, epoch) not in sent:
                continue
            g = sent[(peer, epoch)]
            est = g - grad.astype(np.float64) / 2.0
            x = clients[peer].x_own.toarray().astype(np.float64)  # ground truth: j's nodes
            nearest = ((g**2).sum(1)[:, None] - 2 * g @ x.T + (x**2).sum(1)[None]).argmin(1)
            true = x[nearest]
            est_all.append(est)
            true_all.append(true)
            exact.append(np.abs(est - true).max(axis=1) < 1e-3)
            hit.append(len(np.unique(nearest)) / len(x))
            live = true[np.abs(true).sum(axis=1) > 0]  # as the headline: non-zero rows
            if len(live):
                base_cos.append(mean_row_guess(client.x_own.toarray(), live)["cosine"])
    if not est_all:
        return not_applicable(NAME, ADVERSARY, "no stored query / answer pair")
    est, true = np.vstack(est_all), np.vstack(true_all)
    nonzero = np.abs(true).sum(axis=1) > 0  # a zero row has no direction to recover
    cosine = float(rowwise_cosine(est[nonzero], true[nonzero]).mean())
    return AttackResult(
        NAME, ADVERSARY,
        {"cosine": cosine, "exact_fraction": float(np.concatenate(exact).mean())},
        "cosine",
        details={"rows": int(len(est)), "nodes_hit_fraction": float(np.mean(hit))},
        baselines={"cosine": float(np.mean(base_cos)), "exact_fraction": 0.0},
    )  # fmt: skip
