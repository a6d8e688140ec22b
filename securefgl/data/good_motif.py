"""GOOD-Motif generated offline: the basis and size domains of Gui et al., "GOOD: A Graph
Out-of-Distribution Benchmark" (NeurIPS 2022 Datasets and Benchmarks, §3 and App. A, the
Motif dataset), as FedVN (Fu et al., AAAI 2025, §5.1) deals it: one client per domain.

One graph: a base graph (wheel, tree, ladder, star, path) of width ``w``, one motif (house,
5-cycle, crane = K_{2,3}; its index is the label) whose node 0 is joined by one edge to a
uniformly drawn base node, then ⌊0.05·|E|⌋ attempts to add a random non-edge, kept only when
an end is a "role-0" node (every wheel, tree and ladder node, a star's centre, a path's
interior), then the label replaced by a uniform class with probability 0.1. Features are
the constant 1 (one column). Tree height: max(1, ⌊log2 w⌋ − 1) (binary tree); ladder(w)
has 2w nodes, star(w) has w + 1, wheel(w) and path(w) have w.

Domains. ``basis``: domain d is base type d, ``w ~ U{5..15}``, motif uniform. ``size``:
domain d has ``w ~ c_d + U{−5..5}`` with c = (6, 10, 15, 30, 70), base type and motif
uniform. GOOD's covariate split makes domains 0–2 its training environments and 3 / 4 its
OOD validation / test sets; FedVN makes each of the five a client holding 1,000 graphs
(800 train, 200 test). Here every domain gets ``graphs_per_domain`` fresh draws plus
``val_per_domain`` more, used only to select a round (our addition: FedVN has no
validation set).

Deviations: our own random streams (one NumPy generator) instead of GOOD's mix of Python's
``random``, NumPy's global stream and networkx, so the draw differs from GOOD's released
archive while the distribution is the same. CMNIST, ZINC and SST2 (FedVN's other GOOD
datasets) need downloads and are not available offline.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from securefgl.data.graph_store import GraphDataset, assemble

__all__ = [
    "BASES",
    "DOMAIN_KINDS",
    "MOTIFS",
    "MOTIF_DATASETS",
    "SIZE_CENTRES",
    "MotifGraphs",
    "check_motif_options",
    "expected_statistics",
    "good_motif",
    "motif_statistics",
]

BASES = ("wheel", "tree", "ladder", "star", "path")
MOTIFS = ("house", "cycle", "crane")
SIZE_CENTRES = (6, 10, 15, 30, 70)
DOMAIN_KINDS = ("basis", "size")
#: dataset name -> domain kind
MOTIF_DATASETS = {"motif-basis": "basis", "motif-size": "size"}
#: motif edges on local nodes 0..4; node 0 is the one joined to the base
MOTIF_EDGES = {
    "house": ((1, 2), (2, 3), (3, 4), (4, 1), (0, 1), (0, 4)),  # square + roof apex 0
    "cycle": ((0, 1), (1, 2), (2, 3), (3, 4), (4, 0)),
    "crane": ((1, 2), (2, 3), (3, 4), (4, 1), (0, 1), (0, 3)),  # 0 on opposite corners
}
PERTURB = 0.05  # share of |E| tried as added random edges
LABEL_NOISE = 0.1  # probability that the label is redrawn uniformly


def _tree_height(w: int) -> int:
    return max(1, int(math.log2(max(w, 1))) - 1)


def base_graph(base: str, w: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(nodes, undirected edges [E, 2], role-0 mask) of a base graph of width ``w``."""
    if base == "wheel":
        g = nx.wheel_graph(w)
    elif base == "tree":
        g = nx.balanced_tree(2, _tree_height(w))
    elif base == "ladder":
        g = nx.ladder_graph(w)
    elif base == "star":
        g = nx.star_graph(w)
    elif base == "path":
        g = nx.path_graph(w)
    else:
        raise ValueError(f"unknown base {base!r}; known: {BASES}")
    n = g.number_of_nodes()
    edges = np.array([e for e in g.edges() if e[0] != e[1]], dtype=np.int64).reshape(-1, 2)
    role0 = np.ones(n, dtype=bool)
    if base == "star":
        role0[1:] = False  # leaves
    elif base == "path":
        role0[[0, n - 1]] = False  # the two ends
    return n, edges, role0


def base_nodes(base: str, w: int) -> int:
    """Nodes of a base graph of width ``w`` (for the expected statistics)."""
    return {"wheel": w, "tree": 2 ** (_tree_height(w) + 1) - 1, "ladder": 2 * w,
            "star": w + 1, "path": w}[base]  # fmt: skip


def one_graph(
    base: str, w: int, motif: int, rng: np.random.Generator
) -> tuple[int, np.ndarray, int]:
    """(nodes, undirected edges [E, 2], label) of one GOOD-Motif graph."""
    n_base, edges, role0 = base_graph(base, w)
    motif_edges = np.asarray(MOTIF_EDGES[MOTIFS[motif]], dtype=np.int64) + n_base
    anchor = int(rng.integers(n_base))
    bridge = np.array([[n_base, anchor]], dtype=np.int64)
    edges = np.concatenate([edges, motif_edges, bridge])
    n = n_base + 5
    role0 = np.concatenate([role0, np.zeros(5, dtype=bool)])
    attempts = int(len(edges) * PERTURB)
    if attempts:
        present = set(map(tuple, np.sort(edges, axis=1).tolist()))
        added = []
        for _ in range(attempts):  # GOOD: redraw until a non-edge, add it if a role-0 end
            while True:
                u, v = (int(a) for a in rng.integers(n, size=2))
                if u != v and (min(u, v), max(u, v)) not in present:
                    break
            if role0[u] or role0[v]:
                present.add((min(u, v), max(u, v)))
                added.append((u, v))
        if added:
            edges = np.concatenate([edges, np.asarray(added, dtype=np.int64)])
    label = int(rng.integers(3)) if rng.random() < LABEL_NOISE else motif
    return n, edges, label


@dataclass
class MotifGraphs:
    """A generated GOOD-Motif dataset and the draws behind each graph (ground truth)."""

    data: GraphDataset
    base: np.ndarray  # base type of every graph (index into BASES)
    width: np.ndarray  # the drawn width w
    motif: np.ndarray  # the motif (the label before noise)


def _draw(kind: str, domain: int, rng: np.random.Generator) -> tuple[int, int, int]:
    """(base, width, motif) of one graph of ``domain``."""
    if kind == "basis":
        return domain, 10 + int(rng.integers(-5, 6)), int(rng.integers(3))
    base, motif = int(rng.integers(5)), int(rng.integers(3))
    return base, SIZE_CENTRES[domain] + int(rng.integers(-5, 6)), motif


def generate(
    kind: str, graphs_per_domain: int = 1000, val_per_domain: int = 200, seed: int = 0
) -> MotifGraphs:
    """Every domain's ``graphs_per_domain + val_per_domain`` graphs, domain by domain."""
    if kind not in DOMAIN_KINDS:
        raise ValueError(f"unknown GOOD-Motif domain kind {kind!r}; known: {DOMAIN_KINDS}")
    rng = np.random.default_rng([seed, DOMAIN_KINDS.index(kind)])
    per = graphs_per_domain + val_per_domain
    xs, edges, ys, meta = [], [], [], []
    for d in range(5):
        for _ in range(per):
            base, w, motif = _draw(kind, d, rng)
            n, e, y = one_graph(BASES[base], w, motif, rng)
            xs.append(np.ones((n, 1), dtype=np.float32))
            edges.append(np.concatenate([e.T, e.T[::-1]], axis=1))  # both directions
            ys.append(y)
            meta.append((base, w, motif))
    names = tuple(BASES) if kind == "basis" else tuple(f"size-{c}" for c in SIZE_CENTRES)
    data = assemble(f"motif-{kind}", xs, edges, np.asarray(ys, dtype=np.int64), 3)
    data.domain = np.repeat(np.arange(5, dtype=np.int64), per)
    data.domain_names = names
    data.val_per_domain = val_per_domain
    base, width, motif = (np.asarray(c, dtype=np.int64) for c in zip(*meta, strict=True))
    return MotifGraphs(data, base, width, motif)


@functools.lru_cache(maxsize=4)
def _cached(kind: str, graphs_per_domain: int, val_per_domain: int, seed: int) -> MotifGraphs:
    return generate(kind, graphs_per_domain, val_per_domain, seed)


def good_motif(name: str, options: dict[str, Any] | None = None) -> GraphDataset:
    """The dataset ``motif-basis`` or ``motif-size`` (generated once per options; a copy)."""
    opts = {"graphs_per_domain": 1000, "val_per_domain": 200, "seed": 0, **(options or {})}
    check_motif_options(opts)
    made = _cached(MOTIF_DATASETS[name], opts["graphs_per_domain"], opts["val_per_domain"],
                   opts["seed"])  # fmt: skip
    return made.data.subset(np.arange(made.data.num_graphs))


def check_motif_options(options: dict[str, Any]) -> None:
    """``graphs_per_domain`` ≥ 5, ``val_per_domain`` ≥ 0, ``seed`` ≥ 0 (integers)."""
    if not isinstance(options, dict):
        raise TypeError(f"give a table of GOOD-Motif options, got {options!r}")
    known = {"graphs_per_domain", "val_per_domain", "seed"}
    if unknown := sorted(set(options) - known):
        raise ValueError(f"unknown GOOD-Motif option(s) {unknown}; known: {sorted(known)}")
    if any(isinstance(v, bool) or not isinstance(v, int) for v in options.values()):
        raise TypeError(f"GOOD-Motif options must be integers, got {options}")
    if options.get("graphs_per_domain", 1000) < 5 or options.get("val_per_domain", 0) < 0:
        raise ValueError("GOOD-Motif needs graphs_per_domain ≥ 5 and val_per_domain ≥ 0")
    if options.get("seed", 0) < 0:
        raise ValueError("GOOD-Motif needs seed ≥ 0")


def expected_statistics(kind: str) -> list[dict[str, float]]:
    """Per domain, the recipe's exact expectation of nodes per graph (before any draw) and
    of undirected edges without the perturbation (the generator's own arithmetic)."""
    out = []
    for d in range(5):
        if kind == "basis":
            cases = [(BASES[d], 10 + k) for k in range(-5, 6)]
        else:
            cases = [(b, SIZE_CENTRES[d] + k) for b in BASES for k in range(-5, 6)]
        nodes = [base_nodes(b, w) + 5 for b, w in cases]
        edges = [len(base_graph(b, w)[1]) + 7 for b, w in cases]  # motif + bridge: 6 or 5 + 1
        cycle_edges = [len(base_graph(b, w)[1]) + 6 for b, w in cases]
        # motifs uniform: house and crane have 6 edges, the cycle 5 (plus the bridge)
        mean_edges = (2 * float(np.mean(edges)) + float(np.mean(cycle_edges))) / 3
        out.append({"nodes": float(np.mean(nodes)), "edges": mean_edges})
    return out


def motif_statistics(data: GraphDataset) -> list[dict[str, Any]]:
    """Per domain of a generated dataset: graphs, mean and sd of nodes, mean undirected
    edges, label shares."""
    if data.domain is None:
        raise ValueError("not a domain dataset")
    nodes = data.num_nodes
    edges = np.diff(data.edge_ptr) / 2
    out = []
    for d, name in enumerate(data.domain_names):
        mask = data.domain == d
        counts = np.bincount(data.y[mask], minlength=data.num_classes)
        out.append({
            "domain": name,
            "graphs": int(mask.sum()),
            "nodes_mean": float(nodes[mask].mean()),
            "nodes_sd": float(nodes[mask].std()),
            "nodes_min": int(nodes[mask].min()),
            "nodes_max": int(nodes[mask].max()),
            "edges_mean": float(edges[mask].mean()),
            "label_shares": (counts / max(counts.sum(), 1)).round(4).tolist(),
        })  # fmt: skip
    return out
