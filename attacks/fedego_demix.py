"""De-mixing FedEgo's mixed ego-graphs (Zhang et al., ACM TKDD 2023, §4.3 claims that the
mixup "hides private information while sharing").

Adversary: the honest-but-curious server. It reads what it receives: every client's mixed
ego-graphs of one round (slot 0: r̄₀ = mean of B centres' reduction embeddings, ȳ₀ = mean
of their one-hot labels), the protocol's output (plain / secagg: the mean of the shared
reduction layer W̄, b̄, which is the mean of the very layers the clients embedded with;
ckks: nothing) and its own personalised layers. The mixup batch size B is public (a
protocol setting). Auxiliary knowledge, stated per row (``prior``): ``"features"``, the
server holds a public copy of the dataset's node features (Cora and CiteSeer are public
corpora; no labels, no graph, no membership); ``"none"``, nothing else.

Attack, per mixed graph:

1. Labels: B·ȳ₀ is the batch's class histogram (exact without DP; rounded to a
   non-negative integer vector of sum B — the label-sparsity prior: every centre has one
   label).
2. With ``"features"``: the candidates' embeddings ĉ_i = ReLU(W̄ x_i + b̄); greedy
   matching pursuit picks B distinct candidates whose sum best explains B·r̄₀ (each step
   the candidate that lowers ‖residual − ĉ_i‖² most). Their labels come from matching
   the histogram's B label slots to the picked candidates by the server model's
   log-probabilities (a one-node tree per candidate), Hungarian assignment.
   Recovered r of a centre: its picked candidate's ĉ.
3. Without features (or no W̄, ckks): class means μ̂_c by least squares over the client's
   mixed graphs (r̄₀ ≈ Σ_c ȳ₀c μ̂_c); a centre's recovered label is its batch's majority
   label c, its r the batch mean moved to that class, r̄₀ + μ̂_c − Σ_c' ȳ₀c' μ̂_c'
   (exact for B = 1).

Scored against the truth (the centres the client mixed and their r and labels, simulator
side): ``label_accuracy`` — a centre's label recovered (identified centres: the assigned
label; others: the batch majority) — beside the naive baseline, the client's majority
class (what the server knows from Σ ȳ₀ without de-mixing); ``member_recall`` — share of
centres identified among the candidates, beside chance B / #candidates; ``r_cosine`` —
cosine of the recovered r with the true r, beside the mixed mean r̄₀ itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from attacks.base import SERVER, AttackResult, not_applicable
from attacks.simulation import AuditRun

ATTACK = "fedego_demix"
TAG = "fedego/mixed-ego-graphs"


def histogram(y0: np.ndarray, b: int) -> np.ndarray:
    """Integer class counts of sum ``b`` closest to ``b·y0`` (largest remainders)."""
    raw = np.clip(b * np.asarray(y0, dtype=np.float64), 0, None)
    if raw.sum() <= 0:
        raw = np.ones_like(raw)
    raw = raw * b / raw.sum()
    counts = np.floor(raw).astype(np.int64)
    short = b - int(counts.sum())
    if short > 0:
        counts[np.argsort(-(raw - counts), kind="stable")[:short]] += 1
    return counts


def pursue(target: np.ndarray, cands: np.ndarray, b: int) -> np.ndarray:
    """Indices of ``b`` distinct rows of ``cands`` whose sum best explains ``target``
    (greedy: each step the row minimising ‖residual − c‖²)."""
    res = np.asarray(target, dtype=cands.dtype).copy()
    sq = (cands**2).sum(1)
    taken = np.zeros(cands.shape[0], dtype=bool)
    out = []
    for _ in range(min(b, cands.shape[0])):
        gain = 2 * cands @ res - sq
        gain[taken] = -np.inf
        i = int(np.argmax(gain))
        taken[i] = True
        out.append(i)
        res -= cands[i]
    return np.array(out, dtype=np.int64)


def assign_labels(logp: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Labels of the rows of ``logp`` [m, C] using each class c exactly ``counts[c]`` times
    (as far as m allows), maximising the summed log-probability."""
    slots = np.repeat(np.arange(counts.size), counts)
    if slots.size == 0:
        return logp.argmax(1)
    rows, cols = linear_sum_assignment(-logp[:, slots])
    out = logp.argmax(1)
    out[rows] = slots[cols]
    return out


def class_means(r0: np.ndarray, y0: np.ndarray) -> np.ndarray:
    """μ̂ [C, d] from r̄₀ ≈ ȳ₀ μ̂ over one client's mixed graphs (least squares)."""
    return np.linalg.lstsq(y0, r0, rcond=None)[0]


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    return (a * b).sum(-1) / np.maximum(na * nb, 1e-12)


def demix_client(r0: np.ndarray, y0: np.ndarray, b: int, cands: np.ndarray | None,
                 cand_logp: np.ndarray | None) -> list[dict[str, np.ndarray]]:  # fmt: skip
    """Per mixed graph j: the recovered labels ``labels`` (B), their embeddings ``r`` [B, d]
    and the picked candidates ``picked`` (indices, empty without candidates)."""
    mu = class_means(r0, y0)
    out = []
    for j in range(r0.shape[0]):
        counts = histogram(y0[j], b)
        if cands is not None and cand_logp is not None:
            picked = pursue(b * r0[j], cands, b)
            labels = assign_labels(cand_logp[picked], counts)
            rec = cands[picked].astype(np.float64)
        else:
            picked = np.zeros(0, dtype=np.int64)
            labels = np.repeat(np.argmax(counts), b)
            rec = r0[j] + mu[labels] - y0[j] @ mu  # the batch mean, shifted to the class
        out.append({"labels": labels, "r": rec, "picked": picked, "counts": counts})
    return out


def _server_logp(server: Any, cands: np.ndarray) -> np.ndarray:
    """The server model's log-probabilities of each candidate as a one-node tree (its
    embedding in every slot)."""
    from securefgl.algorithms.fedego.model import SLOTS

    net = server.net
    net.eval()
    with torch.no_grad():
        h = torch.from_numpy(cands).float()
        out = []
        for chunk in torch.split(h, 512):
            trees = chunk[:, None, :].expand(-1, SLOTS, -1)
            valid = torch.ones(chunk.size(0), SLOTS, dtype=torch.bool)
            out.append(net.personal(trees, valid))
    return torch.cat(out).numpy().astype(np.float64)


def fedego_demix(run: AuditRun, prior: str = "features") -> AttackResult:
    """The audit's entry: the run's last kept round of mixed ego-graphs."""
    algo = run.state.algorithm
    if getattr(algo, "variant", None) != "fedego":
        return not_applicable(ATTACK, SERVER, "no mixed ego-graphs (not FedEgo)")
    kept = [e for e in run.view(SERVER).entries if e.tag == TAG and e.data is not None]
    truths = [set(algo.clients[c].upload_truth) for c in algo.ids]
    rounds = {e.round for e in kept} & set.intersection(*truths)
    if not rounds:
        return not_applicable(ATTACK, SERVER, "no kept round of mixed ego-graphs")
    t = max(rounds)
    seen = {e.sender: e.payload().fields for e in kept if e.round == t}
    nodes = [run.global_nodes(v.client_id) for v in run.views]
    return demix_attack(algo, seen, t, run.world.graph.x.numpy(), nodes, run.result.privacy,
                        prior)  # fmt: skip


def demix_attack(algo: Any, seen: dict[str, dict[str, np.ndarray]], t: int,
                 features: np.ndarray | None, client_nodes: list[np.ndarray],
                 privacy: dict[str, Any], prior: str = "features") -> AttackResult:  # fmt: skip
    """De-mix the mixed graphs ``seen`` (sender -> {"r", "y"}) the server received in round
    ``t``. ``features``: the public corpus (``prior="features"``); ``client_nodes[k]``:
    global index of client k's nodes (ground truth, scoring only)."""
    clients = {c: algo.clients[c] for c in algo.ids if c in seen}
    s, server = next(iter(clients.values())).s, algo.server
    b = s.batch_size if s.mixup else 1
    w = server.params if getattr(server, "holds", False) else None
    cands = logp = None
    if prior == "features" and w is not None and features is not None:
        x = np.asarray(features, dtype=np.float64)  # the public corpus (auxiliary)
        h, f = s.hidden, x.shape[1]
        weight, bias = w[: h * f].reshape(h, f), w[h * f : h * f + h]
        cands = np.maximum(x @ weight.T + bias, 0.0).astype(np.float32)
        logp = _server_logp(server, cands)
    hits = members = centres = 0
    cos_rec: list[float] = []
    cos_mix: list[float] = []
    cos_matched: list[float] = []
    cos_public: list[float] = []
    public = None if cands is None else cands.mean(0).astype(np.float64)
    base_hits = 0
    for cid, client in clients.items():
        r0 = np.asarray(seen[cid]["r"])[:, 0].astype(np.float64)
        y0 = np.asarray(seen[cid]["y"])[:, 0].astype(np.float64)
        truth = client.upload_truth[t]
        with torch.no_grad():
            r_true = client.model.reduce(client.x).numpy().astype(np.float64)
        y_true = client.y.numpy()
        g_of_local = client_nodes[client.view.client_id]
        majority = int(np.argmax(y0.sum(0)))
        for j, (rec, batch) in enumerate(zip(demix_client(r0, y0, b, cands, logp), truth,
                                             strict=True)):  # fmt: skip
            yb, rb = y_true[batch], r_true[batch]
            centres += batch.size
            base_hits += int((yb == majority).sum())
            cos_mix.extend(_cos(np.repeat(r0[j][None], batch.size, 0), rb))
            if rec["picked"].size:
                where = {int(g): i for i, g in enumerate(rec["picked"])}
                found = np.array([where.get(int(g), -1) for g in g_of_local[batch]])
                members += int((found >= 0).sum())
                fallback = int(np.argmax(rec["counts"]))
                lab = np.where(found >= 0, rec["labels"][np.maximum(found, 0)], fallback)
                hits += int((lab == yb).sum())
                # lenient: a centre's own candidate if identified, else its best match
                sims = _cos(rb[:, None], rec["r"][None])
                idx = np.where(found >= 0, np.maximum(found, 0), np.argmax(sims, 1))
                cos_rec.extend(_cos(rec["r"][idx], rb))
                # one-to-one: the B recovered records matched to the B centres (Hungarian)
                rows, cols = linear_sum_assignment(-sims)
                cos_matched.extend(sims[rows, cols])
                cos_public.extend(_cos(np.repeat(public[None], batch.size, 0), rb))
            else:
                hits += int((rec["labels"][: batch.size] == yb).sum())
                cos_rec.extend(_cos(rec["r"][: batch.size], rb))
                cos_matched.extend(_cos(rec["r"][: batch.size], rb))
    n_cand = 0 if cands is None else cands.shape[0]
    metrics = {"label_accuracy": hits / centres, "r_cosine": float(np.mean(cos_rec))}
    result = AttackResult(ATTACK, SERVER, metrics, "label_accuracy")
    result.baselines["label_accuracy"] = base_hits / centres
    result.baselines["r_cosine"] = float(np.mean(cos_mix))
    result.metrics["r_cosine_matched"] = float(np.mean(cos_matched))
    result.baselines["r_cosine_matched"] = float(np.mean(cos_public if n_cand else cos_mix))
    if n_cand:
        result.metrics["member_recall"] = members / centres
        result.baselines["member_recall"] = min(1.0, b / n_cand)
    result.details.update(
        round=t, batch_size=b, prior=prior if cands is not None else "none", centres=centres,
        candidates=n_cand, dp_noise=s.dp_noise, dp_clip=s.dp_clip,
        mixup_epsilon=privacy.get("mixup_epsilon"),
        baseline_label="the client's majority class (Σ ȳ₀, no de-mixing)",
        baseline_r="cosine of the mixed mean r̄₀ with each centre's r",
        baseline_r_matched="features: the corpus' mean embedding (public); none: r̄₀",
    )  # fmt: skip
    return result
