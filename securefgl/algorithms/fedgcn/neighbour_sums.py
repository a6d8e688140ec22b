"""FedGCN's pre-training: every client's neighbour aggregates ``ÂX`` (and ``Â²X``) by
secure sums (FedGCN, Yao et al. 2023, Eqs. 3-4; FedStruct, Aliakbari et al. 2025, App. C.4).

Client ``i`` needs, for each node ``v``, ``H^h_v = Σ_{u∈Ñ(v)} Â_vu H^{h-1}_u`` over ALL of
``v``'s neighbours (``H⁰ = X``, global degrees). ``Â_vu = r_v s_u`` factorises, so the owner
``k`` of a neighbour contributes ``C_ki[v] = Σ_{u∈V_k∩N(v)} s_u H^{h-1}_u`` and ``i`` forms
``H^h_v = r_v (Σ_{u∈V_i∩Ñ(v)} s_u H^{h-1}_u + Σ_k C_ki[v])``: exactly the global rows. Each
hop's ``Σ_k`` is one batch of hosted secure sums
(:class:`~securefgl.federation.hosted_sums.SecureSumDriver`): receiver ``i``'s senders are
the owners of its external neighbours, the job shape ``(n, d)`` (rows: opaque ids) on the
public support ``R_i`` (its boundary nodes) × all columns.

Who learns what: the receiver learns ``Σ_k C_ki`` (with one neighbouring client, that
client's contribution: ``masked`` / ``ckks`` refuse it unless ``min_senders = 1``); with
``plain`` the receiver and the server see every ``C_ki``; with ``masked`` / ``ckks`` the
server learns nothing of any value and holds no decryption key. Public: sender sets,
shapes, ``R_i``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from protocols.base import ProtocolError
from protocols.secure_sum import SumRequest, Support, TooFewSendersError
from securefgl.algorithms.fedgcn.settings import NORMS, FedGCNSettings
from securefgl.config import ConfigError
from securefgl.data import ClientGraph
from securefgl.federation import SERVER, Call, Channel, Executor, Party, client_party_id
from securefgl.federation.hosted_sums import HostedSum, SecureSumDriver, SumSpec

__all__ = [
    "NeighbourSumClient",
    "PrecomputeReport",
    "central_neighbour_sums",
    "run_neighbour_sums",
    "sum_spec",
]

log = logging.getLogger(__name__)

def sum_spec(settings: FedGCNSettings, experiment_id: str) -> SumSpec:
    """The secure-sum mode of ``settings`` as plain data; ``min_senders`` applies to the
    ``masked`` / ``ckks`` sums (``plain`` shows every contribution anyway), ``keys`` to
    ``ckks``."""
    sum_mode = settings.sum_mode or "plain"
    secure = sum_mode != "plain"
    options: dict[str, Any] = {"min_senders": settings.min_senders if secure else 1}
    if sum_mode == "ckks":
        options["keys"] = settings.sum_keys
    return SumSpec(sum_mode, experiment_id, options)


class NeighbourSumClient(Party):
    """Client ``i``'s pre-training party: its view, its degrees, its hop results and its
    side of the secure sums. Holds nothing of any other client."""

    def __init__(self, view: ClientGraph, settings: FedGCNSettings) -> None:
        if view.cross_edges != "known":
            raise ConfigError("fedgcn needs cross_edges = 'known' (clients know their edges)")
        self.view = view
        self.party_id = client_party_id(view.client_id)
        self.settings = settings
        self.n = view.num_global_nodes
        self.ids = view.node_ids.numpy().astype(np.int64)  # ascending (views.py)
        ni = view.num_nodes
        src, dst = view.edge_index.numpy()
        keep = src != dst
        src, dst = src[keep], dst[keep]
        ext_src, ext_ids = view.external_edges.numpy()
        owners = view.external_owner.numpy()
        # global degree with self-loop: internal + cross-client neighbours + 1
        deg = 1.0 + np.bincount(src, minlength=ni) + np.bincount(ext_src, minlength=ni)
        if settings.norm == "sym":
            self.s = deg**-0.5  # sender factor s_u
            self.r = deg**-0.5  # receiver factor r_v
        else:
            self.s = np.ones(ni)
            self.r = 1.0 / deg
        # Ã restricted to own nodes (rows v, cols u), self-loops included, weighted by s_u
        rows = np.concatenate([src, np.arange(ni)])
        cols = np.concatenate([dst, np.arange(ni)])
        self.a_own = sp.csr_matrix((self.s[cols], (rows, cols)), shape=(ni, ni))
        # per neighbouring client k: C_ki = P_k @ H, P_k: [opaque ids of k's nodes adjacent
        # to my nodes] x [my nodes], entries s_u
        self.out_rows: dict[str, np.ndarray] = {}
        self.out_mats: dict[str, sp.csr_matrix] = {}
        for k in np.unique(owners):
            sel = owners == k
            targets, inv = np.unique(ext_ids[sel], return_inverse=True)
            mine = ext_src[sel]
            mat = sp.csr_matrix((self.s[mine], (inv, mine)), shape=(targets.size, ni))
            pid = client_party_id(k)
            self.out_rows[pid], self.out_mats[pid] = targets, mat
        self.neighbours = sorted(self.out_rows)
        self.boundary = np.unique(self.ids[ext_src]) if ext_src.size else np.zeros(0, np.int64)
        self.hop_feats: list[np.ndarray] = [view.x.numpy().astype(np.float64)]
        self.sums = HostedSum(self.party_id)
        self._received: list[int] = []  # per hop: number of sending clients

    def roles(self) -> Iterable[object | None]:
        return (self, *self.sums.roles())

    def contributions(self, hop: int) -> dict[str, sp.csr_matrix]:
        """``C_ki`` for every neighbouring client ``i`` as a sparse ``(n, d)`` block (rows:
        opaque ids of ``i``'s nodes adjacent to this client)."""
        h = self.hop_feats[hop - 1]
        out = {}
        for pid in self.neighbours:
            compact = sp.csr_matrix(self.out_mats[pid] @ h)
            out[pid] = _rows_to_global(compact, self.out_rows[pid], self.n)
        return out

    def prepare(self, hop: int) -> int:
        """Hand the hop's blocks to the secure sums: contribute to every neighbouring client
        and request this client's own sum; returns the number of its senders."""
        if hop != len(self.hop_feats):
            raise RuntimeError(f"{self.party_id}: hop {hop} out of order")
        for receiver, block in self.contributions(hop).items():
            self.sums.client.add_contribution(receiver, block)
        d = self.hop_feats[0].shape[1]
        senders = tuple(self.neighbours)
        if senders:
            support = Support.product((self.n, d), rows=self.boundary)
            self.sums.client.expect_sum(SumRequest(senders, (self.n, d), support, True))
        if len(senders) == 1:
            log.warning(
                "%s: one neighbouring client (%s): its FedGCN hop-%d 'sum' is that "
                "client's contribution itself", self.party_id, senders[0], hop,
            )  # fmt: skip
        return len(senders)

    def finish(self, hop: int) -> None:
        """``H^h = r ⊙ (Ã_own s H^{h-1} + received rows of own nodes)``."""
        if hop != len(self.hop_feats):
            raise RuntimeError(f"{self.party_id}: hop {hop} out of order")
        prev = self.hop_feats[hop - 1]
        total = self.a_own @ prev
        result = self.sums.client.result()
        if self.neighbours:
            if result is None:
                raise ProtocolError(f"{self.party_id}: no neighbour sum arrived at hop {hop}")
            received = sp.csr_matrix(result.total)[self.ids]
            total = total + received.toarray()
        self.hop_feats.append(self.r[:, None] * total)
        self._received.append(len(self.neighbours))

    def augmented_view(self) -> ClientGraph:
        """This client's view with ``x`` replaced by the model input of ``features``."""
        kind = self.settings.features
        parts = self.hop_feats[-1:] if kind == "last" else self.hop_feats[kind == "hops" :]
        feats = np.concatenate(parts, axis=1).astype(np.float32)
        return dataclasses.replace(self.view, x=torch.from_numpy(feats))


def _rows_to_global(compact: sp.csr_matrix, rows: np.ndarray, n: int) -> sp.csr_matrix:
    """Place the rows of ``compact`` at ``rows`` (ascending) of an ``(n, d)`` CSR matrix."""
    counts = np.zeros(n, dtype=np.int64)
    counts[rows] = np.diff(compact.indptr)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return sp.csr_matrix(
        (compact.data, compact.indices, indptr), shape=(n, compact.shape[1]), copy=False
    )


# ------------------------------------------------------------------------------ pre-training


@dataclass
class PrecomputeReport:
    """Cost of the pre-training sums (bytes and messages as recorded by the channel)."""

    sum_mode: str
    hops: int
    seconds: float = 0.0
    bytes: int = 0
    messages: int = 0
    setup_bytes: int = 0
    single_sender_receivers: list[int] = field(default_factory=list)  # per hop


def run_neighbour_sums(
    client_ids: Sequence[str],
    executor: Executor,
    channel: Channel,
    settings: FedGCNSettings,
    experiment_id: str,
    server_id: str = SERVER,
    sum_options: dict[str, Any] | None = None,
) -> PrecomputeReport:
    """Run hops ``1..settings.hops`` between the :class:`NeighbourSumClient` roles of
    ``client_ids`` and the hosted sums of ``server_id``, every message through ``channel``;
    ``sum_options``: the stack's threat model and key registry (``ProtocolStack.sum_options``)."""
    ids = list(client_ids)
    spec = sum_spec(settings, experiment_id).authenticated(dict(sum_options or {}))
    report = PrecomputeReport(spec.sum_mode, settings.hops)
    t0, start = time.perf_counter(), len(channel.transcript.entries)
    driver = SecureSumDriver(executor, channel, spec, ids, server_id)
    report.setup_bytes = driver.setup()
    for hop in range(1, settings.hops + 1):
        try:
            counts, _ = driver.round(
                hop - 1,
                prepare=lambda c, hop=hop: Call.to(c, NeighbourSumClient.prepare, hop),
                finish=lambda c, hop=hop: Call.to(c, NeighbourSumClient.finish, hop),
            )
        except TooFewSendersError as err:
            raise ConfigError(
                f"FedGCN {spec.sum_mode} neighbour sums refused at hop {hop}: {err}. A client "
                "with a single neighbouring client would learn that client's contribution "
                "(its scaled features). To allow it, set min_senders = 1 in "
                "[experiment.fedgcn] (--fedgcn-min-senders 1), or use a partition where "
                "every client has at least 2 neighbouring clients"
            ) from err
        report.single_sender_receivers.append(sum(1 for k in counts if k == 1))
    entries = channel.transcript.entries[start:]
    report.seconds = time.perf_counter() - t0
    report.bytes = sum(e.nbytes for e in entries)
    report.messages = len(entries)
    return report


def central_neighbour_sums(
    edge_index: np.ndarray | torch.Tensor,
    x: np.ndarray | torch.Tensor,
    hops: int = 2,
    norm: str = "sym",
) -> list[np.ndarray]:
    """SIMULATOR SIDE reference (needs the global graph): ``[ÂX, Â²X, …]`` in global node
    order, edges symmetrised, self-loops replaced by one per node."""
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}")
    feats = np.asarray(x, dtype=np.float64)
    n = feats.shape[0]
    src, dst = np.asarray(edge_index, dtype=np.int64)
    keep = src != dst
    rows = np.concatenate([src[keep], dst[keep]])
    cols = np.concatenate([dst[keep], src[keep]])
    a = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    a.data[:] = 1.0
    a = a + sp.identity(n, format="csr")
    deg = np.asarray(a.sum(axis=1)).ravel()
    left = deg**-0.5 if norm == "sym" else 1.0 / deg
    right = deg**-0.5 if norm == "sym" else np.ones(n)
    a_hat = sp.csr_matrix(sp.diags(left) @ a @ sp.diags(right))
    out, h = [], feats
    for _ in range(hops):
        h = a_hat @ h
        out.append(h)
    return out


