"""Client and relay parties of FedStruct's federated Ā (Algorithm 3, App. D, Eqs. 32-37).

:class:`AdjacencyClient` holds only what client ``i``'s view holds (``known`` cross edges):
its rows ``Ã^[i]`` (opaque-id columns, self-loops), its full degrees ``D̃^[i]`` and its
incidences ``Ã^[k]_i``. Per hop ``ℓ = 2..L_s`` it computes ``B_ik = Ã^[i]_k [Â^[k]]^{ℓ-1}``
for every neighbouring client ``i`` and completes its own hop from ``Σ_{k≠i} B_ik``
(``abar_build`` runs the hops; ``abar_secure`` sums the blocks securely).
:class:`AdjacencyRelay` is the server in relay mode.

Deviations from the paper: columns are opaque global ids (a client does not know who owns
a non-adjacent node), so the blocks ``B_ijk, j ∈ [K]`` are one ``[r_ik, n]`` block; blocks
with ``Ã^[i]_k = 0`` are not sent (which clients share an edge is visible); sender pruning
(Eq. 37) keeps the top ``⌈p/K⌉·n_i`` values of the whole ``B_ik`` and needs ``n_i``, which
each client announces to its neighbouring clients; receiver pruning keeps the top
``⌈p·n_i⌉`` values of ``[Â^[i]]^ℓ`` after every hop. Unpruned, the federated rows equal
the central ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import scipy.sparse as sp

from protocols.base import Envelope
from protocols.wire import Payload, WireFormatError
from securefgl.algorithms.fedstruct.abar_central import (
    PRUNE_MODES,
    as_numpy,
    budget,
    empty,
    resolve_beta,
    scaled,
    top_values_of_product,
)
from securefgl.algorithms.fedstruct.abar_secure_roles import SecureHops, UnionRelay
from securefgl.federation.hosted_sums import HostedSum
from securefgl.federation.party import Party, client_party_id

if TYPE_CHECKING:
    from securefgl.data.views import ClientGraph

__all__ = [
    "BLOCK_TAG",
    "SIZE_TAG",
    "AdjacencyClient",
    "AdjacencyRelay",
    "SparseRows",
]

BLOCK_TAG = "fedstruct/abar/B"
SIZE_TAG = "fedstruct/abar/size"
PruneMode = Literal["sender", "receiver"]


def relay_envelope(
    sender: str, receiver: str, via: str | None, tag: str, payload: Payload
) -> Envelope:
    """An envelope to ``receiver``, sent to ``via`` (the relay) if given; the relay reads
    the addressee from ``meta["to"]`` and the origin from ``meta["from"]``."""
    payload.meta.update({"from": sender, "to": receiver})
    return Envelope(sender, via or receiver, tag, payload)


def origin_of(env: Envelope) -> str:
    """The original sender: ``meta["from"]`` (``env.sender`` is the relay, if any)."""
    origin = env.payload.meta.get("from")
    if not isinstance(origin, str):
        raise ValueError(f"message {env.tag} from {env.sender} names no origin")
    return origin


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


class AdjacencyClient(SecureHops, Party):
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
        ids = as_numpy(view.node_ids).astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= n or np.unique(ids).size != n_i):
            raise ValueError(f"{self.party_id}: node_ids must be distinct ids in [0, {n})")
        self.num_global_nodes, self.num_nodes = n, n_i
        self.row_ids = ids  # opaque id of each local row
        self._id_order = np.argsort(ids, kind="stable")

        # Ã^[i]_i: internal edges (self-loops dropped, deduplicated) + I, local columns
        ei = as_numpy(view.edge_index).astype(np.int64)
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
        ext = as_numpy(view.external_edges).astype(np.int64)
        owner = as_numpy(view.external_owner).astype(np.int64)
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
        self.sums = HostedSum(self.party_id)  # the secure hop sums, when hosted
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
            p1 = top_values_of_product(p1, budget(self._p_param, self.num_nodes))
        self._p, self._hop = p1, 1
        pruned = prune == "receiver"
        self.abar = scaled(self._betas[0], p1, pruned) if self._betas[0] else empty(*p1.shape)
        self._peer_sizes = {}
        return int(p1.nnz)

    def announce_size(self, via: str | None = None) -> list[Envelope]:
        """``n_i`` to every neighbouring client (needed by sender-side pruning)."""
        return [
            relay_envelope(self.party_id, pid, via, SIZE_TAG, Payload({}, {"n": self.num_nodes}))
            for pid in self._neighbours
        ]

    def receive_sizes(self, inbox: list[Envelope]) -> None:
        for env in inbox:
            sender = origin_of(env)
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
                block = top_values_of_product(block, cap)
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
            relay_envelope(self.party_id, pid, via, BLOCK_TAG, block.to_payload(hop=hop))
            for pid, block in self.contributions(hop).items()
        ]

    def receive_blocks(self, hop: int, inbox: list[Envelope]) -> None:
        """Plain exchange: sum the individual ``B_ik`` received, then :meth:`complete_hop`."""
        self._check_hop(hop)
        seen: set[str] = set()
        local_rows, blocks = [], []
        for env in inbox:
            sender = origin_of(env)
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
        stacked = sp.vstack(blocks, format="csr") if blocks else empty(0, self.num_global_nodes)
        self._advance(hop, scatter, stacked)

    def boundary_rows(self) -> np.ndarray:
        """Opaque ids of my nodes with an edge to another client (the only rows any
        ``B_ik`` can fill): the row set of a public product support ``R_i × [n]``."""
        return np.unique(self.row_ids[self._ext_local])

    def boundary_degree_peak(self) -> float:
        """Largest ``D̃_vv`` over my boundary nodes (0 without any): bounds every entry of
        ``Σ_{k≠i} B_ik`` (:class:`~securefgl.algorithms.fedstruct.abar_secure.MaskedHopSum`)."""
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
            own_right = top_values_of_product(sp.csr_matrix(self._a_own @ self._p), cap)
        lhs = sp.diags(1.0 / self.degree) @ sp.hstack([left, own_left], format="csr")
        p_new = sp.csr_matrix(lhs @ sp.vstack([right, own_right], format="csr"))
        if self._prune == "receiver":
            p_new = top_values_of_product(p_new, budget(self._p_param, self.num_nodes))
        self._p, self._hop = p_new, hop
        beta = self._betas[hop - 1]
        if beta != 0.0:
            term = scaled(beta, p_new, self._prune == "receiver")
            self.abar = term if self.abar.nnz == 0 else sp.csr_matrix(self.abar + term)

    def roles(self) -> Iterable[object | None]:
        return (self, *self.sums.roles())

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


class AdjacencyRelay(UnionRelay, Party):
    """The server in relay mode: forwards each message to ``meta["to"]``, keeps nothing.

    In the plain scheme it therefore sees every ``B_ik`` (recorded on the transcript).
    """

    def __init__(self, party_id: str, clients: Sequence[str]) -> None:
        self.party_id = party_id
        self.clients = frozenset(clients)
        self.sums = HostedSum(party_id)  # the secure hop sums, when hosted

    def roles(self) -> Iterable[object | None]:
        return (self, *self.sums.roles())

    def forward(self, inbox: list[Envelope]) -> list[Envelope]:
        out = []
        for env in inbox:
            to = env.payload.meta.get("to")
            if to not in self.clients or env.payload.meta.get("from") != env.sender:
                raise ValueError(f"relay: cannot forward {env.tag} from {env.sender} to {to!r}")
            out.append(Envelope(self.party_id, to, env.tag, env.payload))
        return out
