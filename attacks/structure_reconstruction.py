"""Structure reconstruction from FedStruct's Ā-construction messages (client i).

FedStruct (Aliakbari et al., ICLR 2025) App. D / Algorithm 3: at hop 2 client ``k`` sends
client ``i`` ``B_ik = Ã^[i]_k Â^[k]`` (rows: i's nodes adjacent to k). Row ``v`` is
``Σ_{u ∈ N(v) ∩ V_k} Â[u, :]``, non-zero exactly on ``N(u) ∪ {u}``: a node of ``i`` with one
neighbour ``u`` in ``k`` shows u's whole neighbourhood (a leak the paper does not discuss).
Client ``i`` knows which external nodes its rows are adjacent to, so it scores a candidate
edge ``(u, w)`` by ``Σ_{v ~ u} B[v, w] / |N_blk(v)|``. The build runs through the real channel
and hop-sum code (L_s = 2): with ``plain`` i sees every ``B_ik``; with ``masked`` / ``ckks``
only ``Σ_{k≠i} B_ik`` (recovered from its own ``Ā^[i]``); with ``edge_dp`` every edge is
perturbed once before the build (:mod:`securefgl.algorithms.fedstruct.edge_dp`) and the attack is
scored against the TRUE graph, on the same pairs as without DP (i's true external
neighbours: a neighbour the perturbed graph lost scores zero). Metrics, pooled over every
client as adversary: ROC AUC over the true edges of the external nodes adjacent to ``i`` vs
as many sampled non-edges, and precision / recall of the predicted support. Deviation:
only the hop-2 exchange is attacked.

Baselines (:mod:`attacks.naive`), from client i's own true cross edges: the AUC of common
neighbours in ``V_i`` (Liben-Nowell & Kleinberg 2007; at least 0.5) on the same pairs; the
edge density among the candidate pairs for precision (a random guess) and, for recall, a
random guess with as many predictions as the attack (predictions / candidates).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from attacks.base import AttackResult
from attacks.metrics import roc_auc
from attacks.naive import auc_margin, heuristic_auc, proportion_margin
from attacks.simulation import World
from securefgl.algorithms.fedstruct.abar_build import build_abar as run_build
from securefgl.algorithms.fedstruct.abar_client import (
    BLOCK_TAG,
    AdjacencyClient,
    AdjacencyRelay,
    SparseRows,
)
from securefgl.algorithms.fedstruct.abar_secure import hop_sum_for
from securefgl.algorithms.fedstruct.edge_dp import EdgeDP, perturb_federation
from securefgl.data import ClientGraph
from securefgl.federation import Channel, LocalExecutor, Party

NAME = "structure_reconstruction"
MODES = ("plain", "masked", "ckks")


def build(
    views: list[ClientGraph], mode: str, hops: int = 2, min_senders: int = 1
) -> tuple[dict, Channel]:
    """Algorithm 3 through a fresh channel; returns the client parties and the channel.

    ``min_senders`` as the audited run's (``abar_min_senders``); 1, the default here,
    allows secure sums over a single sender: the worst case, what a receiver learns when a
    run allows them."""
    clients = {f"client-{v.client_id}": AdjacencyClient(v) for v in views}
    parties: dict[str, Party] = dict(clients)
    parties["server"] = AdjacencyRelay("server", list(clients))
    channel = Channel()
    options = {} if mode == "plain" else {"min_senders": min_senders}
    hop_sum = hop_sum_for(mode, "securefgl/audit", **options)
    run_build(clients, channel, LocalExecutor(parties), hops, hop_sum=hop_sum, server_id="server")
    return clients, channel


def own_rows(view: ClientGraph) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
    """What client i knows: ``Ã^[i]`` (rows: own nodes, cols: opaque ids), ``Ã^[i]_i``
    (local, with self-loops) and the degrees ``d̃``."""
    n, ni = view.num_global_nodes, view.num_nodes
    ids = view.node_ids.numpy()
    src, dst = view.edge_index.numpy()
    keep = src != dst
    src, dst = src[keep], dst[keep]
    ext_v, ext_u = view.external_edges.numpy()
    rows = np.r_[src, np.arange(ni), ext_v]
    cols = np.r_[ids[dst], ids, ext_u]
    a_rows = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(ni, n))
    a_rows.data[:] = 1.0
    deg = np.asarray(a_rows.sum(axis=1)).ravel()
    a_own = sp.csr_matrix(
        (np.ones(src.size + ni), (np.r_[src, np.arange(ni)], np.r_[dst, np.arange(ni)])),
        shape=(ni, ni),
    )
    a_own.data[:] = 1.0
    return a_rows, a_own, deg


def received_sum(view: ClientGraph, abar: sp.csr_matrix) -> sp.csr_matrix:
    """``Σ_{k≠i} B_ik`` from client i's own hop-2 output (local rows)."""
    a_rows, a_own, deg = own_rows(view)
    p1 = sp.diags(1.0 / deg) @ a_rows
    return sp.csr_matrix(sp.diags(deg) @ abar - a_own @ p1)


def blocks_seen(
    view: ClientGraph, party: object, channel: Channel, mode: str, known: ClientGraph | None = None
) -> list:
    """``(rows: local indices, block [r, n], owner filter)`` the adversary can read; with
    ``plain``, an empty block for each client of ``known``'s true cross edges that sent none
    (under edge DP the perturbed graph may lose every edge to it)."""
    ids = view.node_ids.numpy()
    if mode == "plain":
        out = []
        for env in channel.transcript.view(f"client-{view.client_id}").messages(BLOCK_TAG):
            if env.payload.meta.get("hop") != 2:
                continue
            blk = SparseRows.from_payload(env.payload, view.num_global_nodes)
            owner = int(str(env.payload.meta["from"]).split("-")[-1])
            out.append((np.searchsorted(ids, blk.row_ids), blk.matrix, owner))
        owners = (known if known is not None else view).external_owner.numpy()
        silent = set(np.unique(owners).tolist()) - {o for _, _, o in out}
        empty = sp.csr_matrix((0, view.num_global_nodes))
        return out + [(np.zeros(0, np.int64), empty, o) for o in sorted(silent)]
    total = received_sum(view, party.abar)  # type: ignore[attr-defined]
    return [(np.arange(view.num_nodes), total, None)]


def entries(m: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``m[rows[i], cols[i]]`` as a flat float array (empty input → empty array)."""
    if rows.size == 0:
        return np.zeros(0)
    return np.asarray(m[rows, cols], dtype=np.float64).ravel()


@dataclass
class ClientScores:
    """One adversary's scored pairs and support counts."""

    scores: np.ndarray  # attack score of each sampled pair
    labels: np.ndarray  # true edge?
    heuristic: np.ndarray  # common neighbours in V_i of each pair (the baseline)
    tp: int  # predicted support ∩ true edges
    pred: int  # predicted support size
    true_total: int  # true edges of the targets outside V_i
    candidates: int  # candidate pairs (u, w): w outside V_i, w != u


def common_neighbours(known: ClientGraph) -> sp.csr_matrix:
    """``C[u, w]`` = #nodes of client i adjacent to both u and w (its own cross edges)."""
    v, u = known.external_edges.numpy()
    e = sp.csr_matrix((np.ones(v.size), (v, u)), shape=(known.num_nodes, known.num_global_nodes))
    e.data[:] = 1.0
    return sp.csr_matrix(e.T @ e)


def owner_edges(view: ClientGraph, owner: int | None) -> np.ndarray:
    """Mask of ``view``'s external edges to ``owner``'s nodes (all of them if ``None``)."""
    owners = view.external_owner.numpy()
    return np.ones(owners.size, bool) if owner is None else owners == owner


def target_scores(
    view: ClientGraph, rows: np.ndarray, block: sp.csr_matrix, sel: np.ndarray
) -> tuple[np.ndarray, sp.csr_matrix]:
    """The attack on one block: targets (external nodes adjacent to ``rows``, by ``view``'s
    edges selected by ``sel``) and their score rows ``Σ_{v ~ u} B[v, :] / |N_blk(v)|``."""
    ext_v, ext_u = view.external_edges.numpy()
    v, u = ext_v[sel], ext_u[sel]
    targets, u_idx = np.unique(u, return_inverse=True)
    row_of = np.full(view.num_nodes, -1)
    row_of[rows] = np.arange(rows.size)
    r = row_of[v]
    ok = r >= 0
    cnt = np.bincount(r[ok], minlength=rows.size).astype(float)
    m = sp.csr_matrix((1.0 / cnt[r[ok]], (u_idx[ok], r[ok])), shape=(targets.size, rows.size))
    return targets, sp.csr_matrix(m @ block)


def rows_for(targets: np.ndarray, scored: np.ndarray, s: sp.csr_matrix) -> sp.csr_matrix:
    """Score rows of ``targets`` from rows computed for ``scored`` (sorted); zero if absent."""
    if scored.size == 0:
        return sp.csr_matrix((targets.size, s.shape[1]))
    pos = np.minimum(np.searchsorted(scored, targets), scored.size - 1)
    hit = np.flatnonzero(scored[pos] == targets)
    pick = sp.csr_matrix((np.ones(hit.size), (hit, pos[hit])), shape=(targets.size, scored.size))
    return sp.csr_matrix(pick @ s)


def score_client(
    view: ClientGraph,
    blocks: list,
    truth: sp.csr_matrix,
    rng: np.random.Generator,
    known: ClientGraph | None = None,
) -> ClientScores:
    """Pair scores / labels for one adversary, plus support TP, predicted and true counts.

    ``view`` is what the build used (perturbed under edge DP): it maps the received rows to
    external nodes. ``known`` is client i's true view (default ``view``): the targets are its
    true external neighbours, so the scored pairs are the same with and without edge DP (a
    neighbour the perturbed graph lost scores zero), and its own edges give the
    common-neighbour baseline."""
    known = view if known is None else known
    n = view.num_global_nodes
    own = np.zeros(n, bool)
    own[view.node_ids.numpy()] = True
    cn = common_neighbours(known)
    scores, labels, heur = [], [], []
    tp = pred = true_total = candidates = 0
    for rows, block, owner in blocks:
        scored, s_all = target_scores(view, rows, block, owner_edges(view, owner))
        targets = np.unique(known.external_edges.numpy()[1][owner_edges(known, owner)])
        if targets.size == 0:
            continue
        s = rows_for(targets, scored, s_all)
        candidates += targets.size * int(n - own.sum() - 1)
        # candidates: (u, w) with w outside V_i and w != u
        t = truth[targets].tocsr()
        t = t.multiply(~own[None, :]).tocsr()
        t.eliminate_zeros()  # multiply() keeps explicit zeros
        coo = sp.coo_matrix(s)
        cand = (~own[coo.col]) & (coo.col != targets[coo.row]) & (coo.data > 0)
        pred += int(cand.sum())
        tp += int(entries(t, coo.row[cand], coo.col[cand]).sum())
        pos = sp.coo_matrix(t)
        true_total += pos.nnz
        neg_u = rng.integers(0, targets.size, size=3 * pos.nnz + 8)
        neg_w = rng.integers(0, n, size=neg_u.size)
        keep = (~own[neg_w]) & (neg_w != targets[neg_u])
        keep &= entries(t, neg_u, neg_w) == 0
        neg_u, neg_w = neg_u[keep][: pos.nnz], neg_w[keep][: pos.nnz]
        pu, pw = np.r_[pos.row, neg_u], np.r_[pos.col, neg_w]
        if pu.size:
            scores.append(entries(s, pu, pw))
            heur.append(entries(cn, targets[pu], pw))
            labels.append(np.r_[np.ones(pos.nnz, bool), np.zeros(neg_u.size, bool)])

    def cat(parts: list, dtype: type = float) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    return ClientScores(cat(scores), cat(labels, bool), cat(heur), tp, pred, true_total, candidates)


def structure_reconstruction(
    world: World,
    mode: str = "plain",
    edge_dp: tuple[str, float] | None = None,
    seed: int = 0,
    adversaries: list[int] | None = None,
    min_senders: int = 1,
) -> AttackResult:
    """Every client (or those in ``adversaries``) attacks its neighbours' edges from what
    the hop-2 exchange gave it. The exchange is re-run on the seed's views with the run's
    mode and ``min_senders``; edge DP's perturbation is drawn afresh (the same mechanism
    and ε: the same distribution as the run's, not its draw)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")
    views = world.views
    if any(v.cross_edges != "known" for v in views):
        raise ValueError("FedStruct's Ā needs cross_edges='known' views")
    details: dict = {"mode": mode, "hops": 2, "min_senders": min_senders,
                     "view": "hop-2 exchange re-run on the seed's views"}  # fmt: skip
    if edge_dp is not None:
        mech, eps = edge_dp
        views = perturb_federation(views, EdgeDP(mech, eps))  # the clients' secret noise
        details.update(edge_dp=mech, edge_dp_epsilon=eps, edge_dp_draw="afresh")
    clients, channel = build(views, mode, min_senders=min_senders)
    truth = world.truth_opaque_adjacency
    rng = np.random.default_rng(seed)
    chosen = range(len(views)) if adversaries is None else adversaries
    got = []
    for a in chosen:
        view = views[a]
        party = clients[f"client-{view.client_id}"]
        blocks = blocks_seen(view, party, channel, mode, known=world.views[a])
        got.append(score_client(view, blocks, truth, rng, known=world.views[a]))
    y = np.concatenate([g.labels for g in got])
    tp, pred = sum(g.tp for g in got), sum(g.pred for g in got)
    true_total, candidates = sum(g.true_total for g in got), sum(g.candidates for g in got)
    auc = roc_auc(np.concatenate([g.scores for g in got]), y)
    metrics = {"auc": auc, "precision": tp / max(pred, 1), "recall": tp / max(true_total, 1)}
    density = true_total / max(candidates, 1)
    baselines = {
        "auc": heuristic_auc(np.concatenate([g.heuristic for g in got]), y),
        "precision": density,
        "recall": min(1.0, pred / max(candidates, 1)),
    }
    margins = {
        "auc": auc_margin(auc, int(y.sum()), int((~y).sum())),
        "precision": proportion_margin(density, pred),
        "recall": proportion_margin(baselines["recall"], true_total),
    }
    if edge_dp is not None:
        exact, _ = build(world.views, "plain")
        num = sum(sp.linalg.norm(clients[k].abar - exact[k].abar) ** 2 for k in clients)
        den = sum(sp.linalg.norm(exact[k].abar) ** 2 for k in clients)
        details["abar_relative_error"] = float(np.sqrt(num / den))
    details.update(pairs=int(y.size), candidates=int(candidates), edge_density=density)
    adversary = "client i (each in turn)"
    return AttackResult(NAME, adversary, metrics, "auc", None, details, baselines, margins)
