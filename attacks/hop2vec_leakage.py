"""Hop2Vec S-gradient leakage to the server (FedStruct Alg. 2, Prop. 2).

With Hop2Vec every client uploads ``∇_S L_i`` (``n × d_s``) each round. Row ``u`` is
``Σ_{v ∈ Ṽ_i} Ā_vu J_g(s_u)ᵀ(ŷ_v − y_v)``: non-zero exactly on the nodes in the support of
client i's labelled Ā rows, i.e. the nodes it reaches within L_s hops (after pruning)
(Eq. 16; not discussed by the paper). Adversary: the server, from its transcript view of one round:
it cuts the update at ``|θ|`` (it built the model and knows ``n`` and ``d_s``) and scores
node ``u`` by the row norm ``‖∇_S L_i[u]‖₂``. Metrics (pooled over clients): ROC AUC
against the true reach set, precision / recall of "row ≠ 0", and the Jaccard index of
the predicted and true reach sets.

The true reach set is the support of the labelled rows of the Ā built by Algorithm 3
(same L_s, β and pruning) from the TRUE client views: under edge DP the run's Ā comes from
perturbed edges, and its support is not the clients' true reach (``details``:
``auc_against_run_abar`` is the score against the run's own Ā).

With the structure MLP ("H2V+MLP") a row can also vanish where ``J_g(s_u)`` is zero (all
hidden ReLUs dead), so recall may fall below 1; pure H2V rows vanish only off the support.

Under secagg / secagg+ / ckks the individual upload is hidden: not applicable (the
aggregate still reveals the union of the reach sets to the server and the clients).

Baseline (:mod:`attacks.naive`): the server knows each client's own opaque ids (from the
NSF exchange) and guesses "client i reaches its own nodes": the AUC of that indicator
(at least 0.5); for precision / recall / Jaccard the better of that set and a random set as
large as the attack's prediction.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from attacks.base import SERVER, AttackResult, not_applicable
from attacks.metrics import roc_auc
from attacks.naive import auc_margin, chance_or, random_set_guess
from attacks.simulation import AuditRun
from attacks.updates import individual_update_or_reason, model_sent
from securefgl.algorithms.fedstruct.abar_build import PlainHopSum, build_abar
from securefgl.algorithms.fedstruct.abar_client import AdjacencyClient, AdjacencyRelay
from securefgl.federation import Channel, LocalExecutor, Party

NAME = "hop2vec_leakage"
MODEL_TAG = "fedstruct/model"


def reach_scores(update: np.ndarray, theta_dim: int, n: int) -> np.ndarray:
    """Row norms of the S-gradient part of a flat (θ ‖ vec S) update."""
    s = np.asarray(update[theta_dim:], np.float64)
    if s.size % n:
        raise ValueError(f"S part of {s.size} values is not n={n} rows")
    return np.linalg.norm(s.reshape(n, -1), axis=1)


def true_abar(run: AuditRun) -> dict[str, sp.csr_matrix]:
    """GROUND TRUTH: every client's Ā^[i] from the true views (the run's own Ā when no
    edge DP perturbed it; otherwise Algorithm 3 re-run with the run's settings)."""
    algo = run.state.algorithm
    st = algo.settings
    if st.edge_dp is None:
        return {cid: c.abar for cid, c in algo.clients.items()}
    clients = {f"client-{v.client_id}": AdjacencyClient(v) for v in run.views}
    parties: dict[str, Party] = dict(clients)
    parties["server"] = AdjacencyRelay("server", list(clients))
    prune = None if st.prune == "none" else st.prune
    build_abar(
        clients, Channel(), LocalExecutor(parties), st.structure_hops, st.hop_weights,
        prune, st.prune_p, PlainHopSum(), "server",  # type: ignore[arg-type]
    )  # fmt: skip
    return {cid: sp.csr_matrix(c.abar) for cid, c in clients.items()}


def reach_set(abar: sp.csr_matrix, rows: np.ndarray, n: int) -> np.ndarray:
    """Boolean mask of the column support of ``abar[rows]``."""
    out = np.zeros(n, bool)
    sub = sp.csr_matrix(abar[rows])
    sub.eliminate_zeros()
    out[np.unique(sub.indices)] = True
    return out


def score_reach(scores: np.ndarray, truth: np.ndarray, own: np.ndarray) -> AttackResult:
    """Pooled (client, node) scores against the true reach, beside the own-node guess."""
    truth, own = np.asarray(truth, bool), np.asarray(own, bool)
    hit = np.asarray(scores) > 0

    def sets(pred: np.ndarray) -> dict[str, float]:
        tp, p, t = int((pred & truth).sum()), int(pred.sum()), int(truth.sum())
        return {"precision": tp / max(p, 1), "recall": tp / max(t, 1),
                "jaccard": tp / max(p + t - tp, 1)}  # fmt: skip

    auc = roc_auc(scores, truth)
    pos, neg = int(truth.sum()), int((~truth).sum())
    mine, rand = sets(own), random_set_guess(int(hit.sum()), pos, truth.size)
    baselines = {k: max(mine[k], rand[k]) for k in mine}
    baselines["auc"] = chance_or(roc_auc(own.astype(float), truth))
    margins = {"auc": auc_margin(auc, pos, neg)}
    return AttackResult(
        NAME, SERVER, {"auc": auc, **sets(hit)}, "auc", None, {}, baselines, margins
    )


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
    got_all = {}
    for v in run.views:
        cid = f"client-{v.client_id}"
        got = individual_update_or_reason(view, cid, round_idx)
        if isinstance(got, str):
            return not_applicable(NAME, SERVER, got)
        got_all[cid] = got[0]
    truth_abar = true_abar(run)
    scores, truth, own, run_truth = [], [], [], []
    for v in run.views:
        cid = f"client-{v.client_id}"
        client = algo.clients[cid]
        scores.append(reach_scores(got_all[cid], theta_dim, n))
        truth.append(reach_set(truth_abar[cid], client.train_rows, n))  # GROUND TRUTH
        run_truth.append(reach_set(client.abar, client.train_rows, n))  # the run's Ā
        mine = np.zeros(n, bool)
        mine[v.node_ids.numpy()] = True  # the server's knowledge: i's opaque ids
        own.append(mine)
    s = np.concatenate(scores)
    result = score_reach(s, np.concatenate(truth), np.concatenate(own))
    result.details.update(round=round_idx, theta_dim=int(theta_dim), nsf_dim=int(d_s))
    if st.edge_dp is not None:
        result.details["auc_against_run_abar"] = roc_auc(s, np.concatenate(run_truth))
        result.details["edge_dp"] = [st.edge_privacy.mechanism, st.edge_privacy.epsilon]
    return result
