"""LinkTeller: Wu, Long, Zhang, Li, "LinkTeller: Recovering Private Edges from Graph Neural
Networks via Influence Analysis", IEEE S&P 2022 (arXiv 2108.06504; official code
``AI-secure/LinkTeller``, ``attacker.py``).

Adversary: the model holder in the vertical setting — it holds the node features of a
deployment (Bob) and queries the model, which the graph owner (Alice: the client with
its private edges, or ``central``) evaluates on her graph. For every target node v it
scales ``x_v ← x_v (1 + Δ)``, queries the posteriors of all targets and takes the
influence ``I_v = (f(X') - f(X)) / Δ``; ``score(u, v) = ‖I_v[u]‖₂`` (symmetrised by the
mean of both directions). Under an L-layer GCN the influence is non-zero only within L
hops and largest for direct neighbours. Metrics: ROC AUC over all target pairs, and
precision / recall of the top-k̂ pairs with k̂ = the true number of edges among the
targets (the paper's "known density" setting).

Deviations: queries run in float64 on a copy of the model (the paper's API is float32);
influence rows of a batch of targets are computed in one forward over a block-diagonal
batch of graph copies. Large deployments (``central``) are audited on a random sample of
``max_targets`` nodes, as the paper samples target nodes. Also on FedStruct's deployments,
whose feature branch propagates over the client's true internal edges
(:mod:`attacks.deployment`).

Baseline (:mod:`attacks.naive`): the adversary already holds the features, so the same
target pairs scored by feature cosine similarity (AUC: the better of it and 0.5;
precision / recall at k̂: the better of it and the edge density among the targets, a
random guess's expectation; at k̂ precision = recall).
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from attacks.base import MODEL_HOLDER, AttackResult, not_applicable
from attacks.deployment import Deployment, applicability, deployments
from attacks.metrics import precision_recall_at_k, roc_auc
from attacks.naive import auc_margin, cosine_similarity_matrix, heuristic_auc, proportion_margin
from attacks.simulation import AuditRun

NAME = "linkteller"


def influence_matrix(
    model: torch.nn.Module,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    targets: np.ndarray,
    delta: float = 1e-4,
    budget: int = 20_000_000,
) -> np.ndarray:
    """``M[a, b] = ‖∂posterior_{targets[b]} / ∂(scale of x_{targets[a]})‖₂`` (finite diff.).

    ``budget`` caps the floats of one batched forward (chunks of graph copies).
    """
    model = copy.deepcopy(model).double().eval()
    x = x.double()
    n, d = x.shape
    t = torch.as_tensor(targets, dtype=torch.long)
    with torch.no_grad():
        base = torch.softmax(model(x, edge_index), dim=-1)[t]
    chunk = max(1, budget // max(n * d, 1))
    out = np.zeros((len(targets), len(targets)))
    e = edge_index.size(1)
    for start in range(0, len(targets), chunk):
        batch = t[start : start + chunk]
        b = len(batch)
        xb = x.repeat(b, 1)
        rows = torch.arange(b) * n + batch
        xb[rows] = x[batch] * (1.0 + delta)
        offsets = (torch.arange(b) * n).repeat_interleave(e)
        eb = edge_index.repeat(1, b) + offsets
        with torch.no_grad():
            post = torch.softmax(model(xb, eb), dim=-1).view(b, n, -1)[:, t]
        out[start : start + b] = ((post - base) / delta).norm(dim=-1).numpy()
    return out


def attack_deployment(
    dep: Deployment, truth: np.ndarray, targets: np.ndarray, delta: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Influence scores, feature-similarity scores and labels of all target pairs (u < v)."""
    infl = influence_matrix(dep.model, dep.data.x, dep.data.edge_index, targets, delta)
    sym = 0.5 * (infl + infl.T)
    iu, ju = np.triu_indices(len(targets), k=1)
    labels = np.asarray(truth[targets[iu], targets[ju]]).ravel() > 0
    feat = cosine_similarity_matrix(dep.data.x.numpy()[targets])
    return sym[iu, ju], feat[iu, ju], labels


def score_pairs(scores: np.ndarray, feature_scores: np.ndarray, y: np.ndarray) -> AttackResult:
    """AUC and precision / recall at k̂ = #true edges, beside their naive baselines."""
    y = np.asarray(y, bool)
    k, pos, neg = int(y.sum()), int(y.sum()), int((~y).sum())
    precision, recall = precision_recall_at_k(scores, y, k)
    feat_precision, _ = precision_recall_at_k(feature_scores, y, k)
    density = k / max(y.size, 1)
    auc = roc_auc(scores, y)
    at_k = max(density, feat_precision)
    return AttackResult(
        NAME,
        MODEL_HOLDER,
        {"auc": auc, "precision": precision, "recall": recall},
        primary="auc",
        details={"pairs": int(y.size), "true_edges": k, "edge_density": density},
        baselines={"auc": heuristic_auc(feature_scores, y), "precision": at_k, "recall": at_k},
        margins={
            "auc": auc_margin(auc, pos, neg),
            "precision": proportion_margin(at_k, k),
            "recall": proportion_margin(at_k, k),
        },
    )


def linkteller(
    run: AuditRun, delta: float = 1e-4, max_targets: int = 400, seed: int = 0
) -> AttackResult:
    """Influence analysis on every deployment; AUC and precision/recall at true density."""
    reason = applicability(run)
    if reason is not None:
        return not_applicable(NAME, MODEL_HOLDER, reason)
    rng = np.random.default_rng(seed)
    scores, feats, labels = [], [], []
    for dep in deployments(run):
        truth = (  # TRUE graph, whatever the run perturbed
            run.truth_adjacency if dep.client is None else run.truth_local_adjacency(dep.client)
        ).tocsr()
        n = dep.data.num_nodes
        targets = np.sort(rng.choice(n, size=min(n, max_targets), replace=False))
        if len(targets) < 2:
            continue
        s, f, y = attack_deployment(dep, truth, targets, delta)
        scores.append(s)
        feats.append(f)
        labels.append(y)
    y = np.concatenate(labels) if labels else np.zeros(0, bool)
    if not y.any():
        return not_applicable(NAME, MODEL_HOLDER, "no true edge among the target nodes")
    result = score_pairs(np.concatenate(scores), np.concatenate(feats), y)
    result.details["delta"] = delta
    return result
