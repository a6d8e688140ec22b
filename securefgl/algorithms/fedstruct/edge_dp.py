"""Edge-level DP on the input blocks of FedStruct's Ā (an addition: FedStruct has none).

Before Algorithm 3 every edge is perturbed exactly once, by a party that already knows it,
with EdgeRand or LapGraph (:mod:`protocols.dp.graph_dp`; LinkTeller, Wu et al. S&P 2022):
client ``k`` its internal block (symmetric, ε); for every pair ``i < k`` (all pairs, not only
neighbouring ones) ``k`` sends ``i`` its opaque ids, ``i`` perturbs the cross block
(directed entries, ε) and sends ``k`` the noisy edges, both through the relaying server. By
parallel composition the perturbed graph is ε-edge-DP against everyone who does not know
the edge already, and so are Ā and the structural NSFs (post-processing). The local NFE
keeps the true internal edges, so the model is ε-edge-DP for cross-client edges only (the
run's claim). Not protected: node membership (``i`` and the server learn ``k``'s ids),
nodes (deg·ε), features, labels. See ``securefgl/algorithms/fedstruct/README.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from protocols.base import Envelope
from protocols.dp.rng import make_rng
from protocols.wire import Payload, WireFormatError
from securefgl.algorithms.fedstruct.abar_build import HopContext
from securefgl.algorithms.fedstruct.abar_client import AdjacencyRelay, origin_of, relay_envelope
from securefgl.algorithms.fedstruct.settings import EdgeDP
from securefgl.data.views import ClientGraph
from securefgl.federation import Call, Channel, LocalExecutor, Party, client_party_id

IDS_TAG = "edge-dp/ids"
BLOCK_TAG = "edge-dp/block"


class EdgePerturber(Party):
    """Client ``k``'s side: holds its view, returns the perturbed one (:meth:`result`)."""

    def __init__(
        self, view: ClientGraph, party_id: str, dp: EdgeDP, rng: np.random.Generator
    ) -> None:
        if view.cross_edges != "known":
            raise ValueError("edge DP on Ā's blocks needs the 'known' cross-edge setting")
        self.view, self.party_id, self.dp, self.rng = view, party_id, dp, rng
        n_i = view.num_nodes
        ei = view.edge_index.numpy()
        own = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n_i, n_i))
        self._internal = dp.perturb(own, True, rng)
        ext = view.external_edges.numpy()
        self._ext = {
            int(o): ext[:, view.external_owner.numpy() == o]
            for o in np.unique(view.external_owner.numpy())
        }  # owner -> true (local row, opaque id) edges, replaced pair by pair
        self._noisy: dict[int, np.ndarray] = {}

    def announce_ids(self, lower: Sequence[tuple[int, str]], via: str | None) -> list[Envelope]:
        """My nodes' opaque ids to every client with a smaller id (it perturbs our block)."""
        ids, me = self.view.node_ids.numpy().astype(np.int64), self.view.client_id
        return [
            relay_envelope(self.party_id, pid, via, IDS_TAG, Payload({"ids": ids}, {"client": me}))
            for _, pid in lower
        ]

    def perturb_cross(self, inbox: list[Envelope], via: str | None) -> list[Envelope]:
        """For each higher client's id list: perturb ``A[V_me, V_k]``, keep it, send it."""
        out = []
        rows_ids = self.view.node_ids.numpy().astype(np.int64)
        for env in inbox:
            k, cols = self._read(env, IDS_TAG, "ids")
            true = self._ext.get(k, np.zeros((2, 0), np.int64))
            col_of = {int(c): j for j, c in enumerate(cols)}
            try:
                cj = np.fromiter((col_of[int(c)] for c in true[1]), np.int64, true.shape[1])
            except KeyError as err:
                raise ValueError(f"{self.party_id}: client {k} omitted node {err}") from None
            block = sp.csr_matrix(
                (np.ones(true.shape[1]), (true[0], cj)), shape=(self.view.num_nodes, cols.size)
            )
            noisy = self.dp.perturb(block, False, self.rng).tocoo()
            self._noisy[k] = np.vstack([noisy.row, cols[noisy.col]]).astype(np.int64)
            pairs = np.vstack([cols[noisy.col], rows_ids[noisy.row]]).astype(np.int64)
            out.append(
                relay_envelope(
                    self.party_id,
                    origin_of(env),
                    via,
                    BLOCK_TAG,
                    Payload({"edges": pairs}, {"client": self.view.client_id}),
                )
            )
        return out

    def receive_cross(self, inbox: list[Envelope]) -> None:
        """Noisy blocks from lower clients: (my opaque id, their opaque id) pairs."""
        ids = self.view.node_ids.numpy().astype(np.int64)
        order = np.argsort(ids)
        for env in inbox:
            k, pairs = self._read(env, BLOCK_TAG, "edges")
            if pairs.ndim != 2 or pairs.shape[0] != 2:
                raise ValueError(f"{self.party_id}: malformed noisy block from client {k}")
            pos = np.searchsorted(ids, pairs[0], sorter=order)
            local = order[np.minimum(pos, max(ids.size - 1, 0))]
            if pairs.shape[1] and not np.array_equal(ids[local], pairs[0]):
                raise ValueError(f"{self.party_id}: noisy block from {k} names foreign rows")
            self._noisy[k] = np.vstack([local, pairs[1]]).astype(np.int64)

    def result(self, num_clients: int) -> ClientGraph:
        """The perturbed view (every other client's block must have been perturbed)."""
        missing = sorted(set(range(num_clients)) - {self.view.client_id} - set(self._noisy))
        if missing:
            raise RuntimeError(f"{self.party_id}: no perturbed block with clients {missing}")
        internal = self._internal.tocoo()
        owners = sorted(self._noisy)
        ext = np.hstack([np.zeros((2, 0), np.int64), *(self._noisy[o] for o in owners)])
        owner = np.concatenate(
            [np.zeros(0, np.int64), *(np.full(self._noisy[o].shape[1], o) for o in owners)]
        )
        v = self.view
        return ClientGraph(
            client_id=v.client_id, x=v.x, y=v.y, train_mask=v.train_mask,
            val_mask=v.val_mask, test_mask=v.test_mask,
            edge_index=torch.from_numpy(np.vstack([internal.row, internal.col]).astype(np.int64)),
            node_ids=v.node_ids, cross_edges="known",
            external_edges=torch.from_numpy(ext), external_owner=torch.from_numpy(owner),
            num_classes=v.num_classes, num_global_nodes=v.num_global_nodes,
        )  # fmt: skip

    def _read(self, env: Envelope, tag: str, field: str) -> tuple[int, np.ndarray]:
        k = env.payload.meta.get("client")
        if env.tag != tag or not isinstance(k, int) or isinstance(k, bool):
            raise ValueError(f"{self.party_id}: unexpected message {env.tag} from {env.sender}")
        try:
            arr = env.payload.array(field)
        except (KeyError, WireFormatError) as err:
            raise ValueError(f"{self.party_id}: malformed {tag} from client {k}") from err
        if arr.dtype != np.int64:
            raise ValueError(f"{self.party_id}: {tag} from client {k} is not int64")
        return k, arr


def perturb_views(clients: Sequence[tuple[int, str]], ctx: HopContext) -> None:
    """Run the exchange: ids to lower clients, noisy cross blocks back (see module doc).

    ``clients``: (client id, party id); each party has an :class:`EdgePerturber` role,
    whose :meth:`~EdgePerturber.result` is then its perturbed view.
    """
    ex, via = ctx.executor, ctx.server_id
    announced = ex.call([
        Call.to(pid, EdgePerturber.announce_ids, [c for c in clients if c[0] < cid], via)
        for cid, pid in clients
    ])  # fmt: skip
    inbox = ctx.deliver([e for batch in announced for e in batch or []])
    sent = ex.call([Call.to(pid, EdgePerturber.perturb_cross, inbox[pid], via)
                    for _, pid in clients])  # fmt: skip
    inbox = ctx.deliver([e for batch in sent for e in batch or []])
    ex.call([Call.to(pid, EdgePerturber.receive_cross, inbox[pid]) for _, pid in clients])


def perturb_federation(
    views: Sequence[ClientGraph],
    dp: EdgeDP,
    noise_seed: int | None = None,
    channel: Channel | None = None,
) -> list[ClientGraph]:
    """Every client's perturbed view, by the exchange of :func:`perturb_views` run through
    ``channel`` with a relaying server (a stand-alone simulation: attacks, tests). The noise
    is secret unless ``noise_seed`` is given (tests only: then it is reproducible)."""
    parties = {
        client_party_id(v.client_id): EdgePerturber(
            v,
            client_party_id(v.client_id),
            dp,
            make_rng(noise_seed, "edge-dp", client_party_id(v.client_id)),
        )
        for v in views
    }
    ids = list(parties)
    executor = LocalExecutor({**parties, "server": AdjacencyRelay("server", ids)})
    ctx = HopContext(ids, executor, channel if channel is not None else Channel(), "server")
    perturb_views([(v.client_id, client_party_id(v.client_id)) for v in views], ctx)
    return [p.result(len(views)) for p in parties.values()]
