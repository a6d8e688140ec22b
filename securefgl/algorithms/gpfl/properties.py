"""GPFL's graph-property guidance (TMLR 2025, §3.3, Eqs. 10–12): six statistics per graph,
a client's mean over its training graphs, the property similarity network and the
rule-based selector that picks the properties whose network is closest to A_E.

Formulas as in the authors' code (``dataprocess/data_property.py``; the paper's §3.3
names the properties): E is the number of directed edge entries (2m), entropy = mean(d log d) / E,
the "negative scale-free exponent" −(1/⟨d⟩ + 2), closeness = the mean of networkx's
closeness centrality (Wasserman–Faust scaling). Deviation: degrees count every node (the
code's ``degree`` drops trailing isolated nodes). The selector's similarity (``f2sim``)
centres the client vectors, L2-normalises them and clips negative cosines; it stops when no
removal brings the network closer to A_E (squared Frobenius) or ``min_properties`` remain.

Privacy (not in the paper, which sends p_C in the clear): :func:`ldp_release` clips each
graph's properties to a public range, averages them and adds Laplace noise, ε-LDP for the
client's whole property vector (``unit="dataset"``: any two datasets of the client) or for
one of its training graphs (``unit="graph"``: sensitivity divided by the public
training-set size).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from securefgl.data.graph_datasets import GraphDataset

NAMES = (
    "average degree",
    "density",
    "degree variance",
    "network entropy",
    "negative scale-free exponent",
    "closeness centrality",
)
#: Public clipping ranges of the LDP release, fixed from the definitions (not from data).
RANGES = np.array([[0.0, 10.0], [0.0, 1.0], [0.0, 25.0], [0.0, 0.5], [-4.0, -2.0], [0.0, 1.0]])
EPS = 1e-12


def closeness(edge_index: np.ndarray, n: int) -> np.ndarray:
    """networkx's ``closeness_centrality`` (``wf_improved=True``) of an undirected graph."""
    if n <= 1:
        return np.zeros(n)
    src, dst = np.asarray(edge_index, dtype=np.int64)
    a = sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(n, n))
    dist = shortest_path(a, unweighted=True, directed=False)
    reach = np.isfinite(dist)
    total = np.where(reach, dist, 0.0).sum(1)
    found = reach.sum(1) - 1  # reachable others
    out = np.where(total > 0, found / np.maximum(total, EPS), 0.0)
    return out * found / (n - 1)


def graph_properties(edge_index: np.ndarray, n: int) -> np.ndarray:
    """The six properties of one graph (edges in both directions, no self-loops)."""
    ei = np.asarray(edge_index, dtype=np.int64)
    e = ei.shape[1]
    if n == 0:
        return np.zeros(len(NAMES))
    d = np.bincount(ei[0], minlength=n).astype(np.float64)
    mean_d = d.mean()
    return np.array(
        [
            mean_d,
            e / (n * (n - 1)) if n > 1 else 0.0,
            (d * d).mean() - mean_d**2,
            (d * np.log(d + EPS)).mean() / e if e else 0.0,
            -(1.0 / mean_d + 2.0) if mean_d > 0 else -4.0,  # no edge: the range bound
            closeness(ei, n).mean(),
        ]
    )


def property_rows(data: GraphDataset) -> np.ndarray:
    """Each (training) graph's six properties, one row per graph."""
    rows = [graph_properties(data.graph(g)[1], int(data.num_nodes[g]))
            for g in range(data.num_graphs)]  # fmt: skip
    return np.array(rows, dtype=np.float64).reshape(-1, len(NAMES))


def client_properties(data: GraphDataset) -> np.ndarray:
    """The client's property vector p_C: the mean over its (training) graphs."""
    rows = property_rows(data)
    return rows.mean(axis=0) if len(rows) else np.zeros(len(NAMES))


def ldp_release(
    rows: np.ndarray, epsilon: float, unit: str, rng: np.random.Generator
) -> np.ndarray:
    """The mean of the graphs' property ``rows``, each clipped to :data:`RANGES` first, plus
    Laplace(Δ₁/ε) on each property: ε-LDP for the whole vector, Δ₁ = Σ widths (``dataset``)
    or Σ widths / n (``graph``: one of the n averaged graphs replaced, which moves the mean
    by at most its clipped row's width over n; n, the training-set size, is public)."""
    lo, hi = RANGES[:, 0], RANGES[:, 1]
    rows = np.asarray(rows, dtype=np.float64).reshape(-1, len(NAMES))
    n = len(rows)
    sensitivity = float((hi - lo).sum()) / (max(n, 1) if unit == "graph" else 1)
    mean = np.clip(rows, lo, hi).mean(axis=0) if n else (lo + hi) / 2
    return mean + rng.laplace(0.0, sensitivity / epsilon, size=mean.shape)


def f2sim(features: np.ndarray) -> np.ndarray:
    """Cosine similarity of the centred rows, negatives clipped to 0 (the code's ``f2sim``)."""
    x = features - features.mean(0)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.maximum(norms, EPS)
    return np.maximum(x @ x.T, 0.0)


def rule_selector(
    props: np.ndarray, target: np.ndarray, min_properties: int = 2
) -> tuple[np.ndarray, list[int]]:
    """Greedy backward selection (Eqs. 11–12): drop the property whose removal brings
    ``f2sim`` closest to ``target`` (negatives clipped) while that helps; returns the
    network of the kept properties and their indices."""
    target = np.maximum(target, 0.0)
    keep = list(range(props.shape[1]))
    while len(keep) > min_properties:
        current = ((f2sim(props[:, keep]) - target) ** 2).sum()
        trials = [((f2sim(props[:, [p for p in keep if p != q]]) - target) ** 2).sum()
                  for q in keep]  # fmt: skip
        best = int(np.argmin(trials))
        if trials[best] - current >= 0:
            break
        keep.pop(best)
    return f2sim(props[:, keep]), keep
