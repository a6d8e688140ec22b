"""Link stealing from posteriors: He, Jia, Backes, Gong, Zhang, "Stealing Links from Graph
Neural Networks", USENIX Security 2021 (arXiv 2005.02131), Attack-0 (unsupervised).

Adversary: the model holder, querying the posteriors of a deployment (a client serving on
its own subgraph, or ``central`` on the global graph) and knowing no edge. A pair's score is
``-distance(posterior_u, posterior_v)`` for the paper's 8 scipy metrics; the AUC is over
balanced linked / unlinked pairs of the deployment's true graph (≤ 10 000 pairs, half
edges, as GAP's re-implementation). Headline: correlation, the paper's best. For
``central``, ``auc_within_clients`` repeats it on pairs inside each client (Louvain clients
are communities: harder negatives). Deviations: the paper flips each AUC to ≥ 0.5 after
the fact; we keep the fixed direction "closer = linked". Pairs are sampled within each
client's deployment and pooled over deployments. Also on FedStruct's deployments
(:mod:`attacks.deployment`) and the FedGLS family's: the headline pools the graph clients',
``auc_graphless`` the graphless clients' (whose models never saw their true edges).

Baseline (:mod:`attacks.naive`): the better of chance (0.5) and the same pairs scored by
the same distance between the nodes' raw features (the paper's adversaries with node
attributes as prior knowledge: what the features say without the model). The model holder knows no
edge, so it has no degree heuristic.
"""

from __future__ import annotations

import numpy as np

from attacks.base import MODEL_HOLDER, AttackResult, not_applicable
from attacks.deployment import Deployment, applicability, deployments
from attacks.metrics import roc_auc
from attacks.naive import auc_margin, chance_or
from attacks.pairs import sample_pairs
from attacks.simulation import AuditRun

NAME = "link_stealing"
METRICS = (
    "cosine",
    "euclidean",
    "correlation",
    "chebyshev",
    "braycurtis",
    "canberra",
    "cityblock",
    "sqeuclidean",
)


def pair_distance(a: np.ndarray, b: np.ndarray, metric: str) -> np.ndarray:
    """Row-wise distance between ``a[i]`` and ``b[i]`` (scipy.spatial.distance semantics)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    diff = a - b
    if metric == "euclidean":
        return np.linalg.norm(diff, axis=1)
    if metric == "sqeuclidean":
        return (diff**2).sum(axis=1)
    if metric == "cityblock":
        return np.abs(diff).sum(axis=1)
    if metric == "chebyshev":
        return np.abs(diff).max(axis=1)
    if metric == "braycurtis":
        den = np.abs(a + b).sum(axis=1)
        return np.divide(np.abs(diff).sum(axis=1), den, out=np.zeros(len(a)), where=den > 0)
    if metric == "canberra":
        den = np.abs(a) + np.abs(b)
        return np.divide(np.abs(diff), den, out=np.zeros_like(diff), where=den > 0).sum(axis=1)
    if metric in ("cosine", "correlation"):
        if metric == "correlation":
            a = a - a.mean(axis=1, keepdims=True)
            b = b - b.mean(axis=1, keepdims=True)
        den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        cos = np.divide((a * b).sum(axis=1), den, out=np.zeros(len(a)), where=den > 0)
        return 1.0 - cos
    raise ValueError(f"unknown metric {metric!r}; choose from {METRICS}")


def attack0_aucs(posteriors: np.ndarray, pairs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """AUC of ``-distance`` for every metric on the given pairs."""
    a, b = posteriors[pairs[:, 0]], posteriors[pairs[:, 1]]
    return {m: roc_auc(-pair_distance(a, b, m), labels) for m in METRICS}


def pair_scores(rows: np.ndarray, pairs: np.ndarray) -> dict[str, np.ndarray]:
    """``-distance(rows[u], rows[v])`` of every pair, for every metric."""
    a, b = rows[pairs[:, 0]], rows[pairs[:, 1]]
    return {m: -pair_distance(a, b, m) for m in METRICS}


def result_from_scores(
    post: dict[str, np.ndarray], feat: dict[str, np.ndarray], y: np.ndarray
) -> AttackResult:
    """Posterior AUCs (the attack) beside feature AUCs (the baseline) on the same pairs."""
    aucs = {m: roc_auc(post[m], y) for m in METRICS}
    feat_aucs = {m: roc_auc(feat[m], y) for m in METRICS}
    best = max(aucs, key=lambda m: aucs[m])
    pos, neg = int(y.sum()), int((~y).sum())
    metrics = {"auc": aucs["correlation"], "auc_best": aucs[best]}
    baselines = {
        "auc": chance_or(feat_aucs["correlation"]),
        "auc_best": chance_or(max(feat_aucs.values())),
    }
    margins = {k: auc_margin(v, pos, neg) for k, v in metrics.items()}
    details = {
        "auc_by_metric": aucs,
        "best_metric": best,
        "feature_auc_by_metric": feat_aucs,
        "pairs": int(y.size),
    }
    return AttackResult(NAME, MODEL_HOLDER, metrics, "auc", None, details, baselines, margins)


def attack0(
    posteriors: np.ndarray, features: np.ndarray, pairs: np.ndarray, labels: np.ndarray
) -> AttackResult:
    """Attack-0 on one set of pairs, with its feature-similarity baseline."""
    y = np.asarray(labels, bool)
    return result_from_scores(pair_scores(posteriors, pairs), pair_scores(features, pairs), y)


def _pooled(
    run: AuditRun, deps: list[Deployment], per_dep: int, rng: np.random.Generator
) -> tuple[dict[str, list[np.ndarray]], dict[str, list[np.ndarray]], list[np.ndarray]]:
    """Posterior and feature scores of sampled true pairs, pooled over ``deps``."""
    post: dict[str, list[np.ndarray]] = {m: [] for m in METRICS}
    feat: dict[str, list[np.ndarray]] = {m: [] for m in METRICS}
    labels: list[np.ndarray] = []
    for dep in deps:
        truth = run.truth_adjacency if dep.client is None else run.truth_local_adjacency(dep.client)
        pairs, lab = sample_pairs(truth, per_dep, rng)  # TRUE graph, whatever the run perturbed
        if not len(pairs):
            continue
        for out, scores in (
            (post, pair_scores(dep.posteriors(), pairs)),
            (feat, pair_scores(dep.data.x.numpy(), pairs)),
        ):
            for m in METRICS:
                out[m].append(scores[m])
        labels.append(lab)
    return post, feat, labels


def link_stealing(run: AuditRun, max_pairs: int = 10_000, seed: int = 0) -> AttackResult:
    """Attack-0 on every deployment of ``run``'s released model; AUC per metric. FedGLS's
    graphless clients serve without their true edges: the headline pools the graph
    clients' deployments, ``auc_graphless`` the others."""
    reason = applicability(run)
    if reason is not None:
        return not_applicable(NAME, MODEL_HOLDER, reason)
    rng = np.random.default_rng(seed)
    every = deployments(run)
    deps = [d for d in every if not d.graphless]
    per_dep = max(2, max_pairs // len(every))
    post, feat, labels = _pooled(run, deps, per_dep, rng)
    if not labels:
        return not_applicable(NAME, MODEL_HOLDER, "no deployment has an internal edge to score")
    y = np.concatenate(labels)
    result = result_from_scores(
        {m: np.concatenate(v) for m, v in post.items()},
        {m: np.concatenate(v) for m, v in feat.items()},
        y,
    )
    if len(deps) < len(every):  # graphless clients' deployments (learned / kNN graphs)
        gpost, gfeat, glabels = _pooled(run, [d for d in every if d.graphless], per_dep, rng)
        if glabels:
            gy = np.concatenate(glabels)
            auc = roc_auc(np.concatenate(gpost["correlation"]), gy)
            result.metrics["auc_graphless"] = auc
            result.baselines["auc_graphless"] = chance_or(
                roc_auc(np.concatenate(gfeat["correlation"]), gy)
            )
            result.margins["auc_graphless"] = auc_margin(auc, int(gy.sum()), int((~gy).sum()))
        result.details["deployments"] = {"graph": len(deps), "graphless": len(every) - len(deps)}
    if len(deps) == 1 and deps[0].client is None and run.result.federated is False:
        auc, base, n_pos, n_neg = _within_clients_auc(run, deps[0], per_dep, rng)
        result.metrics["auc_within_clients"] = auc
        result.baselines["auc_within_clients"] = base
        result.margins["auc_within_clients"] = auc_margin(auc, n_pos, n_neg)
    return result


def _within_clients_auc(
    run: AuditRun, dep: Deployment, max_pairs: int, rng: np.random.Generator
) -> tuple[float, float, int, int]:
    """Diagnostic for a global deployment: correlation AUC (and its feature baseline) when
    the pairs are drawn inside each client of the partition (as a client deployment's
    pairs are), i.e. with harder, same-community negatives."""
    post, x = dep.posteriors(), dep.data.x.numpy()
    scores, feats, labels = [], [], []
    k = len(run.views)
    for c in range(k):
        g = run.global_nodes(c)
        pairs, lab = sample_pairs(run.truth_local_adjacency(c), max(2, max_pairs // k), rng)
        if len(pairs):
            u, v = g[pairs[:, 0]], g[pairs[:, 1]]
            scores.append(-pair_distance(post[u], post[v], "correlation"))
            feats.append(-pair_distance(x[u], x[v], "correlation"))
            labels.append(lab)
    if not labels:
        return float("nan"), 0.5, 0, 0
    y = np.concatenate(labels)
    auc = roc_auc(np.concatenate(scores), y)
    base = chance_or(roc_auc(np.concatenate(feats), y))
    return auc, base, int(y.sum()), int((~y).sum())
