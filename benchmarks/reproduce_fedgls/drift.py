"""How far the graph learner moves the graphless clients' graphs (FedGLS, Eq. 5 and 15-18).

After a FedGLS run (Table 1's setting), each graphless client's learned graph is compared
with the feature kNN it started from (ω = ones): the share of edges the two have in common
(Jaccard), their label homophily (share of edges joining nodes of the same class) and the
share of the client's real edges each contains. Homophily and real edges read every node's
label and the deleted edges: an evaluator's measurement, never a party's view.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from securefgl.algorithms.fedgls.learner import feature_knn
from securefgl.algorithms.fedgls.models import Propagation
from securefgl.config import ExperimentConfig
from securefgl.data import edge_homophily
from securefgl.data.partition import undirected_pairs
from securefgl.experiment.runner import run_single

FIELDS = ("edges_kept", "homophily_knn", "homophily_learned", "real_edges_knn",
          "real_edges_learned")  # fmt: skip


def _keys(edges: torch.Tensor | np.ndarray, n: int) -> np.ndarray:
    """Distinct undirected edges (self-loops dropped) as ``i * n + j``, i < j."""
    pairs = undirected_pairs(edges, n)
    return pairs[0] * n + pairs[1]


def _homophily(keys: np.ndarray, y: np.ndarray, n: int) -> float:
    pairs = torch.from_numpy(np.stack([keys // n, keys % n]))
    return edge_homophily(pairs, torch.from_numpy(y))


def client_drift(x: Any, y: np.ndarray, learned: Propagation, real: np.ndarray, k: int) -> dict:
    """The learned graph beside the feature kNN (both with the learner's k)."""
    n = x.shape[0]
    knn = _keys(feature_knn(x, k).edge_pairs(), n)
    mine, true = _keys(learned.edge_pairs(), n), _keys(real, n)
    union = np.union1d(knn, mine).size
    return {
        "nodes": int(n),
        "edges_kept": np.intersect1d(knn, mine).size / union if union else float("nan"),
        "homophily_knn": _homophily(knn, y, n),
        "homophily_learned": _homophily(mine, y, n),
        "real_edges_knn": np.intersect1d(knn, true).size / max(true.size, 1),
        "real_edges_learned": np.intersect1d(mine, true).size / max(true.size, 1),
    }


def graph_drift(cfg: ExperimentConfig, seed: int, data: Data) -> dict[str, Any]:
    """One FedGLS run; the drift of every graphless client and their mean."""
    res = run_single(cfg, "fedgls", seed, data, False, keep_state=True)
    state = res.state
    assert state is not None
    clients = []
    for client in state.algorithm.clients.values():
        if client.graphless:
            real = state.views[client.view.client_id].edge_index.numpy()
            y, k = client.view.y.numpy(), client.learner.k
            drift = client_drift(client.view.x, y, client.prop, real, k)
            clients.append({"client": client.party_id, **drift})
    mean = {f: float(np.nanmean([c[f] for c in clients])) for f in FIELDS}
    return {"seed": seed, "clients": clients, **mean}


def drift_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per dataset: the per-seed means over graphless clients, mean ± std over seeds."""
    if not rows:
        return ["(not run yet: `python -m benchmarks.reproduce_fedgls --graph-drift`)"]

    def cell(values: list[float]) -> str:
        return f"{np.mean(values):.3f} ± {np.std(values):.3f}"

    lines = [
        "| dataset | seeds | graphless clients | edges shared with the kNN (Jaccard) "
        "| homophily: kNN → learned | real edges found: kNN → learned |",
        "|---|---|---|---|---|---|",
    ]
    for ds in sorted({r["dataset"] for r in rows}):
        mine = [r for r in rows if r["dataset"] == ds]
        col = {f: [r[f] for r in mine] for f in FIELDS}
        lines.append(
            f"| {ds} | {len(mine)} | {sum(len(r['clients']) for r in mine)} "
            f"| {cell(col['edges_kept'])} "
            f"| {cell(col['homophily_knn'])} → {cell(col['homophily_learned'])} "
            f"| {cell(col['real_edges_knn'])} → {cell(col['real_edges_learned'])} |"
        )
    return lines
