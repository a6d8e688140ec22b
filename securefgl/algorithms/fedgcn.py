"""FedGCN (Yao et al., "FedGCN: Convergence-Communication Tradeoffs in Federated Training
of Graph Convolutional Networks", NeurIPS 2023), with the neighbour sums done by secure sums.

Pre-training (once, through the Channel, counted as setup bytes). Client ``i`` needs, for
each of its nodes ``v``, the aggregate of ALL of ``v``'s neighbours, including the nodes
other clients hold (FedStruct App. C.4, Eqs. 30-31):

* hop 1: ``H¹_v = (ÂX)_v = Σ_{u∈Ñ(v)} Â_vu x_u``;
* hop 2: ``H²_v = (Â²X)_v = Σ_{u∈Ñ(v)} Â_vu H¹_u``,

with ``Â = D̃^{-1/2}(A + I)D̃^{-1/2}`` (GCN, ``norm="sym"``, default) or ``D̃^{-1}(A + I)``
(``norm="rw"``), ``Ñ(v) = N(v) ∪ {v}`` and GLOBAL degrees ``d̃`` (cross-client edges
included). Every coefficient factorises into a sender part and a receiver part
(``Â_vu = r_v s_u``, sym: ``r = s = d̃^{-1/2}``; rw: ``r = d̃^{-1}``, ``s = 1``), and
in the ``known`` cross-edge setting (``securefgl.data.views``) client ``k`` knows its own
node ``u``, ``d̃_u`` and its edges to ``i``'s nodes (by opaque id). So at hop ``h`` client
``k`` contributes, for every node ``v`` of ``i`` adjacent to ``k``,
``C_ki[v] = Σ_{u∈V_k∩N(v)} s_u H^{h-1}_u`` (``H⁰ = X``; at hop 2 ``H¹_u`` is ``k``'s own
finished hop-1 result, so paths through third clients are included), and ``i`` forms
``H^h_v = r_v (Σ_{u∈V_i∩Ñ(v)} s_u H^{h-1}_u + Σ_k C_ki[v])``: exactly the global rows.

The ``Σ_k`` is one batch of :mod:`protocols.secure_sum` jobs per hop, run party by party
through the executor and the channel (as ``fedstruct.adjacency_secure``): receiver ``i``'s
job has senders = the clients owning its external neighbours (from its own
``external_owner``), shape ``(n, d)`` with rows = opaque ids, and the public support
``rows = R_i`` (``i``'s nodes with a cross-client edge) × all feature columns. Modes
(``sum_mode``): ``plain`` (default; relayed in the clear as sparse COO), ``masked``
(pairwise + receiver masks, :class:`~protocols.secure_sum.MaskedSum`) or ``ckks``
(encrypted under the RECEIVER's public key, added by the server,
:class:`~protocols.secure_sum.CKKSSum`).

Training: :class:`FedGCN` subclasses :class:`~securefgl.algorithms.fedavg.FedAvg` and runs
its rounds unchanged (FedAvg / FedSGD through the configured protocol stack) on client
views whose node features are replaced by the propagated ones, fed to an MLP
(``config.hidden``, ``config.layers``, ``config.dropout``). ``features``:

* ``"last"`` (default): ``h_v = Hᴸ_v`` (``Â²X`` for 2 hops): the 2-layer GCN of FedGCN
  with its inner non-linearity moved after the propagation, i.e. SGC (Wu et al. 2019,
  "Simplifying Graph Convolutional Networks") with an MLP head;
* ``"hops"``: ``[H¹ ‖ … ‖ Hᴸ]``; ``"all"``: ``[x ‖ H¹ ‖ … ‖ Hᴸ]`` (SIGN, Rossi et al. 2020).

**Deviation** from FedGCN's model, a GCN ``Â σ(ÂXW₁)W₂`` on the client's L-hop subgraph:
its second layer needs ``H¹_u`` of every external neighbour ``u`` *individually* (FedGCN's
Eq. 31, forwarded by a server that knows the global adjacency); a secure sum only delivers
``Σ_u``, so the non-linearity cannot sit between the two propagations. Measured centrally
(equivalent to FedSGD with full participation) on the 10/10/80 split, 3 seeds, MLP 64
hidden: Cora 82.7 ("last") / 82.2 ("hops") / 79.7 ("all"); Chameleon 56.6 / 57.5 / 50.2
(the raw ``x`` block over-fits with 10 % labels).

"Isolated external neighbours removal" (FedStruct footnote 2): the official FedGCN code
(``get_in_comm_indexes``) gives each client the L-hop *induced subgraph* with the RAW
features of every external node and every edge among external nodes, and runs GCNConv on
it with degrees counted inside that subgraph. Here no external node ever becomes a node of
a client's graph: a client holds rows only for its own nodes, receives only the sums above,
knows no edge between two external nodes, trains and evaluates only on its own labelled /
test nodes, and every normalisation uses true global degrees (no truncated degrees at the
subgraph's border).

Who learns what:

* Receiver ``i`` learns ``Σ_k C_ki`` (masked / ckks), i.e. the (normalised) aggregated
  features of its nodes' external neighbours and their 2-hop aggregates: FedGCN's inherent
  leak (FedStruct footnote 2; Ngo et al. 2024). A node with exactly one external neighbour
  reveals that neighbour's scaled feature vector ``s_u x_u`` (and ``s_u H¹_u``); with one
  sending client the "sum" is that client's contribution (logged; ``min_senders=2``
  refuses such sums). With ``plain`` the receiver AND the server see every individual
  ``C_ki`` with its sender.
* Server: with ``masked`` or ``ckks`` nothing about any value, not even the sums. Unlike
  FedGraph (anchors_frameworks.md §2.2, whose shipped CKKS context with the secret key is
  loaded by the server too), the server never holds a decryption key (CKKS keys are the
  receivers' own, created at runtime), and it needs no global adjacency: routing comes
  from the clients' own cross-edge knowledge.
* Public (server, receiver and its senders): the sender sets (which clients share an
  edge), the job shape ``(n, d)``, the support ``R_i`` (opaque ids of ``i``'s boundary
  nodes) and message sizes. ``masked``/``ckks`` cost ``|R_i|·d`` values per sender.
* Training rounds leak what FedAvg's rounds leak (see ``fedavg.py`` and the stack).

Parties: pre-training runs between :class:`NeighbourSumClient` parties (one per client,
holding only its view) and a :class:`NeighbourSumRelay` server in their own executor, over
the federation's channel; each client's FedAvg party is then built from its own
pre-training party's output (:meth:`NeighbourSumClient.augmented_view`) and nothing else.
Reproduction numbers (Cora / CiteSeer / Chameleon vs FedStruct Tables 2 and 6):
``benchmarks/results/fedstruct.md``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
import torch
from torch_geometric.data import Data

from protocols.base import Envelope, Inbox, ProtocolError, Role, run_phases
from protocols.secure_sum import (
    CKKSSum,
    MaskedSum,
    PlainSum,
    SecureSum,
    SecureSumClient,
    SecureSumServer,
    SumRequest,
    Support,
)
from securefgl.algorithms.base import Federation
from securefgl.algorithms.fedavg import SERVER, FedAvg, client_id
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data import ClientGraph

__all__ = [
    "FEATURES",
    "NORMS",
    "SUM_MODES",
    "FedGCN",
    "FedGCN1Hop",
    "FedGCNSettings",
    "NeighbourSumClient",
    "NeighbourSumRelay",
    "PrecomputeReport",
    "central_neighbour_sums",
    "run_neighbour_sums",
]

log = logging.getLogger(__name__)

SUM_MODES = ("plain", "masked", "ckks")
NORMS = ("sym", "rw")
FEATURES = ("last", "hops", "all")


@dataclass(frozen=True)
class FedGCNSettings:
    """FedGCN's own settings (defaults; :meth:`from_config` reads optional config fields
    ``fedgcn_hops``, ``fedgcn_sum``, ``fedgcn_norm``, ``fedgcn_features`` with ``getattr``)."""

    hops: int = 2  # L: the neighbour sums give ÂX (and Â²X)
    sum_mode: str = "plain"  # plain | masked | ckks
    norm: str = "sym"  # sym: D̃^-1/2 Ã D̃^-1/2 (GCN) | rw: D̃^-1 Ã
    features: str = "last"  # model input: last (ÂᴸX) | hops ([ÂX ‖ …]) | all ([x ‖ ÂX ‖ …])
    min_senders: int = 1  # secure sums refuse jobs with fewer sending clients

    def __post_init__(self) -> None:
        if self.hops not in (1, 2):
            raise ValueError(f"FedGCN hops must be 1 or 2, got {self.hops!r}")
        if self.sum_mode not in SUM_MODES:
            raise ValueError(f"unknown sum mode {self.sum_mode!r}; choose from {list(SUM_MODES)}")
        if self.norm not in NORMS:
            raise ValueError(f"unknown norm {self.norm!r}; choose from {list(NORMS)}")
        if self.features not in FEATURES:
            raise ValueError(f"unknown features {self.features!r}; choose from {list(FEATURES)}")
        if self.min_senders < 1:
            raise ValueError(f"min_senders must be >= 1, got {self.min_senders}")

    @classmethod
    def from_config(cls, config: Any, hops: int | None = None) -> FedGCNSettings:
        """``hops`` (the algorithm's) wins over ``config.fedgcn_hops``; unset fields keep
        the defaults."""
        values: dict[str, Any] = {}
        for cfg_name, name in (
            ("fedgcn_hops", "hops"),
            ("fedgcn_sum", "sum_mode"),
            ("fedgcn_norm", "norm"),
            ("fedgcn_features", "features"),
        ):
            if (value := getattr(config, cfg_name, None)) is not None:
                values[name] = value
        if hops is not None:
            values["hops"] = hops
        return cls(**values)

    def protocol(self, experiment_id: str) -> SecureSum:
        """The secure-sum mode as a configuration object (no secrets)."""
        if self.sum_mode == "plain":
            return PlainSum(min_senders=self.min_senders)
        if self.sum_mode == "masked":
            return MaskedSum(experiment_id, min_senders=self.min_senders)
        return CKKSSum(min_senders=self.min_senders)


# -------------------------------------------------------------------------------- parties


def _phase_names(protocol: SecureSum) -> frozenset[str]:
    return frozenset(p.method for p in (*protocol.setup_phases, *protocol.round_phases))


class NeighbourSumClient:
    """Client ``i``'s pre-training party: its view, its degrees, its hop results and its
    side of the secure sums. Holds nothing of any other client."""

    def __init__(self, view: ClientGraph, settings: FedGCNSettings) -> None:
        if view.cross_edges != "known":
            raise ConfigError("fedgcn needs cross_edges = 'known' (clients know their edges)")
        self.view = view
        self.party_id = client_id(view)
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
            pid = f"client-{int(k)}"
            self.out_rows[pid], self.out_mats[pid] = targets, mat
        self.neighbours = sorted(self.out_rows)
        self.boundary = np.unique(self.ids[ext_src]) if ext_src.size else np.zeros(0, np.int64)
        self.hop_feats: list[np.ndarray] = [view.x.numpy().astype(np.float64)]
        self.sum_party: SecureSumClient | None = None
        self._phases: frozenset[str] = frozenset()
        self._received: list[int] = []  # per hop: number of sending clients

    # -- hosting and phases ---------------------------------------------------------------

    def host(self, protocol: SecureSum, server_id: str, client_ids: Sequence[str]) -> None:
        """Install this client's secure-sum state (every party's is created, ours kept)."""
        self.sum_party = protocol.create_parties(server_id, list(client_ids)).clients[self.party_id]
        self._phases = _phase_names(protocol)

    def phase(self, method: str, inbox: Inbox) -> list[Envelope]:
        if self.sum_party is None or method not in self._phases:
            raise ProtocolError(f"{self.party_id}: {method!r} is not a hosted secure-sum phase")
        return getattr(self.sum_party, method)(inbox)

    # -- one hop --------------------------------------------------------------------------

    def contributions(self, hop: int) -> dict[str, sp.csr_matrix]:
        """``C_ki`` for every neighbouring client ``i`` as a sparse ``(n, d)`` block (rows:
        opaque ids of ``i``'s nodes adjacent to this client)."""
        h = self.hop_feats[hop - 1]
        out = {}
        for pid in self.neighbours:
            compact = sp.csr_matrix(self.out_mats[pid] @ h)
            out[pid] = _rows_to_global(compact, self.out_rows[pid], self.n)
        return out

    def prepare(self, hop: int, round_idx: int) -> int:
        """Start the hop's secure-sum round: contribute to every neighbouring client and
        announce this client's own sum; returns the number of its senders."""
        if self.sum_party is None:
            raise RuntimeError(f"{self.party_id}: no secure-sum state hosted")
        if hop != len(self.hop_feats):
            raise RuntimeError(f"{self.party_id}: hop {hop} out of order")
        self.sum_party.begin_round(round_idx)
        for receiver, block in self.contributions(hop).items():
            self.sum_party.add_contribution(receiver, block)
        d = self.hop_feats[0].shape[1]
        senders = tuple(self.neighbours)
        if senders:
            support = Support.product((self.n, d), rows=self.boundary)
            self.sum_party.expect_sum(SumRequest(senders, (self.n, d), support, True))
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
        assert self.sum_party is not None
        prev = self.hop_feats[hop - 1]
        total = self.a_own @ prev
        result = self.sum_party.result()
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


class NeighbourSumRelay:
    """The server's pre-training party: relays (plain) or adds (masked / ckks)."""

    def __init__(self, party_id: str = SERVER) -> None:
        self.party_id = party_id
        self.sum_party: SecureSumServer | None = None
        self._phases: frozenset[str] = frozenset()

    def host(self, protocol: SecureSum, client_ids: Sequence[str]) -> None:
        self.sum_party = protocol.create_parties(self.party_id, list(client_ids)).server
        self._phases = _phase_names(protocol)

    def begin_round(self, round_idx: int) -> None:
        if self.sum_party is None:
            raise RuntimeError("server: no secure-sum state hosted")
        self.sum_party.begin_round(round_idx)

    def phase(self, method: str, inbox: Inbox) -> list[Envelope]:
        if self.sum_party is None or method not in self._phases:
            raise ProtocolError(f"server: {method!r} is not a hosted secure-sum phase")
        return getattr(self.sum_party, method)(inbox)


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

    mode: str
    hops: int
    seconds: float = 0.0
    bytes: int = 0
    messages: int = 0
    setup_bytes: int = 0
    single_sender_receivers: list[int] = field(default_factory=list)  # per hop


def run_neighbour_sums(
    client_ids: Sequence[str],
    executor: Any,
    channel: Any,
    settings: FedGCNSettings,
    experiment_id: str,
    server_id: str = SERVER,
) -> PrecomputeReport:
    """Run hops ``1..settings.hops`` between hosted :class:`NeighbourSumClient` parties and a
    :class:`NeighbourSumRelay` ``server_id``, every message through ``channel``."""
    ids = list(client_ids)
    protocol = settings.protocol(experiment_id)
    report = PrecomputeReport(protocol.name, settings.hops)
    t0, start = time.perf_counter(), len(channel.transcript.entries)
    executor.call([(c, "host", (protocol, server_id, ids)) for c in ids])
    executor.call([(server_id, "host", (protocol, ids))])
    roles = {Role.SERVER: [server_id], Role.CLIENT: ids}

    def invoke(party_id: str, method: str, inbox: Inbox) -> list[Envelope]:
        return executor.call([(party_id, "phase", (method, inbox))])[0]

    run_phases(protocol.setup_phases, roles, invoke, channel.transmit)
    report.setup_bytes = sum(e.nbytes for e in channel.transcript.entries[start:])
    for hop in range(1, settings.hops + 1):
        executor.call([(server_id, "begin_round", (hop - 1,))])
        counts = executor.map(ids, "prepare", hop, hop - 1)
        report.single_sender_receivers.append(sum(1 for k in counts if k == 1))
        run_phases(protocol.round_phases, roles, invoke, channel.transmit)
        executor.map(ids, "finish", hop)
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


# -------------------------------------------------------------------------------- algorithm


class FedGCN(FedAvg):
    """FedGCN-2hop (module docstring): secure neighbour sums, then FedAvg/FedSGD of an MLP on
    the propagated features. ``settings`` default to :meth:`FedGCNSettings.from_config`."""

    name = "fedgcn"
    hops: ClassVar[int | None] = None  # None: config.fedgcn_hops, else 2
    mu_used = False

    def __init__(self, config: ExperimentConfig, settings: FedGCNSettings | None = None) -> None:
        super().__init__(dataclasses.replace(config, model="mlp"))
        self.settings = settings or FedGCNSettings.from_config(config, self.hops)
        self.report: PrecomputeReport | None = None

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        views = federation.views
        if any(v.cross_edges != "known" for v in views):
            raise ConfigError("fedgcn needs cross_edges = 'known' (clients know their edges)")
        ids = [client_id(v) for v in views]
        parties: dict[str, object] = {c: NeighbourSumClient(v, self.settings) for c, v in zip(
            ids, views, strict=True)}  # fmt: skip
        parties[SERVER] = NeighbourSumRelay(SERVER)
        executor = federation.make_executor(parties)
        federation.channel.round = -1  # pre-training: counted as setup
        self.report = run_neighbour_sums(
            ids,
            executor,
            federation.channel,
            self.settings,
            f"securefgl/fedgcn|seed={federation.seed}",
        )
        log.info(
            "fedgcn pre-training (%s, %d hops): %.1f s, %.1f MB",
            self.report.mode, self.report.hops, self.report.seconds, self.report.bytes / 1e6,
        )  # fmt: skip
        augmented = executor.map(ids, "augmented_view")
        super().setup(dataclasses.replace(federation, views=augmented), global_data)


class FedGCN1Hop(FedGCN):
    """FedGCN-1hop: one secure-sum round, MLP on ``ÂX`` (``features="last"``)."""

    name = "fedgcn-1hop"
    hops = 1


def _register() -> None:
    """Self-registration in ``ALGORITHMS`` (as ``securefgl.fedstruct.algorithm`` does)."""
    from securefgl.algorithms import ALGORITHMS

    for algo in (FedGCN, FedGCN1Hop):
        ALGORITHMS.setdefault(algo.name, algo)


_register()
