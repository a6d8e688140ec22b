"""Hop2Vec S-gradient leakage to the server (FedStruct Alg. 2, Prop. 2).

With Hop2Vec every client uploads ``∇_S L_i`` (``n × d_s``) each round. Row ``u`` is
``Σ_{v ∈ Ṽ_i} Ā_vu J_g(s_u)ᵀ(ŷ_v − y_v)``: non-zero exactly on the nodes in the support of
client i's labelled Ā rows, i.e. the nodes it reaches within L_s hops (after pruning)
(Eq. 16; not discussed by the paper). Adversary: the server, from its transcript view of one round:
it cuts the update at ``|θ|`` (it built the model and knows ``n`` and ``d_s``) and scores
node ``u`` by the row norm ``‖∇_S L_i[u]‖₂``. Metrics (pooled over clients): ROC AUC
against the true reach set, precision / recall of "row ≠ 0", and the Jaccard index of
the predicted and true reach sets.

With the structure MLP ("H2V+MLP") a row can also vanish where ``J_g(s_u)`` is zero (all
hidden ReLUs dead), so recall may fall below 1; pure H2V rows vanish only off the support.

Under secagg / secagg+ / ckks the individual upload is hidden: not applicable (the
aggregate still reveals the union of the reach sets to the server and the clients).
"""

from __future__ import annotations

import numpy as np

from attacks.base import SERVER, AttackResult, not_applicable
from attacks.metrics import roc_auc
from attacks.simulation import AuditRun
from attacks.updates import individual_update_or_reason, model_sent

NAME = "hop2vec_leakage"
MODEL_TAG = "fedstruct/model"


def reach_scores(update: np.ndarray, theta_dim: int, n: int) -> np.ndarray:
    """Row norms of the S-gradient part of a flat (θ ‖ vec S) update."""
    s = np.asarray(update[theta_dim:], np.float64)
    if s.size % n:
        raise ValueError(f"S part of {s.size} values is not n={n} rows")
    return np.linalg.norm(s.reshape(n, -1), axis=1)


def hop2vec_leakage(run: AuditRun, round_idx: int = 0) -> AttackResult:
    """The server reads which nodes each client reaches from its S-gradients."""
    algo = run.state.algorithm
    if run.result.algorithm != "fedstruct" or not getattr(algo.settings, "learnable_nsf", False):
        return not_applicable(NAME, SERVER, "targets FedStruct with Hop2Vec (learnable S) only")
    init = model_sent(run.transcript, SERVER, MODEL_TAG, -1)
    if init is None:
        return not_applicable(NAME, SERVER, "no initial model broadcast in the transcript")
    n = run.views[0].num_global_nodes
    st = algo.settings
    d_s = st.nsf_dim if st.structure_mlp else run.views[0].num_classes
    theta_dim = init.size - n * d_s
    view = run.view(SERVER)
    scores, labels = [], []
    tp = pred = true_total = 0
    for v in run.views:
        cid = f"client-{v.client_id}"
        got = individual_update_or_reason(view, cid, round_idx)
        if isinstance(got, str):
            return not_applicable(NAME, SERVER, got)
        s = reach_scores(got[0], theta_dim, n)
        client = algo.clients[cid]  # ground truth: the support of its labelled Ā rows
        truth = np.zeros(n, bool)
        truth[np.unique(client.abar[client.train_rows].indices)] = True
        scores.append(s)
        labels.append(truth)
        hit = s > 0
        tp += int((hit & truth).sum())
        pred += int(hit.sum())
        true_total += int(truth.sum())
    y = np.concatenate(labels)
    precision, recall = tp / max(pred, 1), tp / max(true_total, 1)
    return AttackResult(
        NAME,
        SERVER,
        {
            "auc": roc_auc(np.concatenate(scores), y),
            "precision": precision,
            "recall": recall,
            "jaccard": tp / max(pred + true_total - tp, 1),
        },
        primary="auc",
        details={"round": round_idx, "theta_dim": int(theta_dim), "nsf_dim": int(d_s)},
    )
