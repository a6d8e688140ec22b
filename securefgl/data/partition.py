"""Partition a graph's nodes into K clients, as FedStruct (Aliakbari et al. 2025, Sec. 6,
App. F) and its official code.

* ``random``: a seeded permutation cut into K near-equal parts (deviation: the official code
  draws i.i.d. client ids, so its sizes are only approximately equal);
* ``louvain``: python-louvain ``community.best_partition`` (``random_state=seed``), then the
  balancing below;
* ``kmeans``: k-means on the node features (our own seeded Lloyd with k-means++ init, in
  numpy; the official code uses scikit-learn), then the same balancing;
* ``louvain-largest``: the same Louvain communities, each of the K largest one client, every
  other node in no client (assignment ``-1``), cross-community edges dropped: FedGLS's
  reading of "each community is regarded as an entire graph in a client" (Fu et al., TMLR,
  Sec. 5.1.1 and Table 4, whose per-client node and edge counts this matches);
* ``louvain-chunks``: the nodes in the order of their Louvain community label, cut into K
  contiguous near-equal chunks: SpreadFGL's equal-size clients (Zhong et al., Table I, about
  ``n/M`` nodes each), whose missing-link counts this matches on Cora (cut 18 / 28 / 31 /
  37 % of the edges for M = 6 / 9 / 12 / 15; Table I: 17 / 27 / 33 / 37 %). Deviation: the
  ``n mod M`` remainder nodes are kept (the paper drops them).

Balancing (FedSage+, Zhang et al. 2021, as in the official code), ``cap = ceil(n/K) + slack``
(default ``slack = ceil(0.05 * n / K)``; the code uses ``floor(n/K) + 20``): cut every
community larger than ``cap`` into pieces contiguous in a BFS order (halving the largest
until there are K), give the K largest pieces to the K clients, put each further piece on the
first client it fits, and cut a piece that fits nowhere to fill the least-loaded clients.
Deviation: the code gives such a piece whole to the smallest client; here no client exceeds
``cap``.

``cut`` (any method): swap the clients of random node pairs until that fraction of the edges
is cut, sizes unchanged (:func:`raise_cut`): a stress test for a paper whose reported
missing links no community partition reaches (SpreadFGL's Table I on Coauthor CS: 44-64 %).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import breadth_first_order, connected_components
from torch_geometric.data import Data

__all__ = [
    "METHODS",
    "UNASSIGNED",
    "Partition",
    "PartitionReport",
    "balance_communities",
    "kmeans",
    "largest_communities",
    "partition_graph",
    "partition_report",
    "raise_cut",
    "undirected_pairs",
]

logger = logging.getLogger(__name__)

# Salts keep the random partition's permutation independent of other components that
# draw from the same seed (random_split would otherwise cut the same permutation and put
# every training node on one client).
_RANDOM_SALT = 0x9A27
_CUT_SALT = 0x5C07

METHODS = ("random", "louvain", "kmeans", "louvain-largest", "louvain-chunks")
Method = Literal["random", "louvain", "kmeans", "louvain-largest", "louvain-chunks"]
UNASSIGNED = -1  # a node in no client (``louvain-largest`` keeps only K communities)


# --------------------------------------------------------------------------- report


@dataclass
class PartitionReport:
    """Statistics of a partition: sizes, edge cut, label distribution. Nodes in no client
    (``louvain-largest``) count in ``num_nodes`` only; an edge touching one is cut."""

    method: str
    num_clients: int
    num_nodes: int
    num_edges: int  # undirected, without self-loops
    sizes: list[int]
    internal_edges: list[int]  # undirected edges with both endpoints in the client
    cut_edges: int  # undirected edges between two different clients
    label_counts: np.ndarray | None  # [K, C] int64, None if the graph has no labels
    cap: int | None = None

    @property
    def edge_cut_ratio(self) -> float:
        """Fraction of undirected edges whose endpoints lie in different clients."""
        return self.cut_edges / self.num_edges if self.num_edges else 0.0

    def to_dict(self) -> dict:
        """JSON-serialisable dict."""
        return {
            "method": self.method,
            "num_clients": self.num_clients,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "sizes": list(self.sizes),
            "internal_edges": list(self.internal_edges),
            "cut_edges": self.cut_edges,
            "edge_cut_ratio": self.edge_cut_ratio,
            "label_counts": None if self.label_counts is None else self.label_counts.tolist(),
            "cap": self.cap,
        }

    def summary(self) -> str:
        """One line: method, K, size range, edge-cut ratio."""
        return (
            f"{self.method} partition into {self.num_clients} clients: sizes "
            f"{min(self.sizes)}..{max(self.sizes)} (n={self.num_nodes}"
            f"{'' if self.cap is None else f', cap={self.cap}'}), edge cut "
            f"{self.cut_edges}/{self.num_edges} = {self.edge_cut_ratio:.3f}"
        )

    def to_markdown(self) -> str:
        """Summary line + a per-client table (size, internal edges, label counts)."""
        head = "| client | nodes | internal edges |"
        sep = "|---:|---:|---:|"
        if self.label_counts is not None:
            head += " labels (count per class) |"
            sep += "---|"
        lines = [self.summary(), "", head, sep]
        for k in range(self.num_clients):
            row = f"| {k} | {self.sizes[k]} | {self.internal_edges[k]} |"
            if self.label_counts is not None:
                row += " " + " ".join(str(int(c)) for c in self.label_counts[k]) + " |"
            lines.append(row)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def undirected_pairs(edge_index: torch.Tensor | np.ndarray, n: int) -> np.ndarray:
    """Unique undirected pairs (u < v) as a [2, m] int64 array; self-loops dropped."""
    ei = edge_index.cpu().numpy() if isinstance(edge_index, torch.Tensor) else edge_index
    ei = np.asarray(ei, dtype=np.int64)
    lo, hi = np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])
    keep = lo != hi
    key = np.unique(lo[keep] * n + hi[keep])
    return np.stack([key // n, key % n])


def _num_classes(data: Data) -> int | None:
    if getattr(data, "y", None) is None:
        return None
    nc = getattr(data, "num_classes", None)
    y_max = int(data.y.max()) + 1 if data.y.numel() else 0
    return max(int(nc), y_max) if isinstance(nc, int | np.integer) else y_max


def partition_report(
    data: Data,
    assignment: np.ndarray,
    num_clients: int,
    method: str = "custom",
    cap: int | None = None,
) -> PartitionReport:
    """Compute a :class:`PartitionReport` for any assignment of ``data``'s nodes."""
    n = int(data.num_nodes)
    a = np.asarray(assignment, dtype=np.int64)
    pairs = undirected_pairs(data.edge_index, n)
    au, av = a[pairs[0]], a[pairs[1]]
    same = (au == av) & (au != UNASSIGNED)
    labels = None
    C = _num_classes(data)
    kept = a != UNASSIGNED
    if C is not None:
        y = data.y.cpu().numpy().astype(np.int64)[kept]
        labels = np.bincount(a[kept] * C + y, minlength=num_clients * C).reshape(num_clients, C)
    return PartitionReport(
        method=method,
        num_clients=num_clients,
        num_nodes=n,
        num_edges=int(pairs.shape[1]),
        sizes=np.bincount(a[kept], minlength=num_clients).tolist(),
        internal_edges=np.bincount(au[same], minlength=num_clients).tolist(),
        cut_edges=int((~same).sum()),
        label_counts=labels,
        cap=cap,
    )


# --------------------------------------------------------------------------- partition


@dataclass
class Partition:
    """Client of every node: ``assignment[v]`` in ``[0, num_clients)``, or
    :data:`UNASSIGNED` for a node in no client (``louvain-largest``)."""

    assignment: np.ndarray  # [n] int64
    method: str
    num_clients: int
    seed: int = 0
    cap: int | None = None  # size bound of the balancing rule (louvain / kmeans)
    _report: PartitionReport | None = field(default=None, repr=False, compare=False)

    @property
    def sizes(self) -> np.ndarray:
        kept = self.assignment[self.assignment != UNASSIGNED]
        return np.bincount(kept, minlength=self.num_clients)

    def nodes_of(self, client: int) -> np.ndarray:
        """Global indices of the nodes of ``client`` (simulator-side only)."""
        return np.flatnonzero(self.assignment == client)

    def report(self, data: Data | None = None) -> PartitionReport:
        """Statistics; computed at partition time, or recomputed for ``data``."""
        if data is not None:
            return partition_report(data, self.assignment, self.num_clients, self.method, self.cap)
        if self._report is None:
            raise ValueError("this Partition has no stored report; call report(data)")
        return self._report


def _check_common(data: Data, num_clients: int) -> int:
    n = int(data.num_nodes)
    if isinstance(num_clients, bool) or not isinstance(num_clients, int | np.integer):
        raise ValueError(f"num_clients must be an integer, got {num_clients!r}")
    if num_clients < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients}")
    if num_clients > n:
        raise ValueError(f"num_clients ({num_clients}) exceeds the number of nodes ({n})")
    return n


def partition_graph(
    data: Data,
    num_clients: int,
    method: Method = "random",
    seed: int = 0,
    slack: int | None = None,
    cut: float | None = None,
) -> Partition:
    """Partition ``data``'s nodes into ``num_clients`` clients (see module docstring).

    ``slack`` only applies to ``louvain`` and ``kmeans`` (cap = ceil(n/K) + slack); ``cut``
    raises the edge cut to at least that fraction (:func:`raise_cut`).

    Raises:
        ValueError: unknown method, ``num_clients < 1``, ``num_clients > num_nodes``,
            negative slack, or ``kmeans`` without node features.
    """
    if method not in METHODS:
        raise ValueError(f"unknown partition method {method!r}; choose one of {METHODS}")
    n = _check_common(data, num_clients)
    K = int(num_clients)
    cap = None
    if method == "random":
        perm = np.random.default_rng([seed, _RANDOM_SALT]).permutation(n)
        assignment = np.empty(n, dtype=np.int64)
        for k, part in enumerate(np.array_split(perm, K)):
            assignment[part] = k
    elif method == "louvain-chunks":
        pairs = undirected_pairs(data.edge_index, n)
        order = np.argsort(_louvain(pairs, n, seed), kind="stable")
        assignment = np.empty(n, dtype=np.int64)
        for k, part in enumerate(np.array_split(order, K)):
            assignment[part] = k
    elif method == "louvain-largest":
        pairs = undirected_pairs(data.edge_index, n)
        assignment = largest_communities(_louvain(pairs, n, seed), K)
    else:
        if slack is None:
            slack = math.ceil(0.05 * n / K)
        if isinstance(slack, bool) or not isinstance(slack, int | np.integer) or slack < 0:
            raise ValueError(f"slack must be an integer >= 0, got {slack!r}")
        cap = math.ceil(n / K) + int(slack)
        pairs = undirected_pairs(data.edge_index, n)
        if method == "louvain":
            communities = _louvain(pairs, n, seed)
        else:
            if getattr(data, "x", None) is None:
                raise ValueError("kmeans partition needs node features (data.x)")
            communities = kmeans(data.x, K, seed=seed)
        assignment = balance_communities(communities, K, cap, pairs)
    if cut is not None:
        assignment = raise_cut(assignment, undirected_pairs(data.edge_index, n), cut, seed)
    part = Partition(assignment=assignment, method=method, num_clients=K, seed=seed, cap=cap)
    part._report = partition_report(data, assignment, K, method, cap)
    logger.info("%s", part._report.summary())
    return part


def raise_cut(assignment: np.ndarray, pairs: np.ndarray, target: float, seed: int) -> np.ndarray:
    """``assignment`` with the clients of random node pairs swapped until at least ``target``
    of the undirected ``pairs`` are cut: swaps along one seeded order, as many as a bisection
    needs to reach it (one swap fewer cuts less; client sizes unchanged). Unchanged if it
    already cuts that much.

    Raises:
        ValueError: ``target`` outside (0, 1), a node in no client, or a target that even
            swapping every node falls short of (a random partition's cut).
    """
    if not 0 < target < 1:
        raise ValueError(f"cut must lie in (0, 1), got {target!r}")
    a = np.asarray(assignment, dtype=np.int64)
    if (a == UNASSIGNED).any():
        raise ValueError("cut needs every node in a client")
    order = np.random.default_rng([seed, _CUT_SALT]).permutation(a.size)

    def swapped(s: int) -> tuple[np.ndarray, float]:
        b = a.copy()
        x, y = order[0 : 2 * s : 2], order[1 : 2 * s : 2]
        b[x], b[y] = a[y], a[x]
        return b, float((b[pairs[0]] != b[pairs[1]]).mean()) if pairs.size else 0.0

    if swapped(0)[1] >= target:
        return a
    lo, hi = 0, a.size // 2
    best, reached = swapped(hi)
    if reached < target:
        raise ValueError(f"cut {target} is out of reach: swapping every node cuts {reached:.3f}")
    while hi - lo > 1:  # swapped(lo) cuts less than target, swapped(hi) at least target
        mid = (lo + hi) // 2
        b, c = swapped(mid)
        lo, hi, best = (lo, mid, b) if c >= target else (mid, hi, best)
    return best


#: Louvain is the slow step of a run (tens of seconds on PubMed) and a pure function of the
#: edges and the seed: the last few results are kept for the next algorithm of the same seed
_LOUVAIN_CACHE: OrderedDict[tuple[int, int, str], np.ndarray] = OrderedDict()
_LOUVAIN_CACHE_SIZE = 8


def _louvain(pairs: np.ndarray, n: int, seed: int) -> np.ndarray:
    key = (n, int(seed), hashlib.sha256(np.ascontiguousarray(pairs).tobytes()).hexdigest())
    if key not in _LOUVAIN_CACHE:
        _LOUVAIN_CACHE[key] = _louvain_uncached(pairs, n, seed)
        while len(_LOUVAIN_CACHE) > _LOUVAIN_CACHE_SIZE:
            _LOUVAIN_CACHE.popitem(last=False)
    _LOUVAIN_CACHE.move_to_end(key)
    return _LOUVAIN_CACHE[key].copy()


def _louvain_uncached(pairs: np.ndarray, n: int, seed: int) -> np.ndarray:
    import community as community_louvain  # python-louvain
    import networkx as nx

    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from(zip(pairs[0].tolist(), pairs[1].tolist(), strict=True))
    best = community_louvain.best_partition(G, random_state=seed)
    labels = np.fromiter((best[v] for v in range(n)), dtype=np.int64, count=n)
    return labels


def largest_communities(communities: np.ndarray, num_clients: int) -> np.ndarray:
    """Client ``k`` = the ``k``-th largest community (ties: the lower label first); every
    other node :data:`UNASSIGNED`. Raises ``ValueError`` with fewer communities than K."""
    comm = np.asarray(communities, dtype=np.int64)
    _, labels = np.unique(comm, return_inverse=True)
    sizes = np.bincount(labels)
    if sizes.size < num_clients:
        raise ValueError(
            f"Louvain found {sizes.size} communities, fewer than the {num_clients} clients "
            f"(louvain-largest gives each client one community): use at most {sizes.size} "
            "clients, or another partition (louvain, louvain-chunks)"
        )
    ranked = np.argsort(-sizes, kind="stable")[:num_clients]
    client_of = np.full(sizes.size, UNASSIGNED, dtype=np.int64)
    client_of[ranked] = np.arange(num_clients)
    return client_of[labels]


# --------------------------------------------------------------------------- balancing


def _bfs_rank(pairs: np.ndarray, communities: np.ndarray, n: int) -> np.ndarray:
    """Order of all nodes: by community, then by connected component of the community's
    induced subgraph, then BFS discovery order inside the component, the BFS starting at
    a pseudo-peripheral node (the last node reached by a BFS from the component's
    lowest-numbered node, as in Cuthill-McKee), so consecutive chunks are compact."""
    inside = communities[pairs[0]] == communities[pairs[1]]
    u, v = pairs[0][inside], pairs[1][inside]
    adj = sp.coo_matrix(
        (np.ones(2 * u.size, dtype=np.int8), (np.concatenate([u, v]), np.concatenate([v, u]))),
        shape=(n, n),
    )
    ncomp, comp = connected_components(adj, directed=False)
    roots = np.full(ncomp, n, dtype=np.int64)
    np.minimum.at(roots, comp, np.arange(n))
    for _ in range(2):
        rank = _bfs_from_roots(adj, roots, n)
        last = np.full(ncomp, -1, dtype=np.int64)
        np.maximum.at(last, comp, rank)
        node_at = np.empty(n, dtype=np.int64)
        node_at[rank] = np.arange(n)
        roots = node_at[last]
    return np.lexsort((rank, comp, communities))


def _bfs_from_roots(adj: sp.coo_matrix, roots: np.ndarray, n: int) -> np.ndarray:
    """BFS discovery rank of every node, one BFS per component from ``roots``.

    A super node n linked to every root makes it a single scipy call; a FIFO BFS visits
    each component's nodes in the same relative order as a BFS from its root alone.
    """
    rows = np.concatenate([adj.row, np.full(roots.size, n)])
    cols = np.concatenate([adj.col, roots])
    big = sp.csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(n + 1, n + 1))
    order = breadth_first_order(big, n, directed=True, return_predecessors=False)
    rank = np.empty(n + 1, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank[:n] - 1


def balance_communities(
    communities: np.ndarray, num_clients: int, cap: int, pairs: np.ndarray | None = None
) -> np.ndarray:
    """FedSage+ balancing of community labels into ``num_clients`` clients of size
    ``<= cap`` (the module docstring). ``pairs``: undirected edges [2, m]
    used for the BFS order inside communities (node order if None)."""
    comm = np.asarray(communities, dtype=np.int64)
    n, K = comm.size, int(num_clients)
    if not 1 <= K <= n:
        raise ValueError(f"num_clients must be in [1, {n}], got {K}")
    if cap * K < n:
        raise ValueError(f"cap ({cap}) * num_clients ({K}) < num_nodes ({n})")
    order = np.lexsort((np.arange(n), comm)) if pairs is None else _bfs_rank(pairs, comm, n)
    _, starts, counts = np.unique(comm[order], return_index=True, return_counts=True)
    # pieces as (start, stop) slices of `order`
    pieces: list[tuple[int, int]] = []
    for s, c in zip(starts.tolist(), counts.tolist(), strict=True):
        pieces.extend((p, min(p + cap, s + c)) for p in range(s, s + c, cap))
    while len(pieces) < K:  # halve the largest piece (ties: earliest) until K pieces
        i = max(range(len(pieces)), key=lambda j: (pieces[j][1] - pieces[j][0], -j))
        a, b = pieces[i]
        mid = a + (b - a + 1) // 2
        pieces[i : i + 1] = [(a, mid), (mid, b)]
    pieces.sort(key=lambda ab: (-(ab[1] - ab[0]), ab[0]))

    assignment = np.empty(n, dtype=np.int64)
    load = np.zeros(K, dtype=np.int64)
    for k, (a, b) in enumerate(pieces[:K]):
        assignment[order[a:b]] = k
        load[k] = b - a
    for a, b in pieces[K:]:
        size = b - a
        fits = np.flatnonzero(load + size <= cap)
        if fits.size:
            k = int(fits[0])
            assignment[order[a:b]] = k
            load[k] += size
            continue
        while a < b:  # deviation: fill the least-loaded clients up to cap
            k = int(np.argmin(load))
            take = min(cap - int(load[k]), b - a)
            assignment[order[a : a + take]] = k
            load[k] += take
            a += take
    return assignment


# --------------------------------------------------------------------------- k-means


def kmeans(
    x: torch.Tensor | np.ndarray,
    k: int,
    seed: int = 0,
    max_iter: int = 100,
    tol: float = 1e-4,
) -> np.ndarray:
    """Lloyd's k-means with k-means++ init (Arthur & Vassilvitskii 2007), one run.

    Vectorised torch on CPU (distances via ||x||^2 - 2 x.c + ||c||^2: float32 products,
    float64 norms and centres); randomness from ``np.random.default_rng(seed)``.
    k-means++ uses sklearn's ``2 + ln k`` local trials. Stops when the squared centre
    shift falls below ``tol`` times the mean feature variance (sklearn's rule) or after
    ``max_iter`` iterations. An empty cluster is re-seeded with the point farthest from
    its centre. Returns labels [n] int64 in ``[0, k)``.
    """
    X = torch.as_tensor(x).detach().cpu()
    X = X.reshape(X.shape[0], -1).to(torch.float32).contiguous()
    n = X.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}], got {k}")
    rng = np.random.default_rng(seed)
    sq = (X * X).sum(dim=1).double()

    def dist2(C: torch.Tensor) -> torch.Tensor:
        C32 = C.to(torch.float32)
        cn = (C32 * C32).sum(dim=1, dtype=torch.float64)
        return (sq[:, None] - 2.0 * (X @ C32.T).double() + cn[None, :]).clamp_(min=0.0)

    trials = 2 + int(math.log(k))
    centres = torch.empty((k, X.shape[1]), dtype=torch.float64)
    centres[0] = X[int(rng.integers(n))]
    closest = dist2(centres[:1])[:, 0].numpy()
    for c in range(1, k):
        total = closest.sum()
        if total <= 0:  # every point sits on a chosen centre
            cand = rng.integers(n, size=trials)
        else:
            cand = np.searchsorted(np.cumsum(closest), rng.random(trials) * total)
            cand = np.minimum(cand, n - 1)
        d = np.minimum(closest[:, None], dist2(X[torch.from_numpy(cand)]).numpy())
        best = int(np.argmin(d.sum(axis=0)))
        centres[c] = X[int(cand[best])]
        closest = d[:, best]

    mean = X.mean(dim=0).double()
    threshold = tol * float((sq.sum() / n - (mean * mean).sum()) / X.shape[1])
    for _ in range(max_iter):
        d = dist2(centres)
        dmin, labels = d.min(dim=1)
        counts = torch.bincount(labels, minlength=k)
        new = torch.zeros((k, X.shape[1]), dtype=torch.float32).index_add_(0, labels, X)
        new = new.double()
        nonempty = counts > 0
        new[nonempty] /= counts[nonempty, None].double()
        empty = torch.nonzero(~nonempty).flatten()
        if empty.numel():
            far = torch.argsort(dmin, descending=True, stable=True)
            new[empty] = X[far[: empty.numel()]].double()
        shift = float(((new - centres) ** 2).sum())
        centres = new
        if shift <= threshold:
            break
    return dist2(centres).argmin(dim=1).numpy().astype(np.int64)
