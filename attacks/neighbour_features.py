"""Neighbour-feature inference from FedGCN's neighbour sums (client i).

FedGCN (Yao et al., NeurIPS 2023) pre-training gives client i, for each node v,
``H¹_v = r_v (Σ_{u ∈ V_i ∩ Ñ(v)} s_u x_u + Σ_{u external} s_u x_u)``
(:mod:`securefgl.algorithms.fedgcn.neighbour_sums`). Knowing ``r_v``, its own features and internal
edges, i isolates ``R_v = Σ_{u ∈ N_ext(v)} s_u x_u`` — with one external neighbour, that
neighbour's scaled features (FedStruct footnote 2; Ngo et al. 2024). With ``plain`` its view
splits ``R_v`` per sending client; with ``masked`` / ``ckks`` only the total is known. For
every external neighbour u the estimate is the residual row of the adjacent v with the
fewest external neighbours in that view, normalised to max 1 (exact for binary features
when that count is 1). Metrics: mean cosine similarity to the true ``x_u`` (headline), the
fraction recovered exactly, support precision / recall. The pre-training runs here
(``run_neighbour_sums``, 1 hop, through a fresh channel).

Baseline (:mod:`attacks.naive`): client i guesses every external neighbour's features as
its own mean feature row (support: that mean's top-m features, m its rows' mean number of
non-zeros); the same four metrics of that guess on the same neighbours.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from attacks.base import AttackResult
from attacks.metrics import rowwise_cosine
from attacks.naive import top_m
from attacks.simulation import World
from protocols.secure_sum.parties import TAG_DELIVERY
from securefgl.algorithms.fedgcn.neighbour_sums import (
    NeighbourSumClient,
    run_neighbour_sums,
)
from securefgl.algorithms.fedgcn.settings import FedGCNSettings
from securefgl.federation import SERVER, Channel, LocalExecutor, Party, client_party_id
from securefgl.federation.hosted_sums import SumRelay

NAME = "neighbour_feature_inference"
MODES = ("plain", "masked", "ckks")


def residual_blocks(party: NeighbourSumClient, channel: Channel, mode: str) -> list:
    """``(R [n_i, d] in local rows, sender client or None)`` client i can compute."""
    ids, n = party.ids, party.n
    d = party.hop_feats[0].shape[1]
    if mode == "plain":
        out = []
        for env in channel.transcript.view(party.party_id).messages(TAG_DELIVERY):
            p = env.payload
            if p.meta.get("round") != 0:
                continue
            block = sp.csr_matrix(
                (p.array("data"), (p.array("row"), p.array("col"))), shape=(n, d)
            )[ids]
            out.append((block.toarray(), int(str(p.meta["sender"]).split("-")[-1])))
        return out
    own = party.a_own @ party.hop_feats[0]
    return [(party.hop_feats[1] / party.r[:, None] - own, None)]


def neighbour_features(
    world: World, mode: str = "plain", adversaries: list[int] | None = None, norm: str = "sym"
) -> AttackResult:
    """Every client (or those in ``adversaries``) infers its external neighbours' features
    from the hop-1 sums (made with ``mode`` and the run's normalisation ``norm``)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")
    # single-sender sums allowed: the worst case, what a client learns when a run allows them
    settings = FedGCNSettings(hops=1, sum_mode=mode, min_senders=1, norm=norm)
    parties: dict[str, Party] = {
        client_party_id(v.client_id): NeighbourSumClient(v, settings) for v in world.views
    }
    parties[SERVER] = SumRelay(SERVER)
    channel = Channel()
    ids = [p for p in parties if p != SERVER]
    run_neighbour_sums(ids, LocalExecutor(parties), channel, settings, "securefgl/audit")
    x_true = world.graph.x.numpy().astype(np.float64)
    est_all, true_all, exact_all, base_all, base_sup = [], [], [], [], []
    chosen = world.views if adversaries is None else [world.views[a] for a in adversaries]
    for view in chosen:
        party = parties[client_party_id(view.client_id)]
        assert isinstance(party, NeighbourSumClient)
        ext_v, ext_u = view.external_edges.numpy()
        owners = view.external_owner.numpy()
        cand_u, cand_est, cand_cnt = [], [], []
        for resid, sender in residual_blocks(party, channel, mode):
            sel = np.ones(ext_v.size, bool) if sender is None else owners == sender
            v, u = ext_v[sel], ext_u[sel]
            cnt = np.bincount(v, minlength=view.num_nodes)[v]
            cand_u.append(u)
            cand_est.append(resid[v])
            cand_cnt.append(cnt)
        if not cand_u:
            continue
        u, est, cnt = np.concatenate(cand_u), np.vstack(cand_est), np.concatenate(cand_cnt)
        order = np.lexsort((cnt, u))  # per u: the row with the fewest co-neighbours first
        _, first = np.unique(u[order], return_index=True)
        pick = order[first]
        est = est[pick]
        est = est / np.maximum(np.abs(est).max(axis=1, keepdims=True), 1e-300)
        est_all.append(est)
        true_all.append(x_true[world.global_of_opaque[u[pick]]])
        exact_all.append(cnt[pick] == 1)
        own_x = view.x.numpy().astype(np.float64)  # the adversary's own rows: its prior
        m = int(round(float((own_x != 0).sum(axis=1).mean())))
        base_all.append(np.broadcast_to(own_x.mean(axis=0), est.shape))
        base_sup.append(np.broadcast_to(top_m(own_x.mean(axis=0), m), est.shape))
    est, true = np.vstack(est_all), np.vstack(true_all)
    metrics = feature_metrics(est, est > 1e-9, true)
    baselines = feature_metrics(np.vstack(base_all), np.vstack(base_sup), true)
    details = {
        "mode": mode,
        "norm": norm,
        "external_neighbours": int(len(est)),
        "single_neighbour_rows": float(np.concatenate(exact_all).mean()),
    }
    adversary = "client i (each in turn)"
    return AttackResult(NAME, adversary, metrics, "cosine", None, details, baselines)


def feature_metrics(est: np.ndarray, pred: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """Cosine of ``est`` to ``true`` rows, and the support ``pred``'s exact fraction,
    precision and recall."""
    sup = true != 0
    tp = int((pred & sup).sum())
    return {
        "cosine": float(rowwise_cosine(est, true).mean()),
        "exact_fraction": float((pred == sup).all(axis=1).mean()),
        "precision": tp / max(int(pred.sum()), 1),
        "recall": tp / max(int(sup.sum()), 1),
    }
