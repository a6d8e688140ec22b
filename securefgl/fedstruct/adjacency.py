"""FedStruct's L-hop combined adjacency Ā, centrally and federated (Algorithm 3).

FedStruct (Aliakbari, Östman, Graell i Amat, ICLR 2025), Eq. 2 and App. D:
``Ā = Σ_{ℓ=1}^{L_s} β_ℓ Â^ℓ`` with the row-stochastic ``Â = D̃^{-1}(A + I)`` (global degrees,
inter-client edges included). Default β is one-hot at ``L_s`` (``β_{L_s} = 1``, as in all
of the paper's experiments), so ``Ā = Â^{L_s}``.

* :func:`central_abar` is the SIMULATOR-SIDE reference (it needs the global graph). It
  follows the official repository's ``calc_abar``/``prune``: optional pruning keeps the
  global top-``p·n`` values after every multiplication, without renormalisation.
* :class:`AdjacencyClient` + :func:`build_abar` run Algorithm 3 (Eqs. 32-37) between
  parties that see only their own :class:`~securefgl.data.ClientGraph` (``known``
  cross-edge setting). Per hop ``ℓ = 2..L_s`` client ``k`` computes, for every client
  ``i`` it shares an edge with, ``B_ik = Ã^[i]_k [Â^[k]]^{ℓ-1}`` (all column clients
  ``j`` at once), and ``i`` forms ``[Â^[i]]^ℓ = (D̃^[i])^{-1} (B_ii + Σ_{k≠i} B_ik)``.
  The "senders contribute, receiver gets the sum" step is a :class:`HopSum` strategy;
  :class:`PlainHopSum` (the paper's scheme) sends every ``B_ik`` in the clear; the secure
  strategies (masked / CKKS sums) live in :mod:`securefgl.fedstruct.adjacency_secure`.

Deviations from the paper (and why):

* Columns are the opaque global ids of ``securefgl.data.views`` (a permutation of
  ``range(n)``), not a client-major order: a client does not know which client owns a
  non-adjacent node, so the ``K`` blocks ``B_ijk, j ∈ [K]`` are one ``[r_ik, n]`` block.
  Rows of ``B_ik`` are only ``i``'s nodes adjacent to ``k`` (the others are zero), named
  by opaque id; ``k`` knows them from its own external edges.
* Blocks with ``Ã^[i]_k = 0`` are not sent (Alg. 3 would send zeros); which client pairs
  share an edge is therefore visible on the transcript (each client knows its own
  neighbouring clients anyway).
* Sender-side pruning (``prune="sender"``, Eq. 37) keeps the top ``⌈p/K⌉·n_i`` values of
  the whole ``B_ik`` (all ``j``), not of each ``B_ijk`` (``k`` cannot split columns by
  ``j``), so a receiver's summed block has at most ``≈ p·n_i`` entries per hop (the
  paper's per-``j`` rule gives up to ``≈ K·p·n_i``, seed_fedstruct.md §8.3). The locally
  computed ``B_ii`` is pruned with the same budget (Eq. 37 sums pruned blocks for every
  ``k``); hop 1 is not pruned (Alg. 3 prunes only what is sent). Senders need ``n_i``:
  each client announces its node count to its neighbouring clients once
  (``fedstruct/abar/size``), a documented leak.
* Receiver-side pruning (``prune="receiver"``) is the per-client analogue of the
  repository's global rule: client ``i`` keeps the top ``⌈p·n_i⌉`` values of
  ``[Â^[i]]^ℓ`` after every hop including hop 1. Neither rule reproduces the centrally
  pruned matrix; unpruned, the federated rows equal the central ones (up to rounding).
* "Top" is by value (entries are non-negative, so also by magnitude); ties are broken
  arbitrarily but deterministically.

Cost (Cora, K = 10 random, L_s = 10, one run on 2 cores): unpruned Ā has 5.98 M entries
(82 % of n²) and the plain exchange moves 1.14 GB peer to peer (2.28 GB relayed), 6-13 s vs
1.0 s for :func:`central_abar`; receiver pruning with p = 30 moves 40 MB (80 MB relayed) in
0.9 s, sender pruning 12 MB (23 MB). The channel's serialisation dominates the time.
"""

from __future__ import annotations

import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import scipy.sparse as sp
from tqdm.auto import tqdm

from protocols.base import Envelope
from protocols.wire import Payload, WireFormatError

if TYPE_CHECKING:
    from securefgl.data.views import ClientGraph
    from securefgl.federation import Channel, Executor

__all__ = [
    "BLOCK_TAG",
    "PRUNE_MODES",
    "SIZE_TAG",
    "AbarBuildReport",
    "AdjacencyClient",
    "AdjacencyRelay",
    "HopContext",
    "HopStats",
    "HopSum",
    "PlainHopSum",
    "SparseRows",
    "build_abar",
    "central_abar",
    "client_party_id",
    "keep_top_values",
    "normalized_adjacency",
    "resolve_beta",
]

logger = logging.getLogger(__name__)

BLOCK_TAG = "fedstruct/abar/B"
SIZE_TAG = "fedstruct/abar/size"
PRUNE_MODES = ("sender", "receiver")
PruneMode = Literal["sender", "receiver"]


# --------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------


def client_party_id(client: int) -> str:
    """Party id of client ``client`` (same convention as ``securefgl.algorithms``)."""
    return f"client-{int(client)}"


def resolve_beta(hops: int, beta: Sequence[float] | None = None) -> tuple[float, ...]:
    """``(β_1, ..., β_{L_s})``; ``None`` means one-hot at ``L_s`` (the paper's setting)."""
    if isinstance(hops, bool) or not isinstance(hops, int | np.integer) or hops < 1:
        raise ValueError(f"hops (L_s) must be an integer >= 1, got {hops!r}")
    if beta is None:
        return (0.0,) * (int(hops) - 1) + (1.0,)
    out = tuple(float(b) for b in beta)
    if len(out) != hops:
        raise ValueError(f"beta needs one weight per hop ({hops}), got {len(out)}")
    if not all(math.isfinite(b) for b in out):
        raise ValueError(f"beta must be finite, got {out}")
    return out


def keep_top_values(m: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """``m`` with only its ``k`` largest stored values kept (no renormalisation).

    The repository's ``prune`` (global top over the whole matrix). Returns ``m`` itself
    when it has at most ``k`` stored values; otherwise duplicate entries are summed first
    and the result is in canonical format. Ties at the cut-off are common (Cora, p = 30: a
    quarter of the per-client prunings have up to ~1,000 equal values straddling it) and
    are broken by canonical (row, column) order, so what is kept does not depend on how the
    entries happen to be stored or summed (the paper's code uses an argsort, whose order
    among ties is arbitrary).
    """
    if m.nnz <= max(int(k), 0):
        return m
    m = sp.csr_matrix(m)
    if _has_duplicates(m):
        m = m.copy()
        m.sum_duplicates()
    out = _top_values_of_product(m, k)
    out.sort_indices()
    return out


def _top_values_of_product(m: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """:func:`keep_top_values` for ``m`` without duplicate entries (as every sparse product
    and sum is); the result keeps ``m``'s storage order. Only the tied entries are ordered,
    so the cost is one partition of the values. Storage order does not change the values
    of a later product ``X @ result`` (each entry sums over ``X``'s row in ``X``'s order)."""
    k = max(int(k), 0)
    if m.nnz <= k:
        return m
    if k == 0:
        return _empty(*m.shape)
    data = m.data
    cut = np.partition(data, data.size - k)[data.size - k]  # the k-th largest value
    keep = data > cut
    tied = np.flatnonzero(data == cut)
    need = k - int(np.count_nonzero(keep))  # >= 1
    if need < tied.size:  # ties straddle the cut-off: the first in (row, column) order
        rows = np.searchsorted(m.indptr, tied, side="right") - 1
        key = rows.astype(np.int64) * m.shape[1] + m.indices[tied]
        tied = tied[np.argpartition(key, need - 1)[:need]]
    keep[tied] = True
    if cut <= 0:
        keep &= data != 0  # no explicit zeros (entries of Ā are products of values >= 0)
    kept_before = np.concatenate(([0], np.cumsum(keep)))
    return sp.csr_matrix((data[keep], m.indices[keep], kept_before[m.indptr]), shape=m.shape)


def _scaled(beta: float, p: sp.csr_matrix, pruned: bool) -> sp.csr_matrix:
    """``β·P``; a pruned ``P`` (storage order kept by the pruning) is stored sorted, as the
    central reference stores it."""
    out = sp.csr_matrix(beta * p)
    if pruned:
        out.sort_indices()
    return out


def _has_duplicates(m: sp.csr_matrix) -> bool:
    """Whether ``m`` stores some position twice, in O(nnz): the CSC conversion is a stable
    counting sort, so a repeated (row, column) shows as equal neighbours in one column."""
    if m.has_canonical_format:
        return False
    t = m.tocsc()
    same = t.indices[1:] == t.indices[:-1]
    starts = t.indptr[1:-1]  # a column's first entry does not repeat the previous column's
    same[starts[(starts > 0) & (starts < t.nnz)] - 1] = False
    return bool(same.any())


def _budget(p: float, n: int) -> int:
    return int(math.ceil(p * n))


def _as_numpy(a: object) -> np.ndarray:
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()  # type: ignore[attr-defined]
    return np.asarray(a)


def _empty(rows: int, cols: int) -> sp.csr_matrix:
    return sp.csr_matrix((rows, cols), dtype=np.float64)


# --------------------------------------------------------------------------------------
# central reference (simulator side)
# --------------------------------------------------------------------------------------


def normalized_adjacency(edge_index: object, num_nodes: int) -> sp.csr_matrix:
    """SIMULATOR SIDE: ``Â = D̃^{-1}(A + I)`` of the global graph (sparse ``[n, n]``).

    Edges are symmetrised and deduplicated, existing self-loops are removed and one
    self-loop per node is added (seed_fedstruct.md §8.2, §8.18).
    """
    n = int(num_nodes)
    ei = _as_numpy(edge_index).astype(np.int64, copy=False)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {ei.shape}")
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        raise ValueError(f"edge_index has node ids outside [0, {n})")
    src, dst = ei
    keep = src != dst
    src, dst = src[keep], dst[keep]
    rows = np.concatenate([src, dst, np.arange(n)])
    cols = np.concatenate([dst, src, np.arange(n)])
    a = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    a.data[:] = 1.0  # duplicates were summed: back to a 0/1 matrix
    deg = np.asarray(a.sum(axis=1)).ravel()
    return sp.csr_matrix(sp.diags(1.0 / deg) @ a)


def central_abar(
    edge_index: object,
    num_nodes: int,
    hops: int,
    beta: Sequence[float] | None = None,
    prune: float | None = None,
) -> sp.csr_matrix:
    """SIMULATOR-SIDE reference: ``Ā = Σ_ℓ β_ℓ Â^ℓ`` from the GLOBAL graph (not federated).

    As the repository's ``calc_abar``: ``P ← Â P`` per hop; with ``prune = p`` the global
    top ``⌈p·n⌉`` values of ``P`` are kept after every multiplication (including the
    first), without renormalisation. Sparse throughout. Rows/columns are global node ids.
    """
    betas = resolve_beta(hops, beta)
    if prune is not None and not prune > 0:
        raise ValueError(f"prune (p) must be > 0, got {prune!r}")
    a_hat = normalized_adjacency(edge_index, num_nodes)
    n = a_hat.shape[0]
    p_mat = sp.identity(n, dtype=np.float64, format="csr")
    abar = _empty(n, n)
    for b in betas:
        p_mat = sp.csr_matrix(a_hat @ p_mat)
        if prune is not None:
            p_mat = _top_values_of_product(p_mat, _budget(prune, n))
        if b != 0.0:
            abar = abar + b * p_mat
    abar = sp.csr_matrix(abar)
    if prune is not None:
        abar.sort_indices()  # the kept entries (<= p·n of them) in canonical order
    return abar


# --------------------------------------------------------------------------------------
# the block on the wire
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Incidence:
    """A client's incidences ``Ã^[i]_k`` for all its neighbouring clients ``i``, stacked."""

    pids: tuple[str, ...]  # the neighbouring clients, in row-block order
    row_ids: np.ndarray  # int64: opaque ids of each block's rows (sorted within a block)
    bounds: np.ndarray  # int64 [len(pids) + 1]: row range of block j = bounds[j]:bounds[j+1]
    matrix: sp.csr_matrix  # [bounds[-1], n_k], one entry per external edge


@dataclass(frozen=True)
class SparseRows:
    """Some rows of an ``[*, n]`` matrix, named by opaque row id (CSR on the wire)."""

    row_ids: np.ndarray  # int64 [r], strictly increasing opaque ids
    matrix: sp.csr_matrix  # [r, n] float64

    def to_payload(self, **meta: object) -> Payload:
        m = self.matrix
        return Payload(
            {
                "rows": np.asarray(self.row_ids, dtype=np.int64),
                "indptr": m.indptr.astype(np.int64),
                "cols": m.indices.astype(np.int64),
                "vals": m.data.astype(np.float64),
            },
            {**meta, "shape": [int(m.shape[0]), int(m.shape[1])]},
        )

    def in_global_rows(self, num_rows: int) -> sp.coo_array:
        """The block as ``[num_rows, n]`` with row ``row_ids[r]`` = row ``r`` (other rows
        empty): the common shape of one receiver's blocks in a secure sum. A canonical COO
        (row-major order, no duplicates or explicit zeros), so the secure sum's gather needs
        no further sort; canonicalises :attr:`matrix` in place (same matrix) if needed."""
        m = self.matrix
        if not m.has_canonical_format:
            m.sum_duplicates()  # per-row sort, in place
        rows = np.repeat(np.asarray(self.row_ids, dtype=np.int64), np.diff(m.indptr))
        nz = m.data != 0
        out = sp.coo_array(
            (m.data[nz], (rows[nz], m.indices[nz].astype(np.int64))), shape=(num_rows, m.shape[1])
        )
        out.has_canonical_format = True  # row ids increase, columns sorted within a row
        return out

    @classmethod
    def from_payload(cls, payload: Payload, num_cols: int) -> SparseRows:
        """Decode and validate (lengths, ranges, finiteness); raises WireFormatError."""
        try:
            rows, indptr = payload.array("rows"), payload.array("indptr")
            cols, vals = payload.array("cols"), payload.array("vals")
        except KeyError as err:
            raise WireFormatError(f"sparse block misses field {err}") from err
        if any(a.ndim != 1 for a in (rows, indptr, cols, vals)):
            raise WireFormatError("sparse block fields must be 1-d")
        if rows.dtype != np.int64 or indptr.dtype != np.int64 or cols.dtype != np.int64:
            raise WireFormatError("sparse block indices must be int64")
        if vals.dtype != np.float64:
            raise WireFormatError("sparse block values must be float64")
        r = rows.size
        if payload.meta.get("shape") != [r, num_cols]:
            raise WireFormatError(
                f"sparse block shape {payload.meta.get('shape')} != {[r, num_cols]}"
            )
        if indptr.size != r + 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
            raise WireFormatError("sparse block indptr is malformed")
        if indptr[-1] != cols.size or cols.size != vals.size:
            raise WireFormatError("sparse block: indptr, cols and vals disagree in length")
        if r and (np.any(np.diff(rows) <= 0) or rows[0] < 0):
            raise WireFormatError("sparse block row ids must be strictly increasing and >= 0")
        if cols.size and (cols.min() < 0 or cols.max() >= num_cols):
            raise WireFormatError(f"sparse block column ids outside [0, {num_cols})")
        if not np.all(np.isfinite(vals)):
            raise WireFormatError("sparse block values must be finite")
        return cls(rows, sp.csr_matrix((vals, cols, indptr), shape=(r, num_cols)))


# --------------------------------------------------------------------------------------
# parties
# --------------------------------------------------------------------------------------


class AdjacencyClient:
    """Client ``i``'s side of Algorithm 3; holds only what client ``i`` knows.

    From its :class:`~securefgl.data.ClientGraph` (``known`` cross edges): its rows
    ``Ã^[i]`` (own nodes → own and external nodes, columns = opaque ids, with
    self-loops), its full degrees ``D̃^[i]`` (internal + external + 1) and its incoming
    blocks ``Ã^[k]_i`` (= its external edges seen from the owner ``k``'s side). After
    :func:`build_abar`, :attr:`abar` is ``Ā^[i]``: csr ``[n_i, n]``, rows in local order
    (:attr:`row_ids` = their opaque ids), columns = opaque ids.
    """

    def __init__(
        self,
        view: ClientGraph,
        party_id: str | None = None,
        party_id_of: Callable[[int], str] = client_party_id,
    ) -> None:
        if view.cross_edges != "known":
            raise ValueError(
                "FedStruct's Ā needs the cross-client edges (Algorithm 3 runs in the "
                f"'known' setting); client {view.client_id} has cross_edges="
                f"{view.cross_edges!r}. Build the views with cross_edges='known'."
            )
        self.party_id = party_id or party_id_of(view.client_id)
        n, n_i = int(view.num_global_nodes), int(view.num_nodes)
        ids = _as_numpy(view.node_ids).astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= n or np.unique(ids).size != n_i):
            raise ValueError(f"{self.party_id}: node_ids must be distinct ids in [0, {n})")
        self.num_global_nodes, self.num_nodes = n, n_i
        self.row_ids = ids  # opaque id of each local row
        self._id_order = np.argsort(ids, kind="stable")

        # Ã^[i]_i: internal edges (self-loops dropped, deduplicated) + I, local columns
        ei = _as_numpy(view.edge_index).astype(np.int64)
        ei = ei[:, ei[0] != ei[1]]
        loops = np.arange(n_i)
        own = sp.csr_matrix(
            (
                np.ones(ei.shape[1] + n_i),
                (np.concatenate([ei[0], loops]), np.concatenate([ei[1], loops])),
            ),
            shape=(n_i, n_i),
        )
        own.data[:] = 1.0
        self._a_own = own

        # external edges (local own endpoint, opaque external id), deduplicated
        ext = _as_numpy(view.external_edges).astype(np.int64)
        owner = _as_numpy(view.external_owner).astype(np.int64)
        if ext.shape[1]:
            if ext[0].min() < 0 or ext[0].max() >= n_i or ext[1].min() < 0 or ext[1].max() >= n:
                raise ValueError(f"{self.party_id}: external edges out of range")
            if np.any(owner == view.client_id) or np.isin(ext[1], ids).any():
                raise ValueError(f"{self.party_id}: an external edge points to an own node")
        _, first = np.unique(ext[0] * n + ext[1], return_index=True)
        ext, owner = ext[:, first], owner[first]
        self._ext_local, self._ext_ids = ext[0], ext[1]

        deg = np.asarray(own.sum(axis=1)).ravel() + np.bincount(ext[0], minlength=n_i)
        self.degree = deg.astype(np.float64)  # D̃^[i]

        # per neighbouring client: the incidence Ã^[k]_i (rows = k's nodes adjacent to me,
        # by opaque id; columns = my local nodes) and my own rows adjacent to k
        owner_ids = sorted({int(o) for o in owner})
        self._neighbours: dict[str, np.ndarray] = {}  # party -> edge positions
        self._expected_rows: dict[str, np.ndarray] = {}  # party -> my opaque ids adjacent
        for o in owner_ids:
            pid = party_id_of(o)
            pos = np.flatnonzero(owner == o)
            self._neighbours[pid] = pos
            self._expected_rows[pid] = np.unique(ids[ext[0][pos]])
        if len(self._neighbours) != len(owner_ids):
            raise ValueError(f"{self.party_id}: party_id_of must be injective")

        self.abar: sp.csr_matrix | None = None
        self._p: sp.csr_matrix | None = None  # [Â^[i]]^ℓ for the current ℓ
        self._hop = 0
        self._betas: tuple[float, ...] = ()
        self._prune: PruneMode | None = None
        self._p_param = 0.0
        self._num_clients = 0
        self._peer_sizes: dict[str, int] = {}
        self._secure_hop: Any = None  # adjacency_secure.SecureHopClient, when hosted
        self._incidence: Incidence | None = None

    # -- public knowledge helpers ---------------------------------------------------

    @property
    def neighbours(self) -> list[str]:
        """Clients this client shares at least one edge with (it sends to / hears from)."""
        return list(self._neighbours)

    @property
    def hop(self) -> int:
        return self._hop

    def outgoing_rows(self) -> sp.csr_matrix:
        """``Ã^[i]`` as csr ``[n_i, n]`` (opaque columns, self-loops included)."""
        own = self._a_own.tocoo()
        rows = np.concatenate([own.row, self._ext_local])
        cols = np.concatenate([self.row_ids[own.col], self._ext_ids])
        return sp.csr_matrix(
            (np.ones(rows.size), (rows, cols)), shape=(self.num_nodes, self.num_global_nodes)
        )

    def _to_local(self, opaque: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self.row_ids, opaque, sorter=self._id_order)
        pos = np.minimum(pos, max(self.num_nodes - 1, 0))
        local = self._id_order[pos] if self.num_nodes else pos
        if opaque.size and (self.num_nodes == 0 or np.any(self.row_ids[local] != opaque)):
            raise ValueError(f"{self.party_id}: received rows that are not my nodes")
        return local

    # -- Algorithm 3 ------------------------------------------------------------------

    def init_abar(
        self, hops: int, beta: Sequence[float], prune: str | None, p: float, num_clients: int
    ) -> int:
        """Hop 1 (local): ``[Â^[i]]^1 = (D̃^[i])^{-1} Ã^[i]``, ``Ā^[i] = β_1 [Â^[i]]^1``.

        Returns ``nnz`` of ``[Â^[i]]^1``.
        """
        self._betas = resolve_beta(hops, beta)
        if prune is not None and prune not in PRUNE_MODES:
            raise ValueError(f"prune must be None or one of {PRUNE_MODES}, got {prune!r}")
        self._prune = prune  # type: ignore[assignment]
        self._p_param = float(p)
        self._num_clients = int(num_clients)
        p1 = sp.csr_matrix(sp.diags(1.0 / self.degree) @ self.outgoing_rows())
        if prune == "receiver":
            p1 = _top_values_of_product(p1, _budget(self._p_param, self.num_nodes))
        self._p, self._hop = p1, 1
        pruned = prune == "receiver"
        self.abar = _scaled(self._betas[0], p1, pruned) if self._betas[0] else _empty(*p1.shape)
        self._peer_sizes = {}
        return int(p1.nnz)

    def announce_size(self, via: str | None = None) -> list[Envelope]:
        """``n_i`` to every neighbouring client (needed by sender-side pruning)."""
        return [
            _address(self.party_id, pid, via, SIZE_TAG, Payload({}, {"n": self.num_nodes}))
            for pid in self._neighbours
        ]

    def receive_sizes(self, inbox: list[Envelope]) -> None:
        for env in inbox:
            sender = _origin(env)
            n = env.payload.meta.get("n")
            if env.tag != SIZE_TAG or sender not in self._neighbours or not isinstance(n, int):
                raise ValueError(f"{self.party_id}: unexpected size message from {sender}")
            self._peer_sizes[sender] = n

    def contributions(self, hop: int) -> dict[str, SparseRows]:
        """``B_ik = Ã^[i]_k [Â^[k]]^{hop-1}`` for every neighbouring client ``i``
        (pruned to ``⌈p/K⌉·n_i`` values with ``prune="sender"``). The blocks are held only
        until sent."""
        inc, prod = self._stacked_product(hop)
        out: dict[str, SparseRows] = {}
        for j, pid in enumerate(inc.pids):
            lo, hi = inc.bounds[j], inc.bounds[j + 1]
            block = prod[lo:hi]
            if self._prune == "sender":
                if pid not in self._peer_sizes:
                    raise RuntimeError(f"{self.party_id}: no size announced by {pid}")
                cap = math.ceil(self._p_param / self._num_clients) * self._peer_sizes[pid]
                block = _top_values_of_product(block, cap)
            out[pid] = SparseRows(inc.row_ids[lo:hi], block)
        return out

    def global_contributions(self, hop: int) -> dict[str, sp.coo_array]:
        """The blocks of :meth:`contributions` as :meth:`SparseRows.in_global_rows` gives
        them (canonical ``[n, n]`` COO, rows = opaque ids), all cut from ONE product."""
        if self._prune == "sender":
            n = self.num_global_nodes
            return {pid: b.in_global_rows(n) for pid, b in self.contributions(hop).items()}
        inc, prod = self._stacked_product(hop)
        rows = np.repeat(inc.row_ids, np.diff(prod.indptr))
        cols, vals = prod.indices.astype(np.int64), prod.data
        cut = prod.indptr[inc.bounds]  # entry range of each receiver's rows
        nz = vals != 0
        if not nz.all():
            rows, cols, vals = rows[nz], cols[nz], vals[nz]
            cut = np.concatenate(([0], np.cumsum(nz)))[cut]
        shape = (self.num_global_nodes, self.num_global_nodes)
        out = {}
        for j, pid in enumerate(inc.pids):
            part = slice(cut[j], cut[j + 1])
            block = sp.coo_array((vals[part], (rows[part], cols[part])), shape=shape)
            block.has_canonical_format = True  # ids increase, columns sorted within a row
            out[pid] = block
        return out

    def _stacked_product(self, hop: int) -> tuple[Incidence, sp.csr_matrix]:
        """``[Ã^[i]_k]_i [Â^[k]]^{hop-1}``: every receiver's rows in one canonical product."""
        self._check_hop(hop)
        assert self._p is not None
        inc = self._incidences()
        prod = sp.csr_matrix(inc.matrix @ self._p)
        prod.sum_duplicates()  # per-row sort: the rows of each B_ik in canonical order
        return inc, prod

    def _incidences(self) -> Incidence:
        """The incidences ``Ã^[i]_k`` of all neighbouring clients ``i``, stacked (rows = the
        opaque ids of ``i``'s nodes adjacent to me, client by client; columns = my local
        nodes): my own external edges, built once and reused per hop."""
        if self._incidence is None:
            pids, ids, rows, cols, bounds = [], [], [], [], [0]
            for pid, pos in self._neighbours.items():
                row_ids, row_of_edge = np.unique(self._ext_ids[pos], return_inverse=True)
                pids.append(pid)
                ids.append(row_ids)
                rows.append(bounds[-1] + row_of_edge.reshape(-1))
                cols.append(self._ext_local[pos])
                bounds.append(bounds[-1] + row_ids.size)
            empty = np.zeros(0, np.int64)
            r, c = np.concatenate([empty, *rows]), np.concatenate([empty, *cols])
            matrix = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(bounds[-1], self.num_nodes))
            row_ids = np.concatenate([empty, *ids])
            self._incidence = Incidence(tuple(pids), row_ids, np.asarray(bounds), matrix)
        return self._incidence

    def send_blocks(self, hop: int, via: str | None = None) -> list[Envelope]:
        """Plain exchange: one envelope per ``B_ik`` (to ``i``, or to ``via`` for relay)."""
        return [
            _address(self.party_id, pid, via, BLOCK_TAG, block.to_payload(hop=hop))
            for pid, block in self.contributions(hop).items()
        ]

    def receive_blocks(self, hop: int, inbox: list[Envelope]) -> None:
        """Plain exchange: sum the individual ``B_ik`` received, then :meth:`complete_hop`."""
        self._check_hop(hop)
        seen: set[str] = set()
        local_rows, blocks = [], []
        for env in inbox:
            sender = _origin(env)
            if env.tag != BLOCK_TAG or env.payload.meta.get("hop") != hop:
                raise ValueError(f"{self.party_id}: unexpected message {env.tag} for hop {hop}")
            if sender not in self._neighbours or sender in seen:
                raise ValueError(f"{self.party_id}: unexpected or duplicate block from {sender}")
            seen.add(sender)
            block = SparseRows.from_payload(env.payload, self.num_global_nodes)
            if not np.array_equal(block.row_ids, self._expected_rows[sender]):
                raise ValueError(
                    f"{self.party_id}: block from {sender} has rows I do not share with it"
                )
            local_rows.append(self._to_local(block.row_ids))
            blocks.append(block.matrix)
        missing = set(self._neighbours) - seen
        if missing:
            raise RuntimeError(f"{self.party_id}: no block from {sorted(missing)} at hop {hop}")
        # Σ_k B_ik = S @ vstack(B_ik), S scattering block rows to local rows: a sparse
        # product accumulates duplicates without sorting (much faster than COO -> CSR)
        rows = np.concatenate([np.zeros(0, np.int64), *local_rows])
        scatter = sp.csr_matrix(
            (np.ones(rows.size), (rows, np.arange(rows.size))), shape=(self.num_nodes, rows.size)
        )
        stacked = sp.vstack(blocks, format="csr") if blocks else _empty(0, self.num_global_nodes)
        self._advance(hop, scatter, stacked)

    def boundary_rows(self) -> np.ndarray:
        """Opaque ids of my nodes with an edge to another client (the only rows any
        ``B_ik`` can fill): the row set of a public product support ``R_i × [n]``."""
        return np.unique(self.row_ids[self._ext_local])

    def boundary_degree_peak(self) -> float:
        """Largest ``D̃_vv`` over my boundary nodes (0 without any): bounds every entry of
        ``Σ_{k≠i} B_ik`` (:class:`~securefgl.fedstruct.adjacency_secure.MaskedHopSum`)."""
        return float(self.degree[self._ext_local].max()) if self._ext_local.size else 0.0

    def complete_hop_global(self, hop: int, total: sp.spmatrix | sp.sparray) -> None:
        """:meth:`complete_hop` from ``Σ_{k≠i} B_ik`` as ``[n, n]`` indexed by opaque row id
        (e.g. a secure-sum result over blocks from :meth:`SparseRows.in_global_rows`)."""
        total = sp.csr_matrix(total, dtype=np.float64)
        if total.shape != (self.num_global_nodes, self.num_global_nodes):
            raise ValueError(f"{self.party_id}: global-row sum has shape {total.shape}")
        mine = total[self.row_ids]
        if mine.nnz != total.nnz:
            raise ValueError(f"{self.party_id}: the sum has entries in rows that are not mine")
        self.complete_hop(hop, mine)

    def complete_hop(self, hop: int, remote_sum: sp.spmatrix | sp.sparray) -> None:
        """``[Â^[i]]^hop = (D̃^[i])^{-1}(B_ii + remote_sum)``, ``Ā^[i] += β_hop [Â^[i]]^hop``.

        ``remote_sum`` = ``Σ_{k≠i} B_ik`` as ``[n_i, n]`` in local row order, however it
        was obtained (plain blocks or a secure-sum result).
        """
        self._check_hop(hop)
        if remote_sum.shape != (self.num_nodes, self.num_global_nodes):
            raise ValueError(f"{self.party_id}: remote sum has shape {remote_sum.shape}")
        eye = sp.identity(self.num_nodes, dtype=np.float64, format="csr")
        self._advance(hop, eye, sp.csr_matrix(remote_sum, dtype=np.float64))

    def _advance(self, hop: int, left: sp.csr_matrix, right: sp.csr_matrix) -> None:
        """``[Â^[i]]^hop = (D̃^[i])^{-1}(B_ii + left @ right)`` as ONE sparse product
        ``D̃^{-1}[left | Ã^[i]_i] @ [right; P]`` (no sorting of large matrices)."""
        self._check_hop(hop)
        assert self._p is not None and self.abar is not None
        own_left, own_right = self._a_own, self._p  # B_ii = Ã^[i]_i [Â^[i]]^{hop-1}
        if self._prune == "sender":  # Eq. 37 prunes every B_ik, the local one too
            cap = math.ceil(self._p_param / self._num_clients) * self.num_nodes
            own_left = sp.identity(self.num_nodes, dtype=np.float64, format="csr")
            own_right = _top_values_of_product(sp.csr_matrix(self._a_own @ self._p), cap)
        lhs = sp.diags(1.0 / self.degree) @ sp.hstack([left, own_left], format="csr")
        p_new = sp.csr_matrix(lhs @ sp.vstack([right, own_right], format="csr"))
        if self._prune == "receiver":
            p_new = _top_values_of_product(p_new, _budget(self._p_param, self.num_nodes))
        self._p, self._hop = p_new, hop
        beta = self._betas[hop - 1]
        if beta != 0.0:
            scaled = _scaled(beta, p_new, self._prune == "receiver")
            self.abar = scaled if self.abar.nnz == 0 else sp.csr_matrix(self.abar + scaled)

    def secure_hop(self, method: str, *args: Any) -> Any:
        """Hook for secure hop sums: ``"host"`` installs this client's side
        (:class:`~securefgl.fedstruct.adjacency_secure.SecureHopClient`, args forwarded);
        any other public ``method`` runs on it."""
        from securefgl.fedstruct import adjacency_secure  # here: it imports this module

        if method == "host":
            self._secure_hop = adjacency_secure.SecureHopClient(self, *args)
            return None
        if self._secure_hop is None or method.startswith("_"):
            raise RuntimeError(f"{self.party_id}: no secure hop sum hosted (or bad {method!r})")
        return getattr(self._secure_hop, method)(*args)

    def current_nnz(self) -> int:
        """``nnz`` of this hop's ``[Â^[i]]^ℓ`` (a diagnostic for the build report)."""
        return int(self._p.nnz) if self._p is not None else 0

    def finish_abar(self) -> int:
        """Drop the per-hop state; returns ``nnz`` of :attr:`abar`."""
        if self.abar is None or self._hop != len(self._betas):
            raise RuntimeError(f"{self.party_id}: Ā is not complete (hop {self._hop})")
        self._p = None
        self.abar.sort_indices()
        return int(self.abar.nnz)

    def _check_hop(self, hop: int) -> None:
        if self._p is None:
            raise RuntimeError(f"{self.party_id}: call init_abar first")
        if hop != self._hop + 1 or hop > len(self._betas):
            raise RuntimeError(
                f"{self.party_id}: hop {hop} out of order (at hop {self._hop} of "
                f"{len(self._betas)})"
            )


class AdjacencyRelay:
    """The server in relay mode: forwards each message to ``meta["to"]``, keeps nothing.

    In the plain scheme it therefore sees every ``B_ik`` (recorded on the transcript).
    """

    def __init__(self, party_id: str, clients: Sequence[str]) -> None:
        self.party_id = party_id
        self.clients = frozenset(clients)
        self._secure_hop: Any = None  # adjacency_secure.SecureHopServer, when hosted

    def secure_hop(self, method: str, *args: Any) -> Any:
        """Hook for secure hop sums: ``"host"`` installs the server side
        (:class:`~securefgl.fedstruct.adjacency_secure.SecureHopServer`); any other public
        ``method`` runs on it."""
        from securefgl.fedstruct import adjacency_secure  # here: it imports this module

        if method == "host":
            self._secure_hop = adjacency_secure.SecureHopServer(self.party_id, *args)
            return None
        if self._secure_hop is None or method.startswith("_"):
            raise RuntimeError(f"{self.party_id}: no secure hop sum hosted (or bad {method!r})")
        return getattr(self._secure_hop, method)(*args)

    def forward(self, inbox: list[Envelope]) -> list[Envelope]:
        out = []
        for env in inbox:
            to = env.payload.meta.get("to")
            if to not in self.clients or env.payload.meta.get("from") != env.sender:
                raise ValueError(f"relay: cannot forward {env.tag} from {env.sender} to {to!r}")
            out.append(Envelope(self.party_id, to, env.tag, env.payload))
        return out


def _address(sender: str, receiver: str, via: str | None, tag: str, payload: Payload) -> Envelope:
    payload.meta.update({"from": sender, "to": receiver})
    return Envelope(sender, via or receiver, tag, payload)


def _origin(env: Envelope) -> str:
    """The original sender: ``meta["from"]`` (``env.sender`` is the relay, if any)."""
    origin = env.payload.meta.get("from")
    if not isinstance(origin, str):
        raise ValueError(f"message {env.tag} from {env.sender} names no origin")
    return origin


# --------------------------------------------------------------------------------------
# per-hop sum strategies
# --------------------------------------------------------------------------------------


@dataclass
class HopContext:
    """What a :class:`HopSum` may use: party ids, the executor and the channel."""

    clients: list[str]
    executor: Executor
    channel: Channel
    server_id: str | None = "server"  # None: clients talk peer to peer

    def deliver(self, envelopes: list[Envelope]) -> dict[str, list[Envelope]]:
        """Transmit (and relay through the server, if the envelopes go there); returns
        each client's inbox. Every hop is recorded on the transcript."""
        delivered = self.channel.transmit(envelopes)
        if self.server_id is not None:
            to_server = [e for e in delivered if e.receiver == self.server_id]
            if to_server:
                forwarded = self.executor.call([(self.server_id, "forward", (to_server,))])[0]
                delivered = [e for e in delivered if e.receiver != self.server_id]
                delivered += self.channel.transmit(forwarded)
        inbox: dict[str, list[Envelope]] = {c: [] for c in self.clients}
        for env in delivered:
            if env.receiver not in inbox:
                raise ValueError(f"message {env.tag} addressed to unknown party {env.receiver}")
            inbox[env.receiver].append(env)
        return inbox


class HopSum(ABC):
    """One hop's exchange: every client ``k`` contributes ``B_ik`` for each neighbouring
    client ``i``; afterwards every client ``i`` has called
    ``AdjacencyClient.complete_hop(hop, Σ_{k≠i} B_ik)``.

    A secure strategy must fix a coordinate system common to all senders of one
    receiver, because ``B_ik``'s rows are only ``i``'s nodes adjacent to ``k`` and its
    columns may be any of the ``n`` nodes:

    * dense rows: every sender of ``i`` encodes ``[R_i, n]`` densely, with ``R_i`` =
      ``i``'s nodes adjacent to any other client (``i`` publishes ``R_i`` to its
      neighbours: they learn its boundary nodes). Hides each sender's support, and so
      what sender-side pruning kept, but costs ``|R_i|·n`` values per sender and hop
      (the ``O(p·n)`` saving of pruning is lost);
    * public support: senders first reveal their supports (to the server or ``i``); the
      union ``U_i`` becomes the public coordinate set and values are summed on it. Sizes
      stay ``O(|U_i|)`` but every sender's support (with sender pruning: its top-k
      positions) leaks to whoever forms the union, and ``U_i`` leaks to all senders;
    * a fixed-size sketch (hashing into ``m`` buckets): lossy.

    With one neighbouring sender the sum is that sender's block: no secure sum hides it.
    Under any secure sum only receiver-side pruning can act on the sum; sender-side
    pruning still works (each sender prunes before encoding) and, with dense rows, reveals
    nothing beyond the sum (in plain mode it reveals nothing extra either: every block is
    seen anyway). A plug-in for ``protocols.secure_sum`` per hop: receiver ``i`` requests a
    sum of shape ``(n, n)`` (rows = opaque ids) with senders :attr:`AdjacencyClient.neighbours`
    and ``Support.product((n, n), rows=i.boundary_rows())``; sender ``k`` contributes
    ``contributions(hop)[i].in_global_rows(n)``; ``i`` passes the sparse result to
    :meth:`AdjacencyClient.complete_hop_global` (its local term ``B_ii`` stays local).
    """

    name: ClassVar[str]

    @abstractmethod
    def run_hop(self, hop: int, ctx: HopContext) -> None: ...

    def hop_notes(self, hop: int) -> dict[str, int]:
        """Strategy-specific counters of the last ``run_hop(hop)`` (into :class:`HopStats`)."""
        return {}


@dataclass
class PlainHopSum(HopSum):
    """The paper's scheme: each ``B_ik`` is sent in the clear (relayed by the server if
    ``ctx.server_id`` is set); client ``i`` sums what it receives.

    Threat model: none. Client ``i`` (and a relaying server) sees every individual
    ``B_ik``; a row of ``i`` with one neighbour ``u`` in ``k`` reveals row ``u`` of
    ``[Â^[k]]^{ℓ-1}`` exactly (seed_fedstruct.md §7.3).
    """

    name: ClassVar[str] = "plain"

    def run_hop(self, hop: int, ctx: HopContext) -> None:
        sent = ctx.executor.call([(c, "send_blocks", (hop, ctx.server_id)) for c in ctx.clients])
        inbox = ctx.deliver([env for batch in sent for env in batch])
        ctx.executor.call([(c, "receive_blocks", (hop, inbox[c])) for c in ctx.clients])


# --------------------------------------------------------------------------------------
# orchestration
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HopStats:
    hop: int  # 1 = local set-up (and the size announcement for sender pruning)
    seconds: float
    bytes: int
    messages: int
    nnz: int  # Σ_i nnz([Â^[i]]^hop) after pruning
    notes: dict[str, int] = field(default_factory=dict)  # HopSum.hop_notes


@dataclass
class AbarBuildReport:
    hops: list[HopStats] = field(default_factory=list)
    abar_nnz: int = 0

    @property
    def seconds(self) -> float:
        return sum(h.seconds for h in self.hops)

    @property
    def bytes(self) -> int:
        return sum(h.bytes for h in self.hops)

    @property
    def messages(self) -> int:
        return sum(h.messages for h in self.hops)


def build_abar(
    clients: Mapping[str, AdjacencyClient] | Sequence[str],
    channel: Channel,
    executor: Executor,
    hops: int,
    beta: Sequence[float] | None = None,
    prune: PruneMode | None = None,
    p: float = 30,
    hop_sum: HopSum | None = None,
    server_id: str | None = "server",
    progress: bool = False,
) -> AbarBuildReport:
    """Run Algorithm 3; afterwards every client party holds ``abar`` = ``Ā^[i]``.

    ``clients`` are the client party ids (or a mapping from them); the executor must
    host them and, when ``server_id`` is set, an :class:`AdjacencyRelay` under that id
    (plain messages then go client → server → client; ``None``: peer to peer). Hops
    are separated by a barrier (each is one ``hop_sum.run_hop`` call). ``channel.round``
    is left as the caller set it; messages carry their hop in ``meta["hop"]``.
    Returns per-hop wall time, bytes and messages (from the transcript). ``progress``: a
    bar over the hops (on a terminal).
    """
    betas = resolve_beta(hops, beta)
    if prune is not None and prune not in PRUNE_MODES:
        raise ValueError(f"prune must be None or one of {PRUNE_MODES}, got {prune!r}")
    if prune is not None and not p > 0:
        raise ValueError(f"p must be > 0, got {p!r}")
    ids = list(clients)
    if not ids:
        raise ValueError("no clients")
    for pid, party in clients.items() if isinstance(clients, Mapping) else ():
        if party.party_id != pid:
            raise ValueError(f"client {pid!r} is keyed under another id ({party.party_id!r})")
    hop_sum = hop_sum if hop_sum is not None else PlainHopSum()
    ctx = HopContext(ids, executor, channel, server_id)
    entries = channel.transcript.entries
    report = AbarBuildReport()

    def stats(hop: int, t0: float, start: int, nnz: int) -> HopStats:
        new, dt = entries[start:], time.perf_counter() - t0
        notes = hop_sum.hop_notes(hop) if hop > 1 else {}
        return HopStats(hop, dt, sum(e.nbytes for e in new), len(new), nnz, notes)

    t0, start = time.perf_counter(), len(entries)
    nnz = executor.call([(c, "init_abar", (hops, list(betas), prune, p, len(ids))) for c in ids])
    if prune == "sender":
        sent = executor.call([(c, "announce_size", (server_id,)) for c in ids])
        inbox = ctx.deliver([env for batch in sent for env in batch])
        executor.call([(c, "receive_sizes", (inbox[c],)) for c in ids])
    report.hops.append(stats(1, t0, start, sum(nnz)))
    bar = tqdm(
        range(2, len(betas) + 1),
        desc=f"Ā hops ({hop_sum.name})",
        disable=None if progress else True,
        leave=False,
    )
    for hop in bar:
        t0, start = time.perf_counter(), len(entries)
        hop_sum.run_hop(hop, ctx)
        report.hops.append(stats(hop, t0, start, sum(executor.map(ids, "current_nnz"))))
        h = report.hops[-1]
        logger.info(
            "Ā hop %d/%d (%s): %.2fs, %d messages, %.1f MB, nnz %d",
            hop, len(betas), hop_sum.name, h.seconds, h.messages, h.bytes / 1e6, h.nnz,
        )  # fmt: skip
    report.abar_nnz = sum(executor.call([(c, "finish_abar", ()) for c in ids]))
    logger.info(
        "Ā built (L_s=%d, prune=%s): %.2fs, %.1f MB, nnz %d",
        len(betas), prune, report.seconds, report.bytes / 1e6, report.abar_nnz,
    )  # fmt: skip
    return report
