"""A FedSage+ client: NeighGen trained locally, then fGen with the other clients' help
through the channel, then FedSage on the mended graph.

FedSage+ (Zhang et al., NeurIPS 2021, §3.4, Eq. 5): client ``i``'s fGen loss adds, for
every other client ``j``, ``α Σ_v Σ_p min_{u ∈ V_j} ‖H^g_i(z_v)^p − x_u‖²``, and "client
``j`` computes the gradients and sends them to client ``i``". Here that is literal and
nothing else crosses: ``i`` sends ``j`` the generated rows of a random batch of its
training nodes (``fedsage/query``, client to client through the channel), ``j`` answers
with ``∂/∂g = 2(g − x_{u*})`` per row (``fedsage/answer``), and ``i`` back-propagates them
through its own fGen. No client ever holds another client's features (the public code reads
every client's data in one process), but the answer reveals ``x_{u*} = g − answer/2``:
:mod:`attacks.fedsage_gradients` measures it. ``cross_clip`` / ``cross_noise`` clip and
noise each answer row (a heuristic defence: a node may be the nearest neighbour of any
number of queries, so no ε is claimed). Deviation: the mean squared distance per feature
(the official ``mse_loss``) and all ``num_pred`` rows of a query node are sent (sending
only the first ``ñ_v`` would reveal ``ñ_v``); ``i`` keeps the first ``ñ_v``.

With ``cross_sum`` (a secure-sum mode) client ``i`` sends ONE batch of generated rows to
every other client and receives only ``Σ_j answer_j`` through a hosted secure sum relayed by
the server (the loss term is ``α · rows · Σ_j answer_j``, the same gradient as the per-peer
answers of that batch): ``i`` then reads ``Σ_j x_{u*_j}``, the sum of the other clients'
nearest rows, not any one of them; ``cross_sum_noise`` adds accounted Gaussian noise to the
sum, each answering client drawing its share from its secret generator.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from protocols.base import Envelope
from protocols.dp.rng import make_rng
from protocols.dp.rows import clip_rows
from protocols.secure_sum import SumRequest
from protocols.wire import Payload
from securefgl.algorithms.common.edge.client import EdgeClient, LocalTraining
from securefgl.algorithms.common.edge.model import Features, propagation
from securefgl.algorithms.common.edge.server import EdgeServer
from securefgl.algorithms.common.training import party_torch_rng
from securefgl.algorithms.fedsage.neighgen import NeighGen, counts, greedy_loss, impair, mended
from securefgl.algorithms.fedsage.settings import FedSageSettings
from securefgl.data import ClientGraph
from securefgl.federation import client_party_id
from securefgl.federation.builders import config_from_json, protocol_party, view_from_payload
from securefgl.federation.hosted_sums import HostedSum
from securefgl.federation.recipes import party_builder

QUERY_TAG = "fedsage/query"
ANSWER_TAG = "fedsage/answer"


class NeighGenState:
    """Client ``i``'s NeighGen, impaired graph and pending queries (its own data only)."""

    def __init__(
        self,
        party_id: str,
        view: ClientGraph,
        peers: list[str],
        settings: FedSageSettings,
        seed: int,
        noise_seed: int | None,
    ) -> None:
        self.party_id, self.peers, self.settings = party_id, list(peers), settings
        self.x = sp.csr_matrix(view.x.numpy().astype(np.float32))
        self.x_sq = np.asarray(self.x.multiply(self.x).sum(axis=1)).ravel()
        self.y = view.y.clone()
        self.edges = view.edge_index.numpy().astype(np.int64)
        self.rng = make_rng(seed, "fedsage-neighgen", party_id)  # model randomness (public)
        self.answer_rng = make_rng(noise_seed, "fedsage-answer", party_id)  # secret
        self.graph = impair(
            self.x, self.edges, view.train_mask.numpy(), view.test_mask.numpy(), settings,
            self.rng,
        )  # fmt: skip
        self.seed = seed
        with party_torch_rng(seed, party_id, "neighgen"):
            self.net = NeighGen(view.num_features, view.num_classes, settings)
        self.torch_gen = torch.Generator().manual_seed(int(self.rng.integers(2**62)))
        self._pending: dict[str, tuple[torch.Tensor, np.ndarray]] = {}
        self._epoch: tuple[torch.Tensor, np.ndarray] | None = None
        self._epoch_idx = -1
        self.fgen_opt: torch.optim.Optimizer | None = None
        self.sums = HostedSum(party_id)  # used with ``cross_sum``
        self._queries: dict[str, np.ndarray] = {}  # received this epoch (cross_sum)
        #: the last (query rows, summed answers, answerers) it received (cross_sum; its own view)
        self.received_sum: tuple[np.ndarray, np.ndarray, tuple[str, ...]] | None = None

    def roles(self) -> Iterable[object | None]:
        return (self, *self.sums.roles())

    def _noise(self, n: int) -> torch.Tensor:
        return torch.randn(n, self.settings.latent, generator=self.torch_gen)

    def _local_losses(self, z: torch.Tensor, gen: torch.Tensor, with_degree: bool) -> torch.Tensor:
        st, g = self.settings, self.graph
        deg = self.net.degree(z[g.train])
        pred = counts(deg, st.num_pred)
        loss = st.lambda_f * greedy_loss(gen, g.targets, pred, g.missing[g.train])
        if with_degree:
            target = torch.as_tensor(g.missing[g.train], dtype=torch.float32)
            loss = loss + st.lambda_d * nn.functional.smooth_l1_loss(deg, target)
        if st.lambda_c > 0 and len(g.train):
            # the mended graph uses the rows of nodes with ñ_v > 0: the training nodes' are
            # ``gen``; generate only the others (rows of nodes with ñ_v = 0 stay unused)
            count = counts(self.net.degree(z), st.num_pred)
            rest = torch.as_tensor(np.setdiff1d(np.flatnonzero(count > 0), g.train))
            all_gen = gen.new_zeros((len(z), *gen.shape[1:]))
            all_gen = all_gen.index_copy(0, torch.as_tensor(g.train), gen)
            if len(rest):
                extra = self.net.generate(z[rest], self._noise(len(rest)))
                all_gen = all_gen.index_copy(0, rest, extra)
            feats, prop, _, _ = mended(g.x, g.edges, all_gen, count)
            logits = self.net.classifier(feats, prop)[torch.as_tensor(g.train)]
            loss = loss + st.lambda_c * nn.functional.cross_entropy(
                logits, self.y[torch.as_tensor(g.keep[g.train])]
            )
        return loss

    def pretrain(self) -> float:
        """LocSage+: NeighGen and its classifier on the impaired graph alone."""
        st, g = self.settings, self.graph
        opt = torch.optim.Adam(  # fused: fGen's output layer is large (num_pred · features)
            self.net.parameters(), lr=st.gen_lr, weight_decay=st.gen_weight_decay, fused=True
        )
        loss = torch.zeros(())
        self.net.train()
        with party_torch_rng(self.seed, self.party_id, "neighgen-pretrain"):  # its dropout
            for _ in range(st.gen_epochs if len(g.train) else 0):
                opt.zero_grad()
                z = self.net.embed(g.feats, g.prop)
                gen = self.net.generate(z[g.train], self._noise(len(g.train)))
                loss = self._local_losses(z, gen, with_degree=True)
                loss.backward()
                opt.step()
        return float(loss.detach())

    def query(self, epoch: int) -> list[Envelope]:
        """One federated epoch, first half: generated rows of a batch of training nodes to
        every other client (encoder and dGen frozen; fGen keeps its graph for :meth:`step`)."""
        st, g = self.settings, self.graph
        if self.fgen_opt is None:
            self.fgen_opt = torch.optim.Adam(self.net.fgen_parameters(), lr=st.gen_lr,
                                             weight_decay=st.gen_weight_decay,
                                             fused=True)  # fmt: skip
        self._pending.clear()
        if not len(g.train):
            self._epoch = None
            return []
        self.net.train()
        self._epoch_idx = epoch
        with party_torch_rng(self.seed, self.party_id, "neighgen-query", epoch):
            with torch.no_grad():
                z = self.net.embed(g.feats, g.prop)
            gen = self.net.generate(z[g.train], self._noise(len(g.train)))
        self._epoch = (z, counts(self.net.degree(z[g.train]), st.num_pred))
        self._gen = gen
        out, common = [], None
        for peer in self.peers:
            if common is None or st.cross_sum is None:  # one batch for all under cross_sum
                batch = self.rng.choice(len(g.train), size=min(st.cross_queries, len(g.train)),
                                        replace=False)  # fmt: skip
                rows = gen[torch.as_tensor(batch)].reshape(-1, gen.shape[2])
                common = (rows, batch)
            rows, batch = common
            self._pending[peer] = (rows, batch)
            payload = Payload({"g": rows.detach().numpy().astype(np.float32)}, {"epoch": epoch})
            out.append(Envelope(self.party_id, peer, QUERY_TAG, payload))
        return out

    def answer(self, inbox: list[Envelope]) -> list[Envelope]:
        """Client ``j``'s side: ``2(g − x_{u*})`` per row, ``u*`` its nearest own node."""
        st, out = self.settings, []
        for env in inbox:
            if env.tag != QUERY_TAG:
                continue
            grad = self._answer_rows(env.payload.array("g").astype(np.float64))
            if st.cross_clip > 0 and st.cross_noise > 0:
                grad = grad + self.answer_rng.normal(0, st.cross_noise * st.cross_clip,
                                                     grad.shape)  # fmt: skip
            payload = Payload({"grad": grad.astype(np.float32)}, dict(env.payload.meta))
            out.append(Envelope(self.party_id, env.sender, ANSWER_TAG, payload))
        return out

    def _answer_rows(self, g: np.ndarray) -> np.ndarray:
        """``2(g − x_{u*})`` per row (clipped to ``cross_clip`` when set)."""
        dist = (g**2).sum(1)[:, None] - 2 * np.asarray(self.x @ g.T).T + self.x_sq[None, :]
        grad = 2.0 * (g - self.x[dist.argmin(axis=1)].toarray())
        return clip_rows(grad, self.settings.cross_clip) if self.settings.cross_clip > 0 else grad

    # -- cross_sum: i receives only Σ_j answer_j ------------------------------------------
    def receive_queries(self, inbox: list[Envelope]) -> None:
        self._queries = {e.sender: e.payload.array("g").astype(np.float64)
                         for e in inbox if e.tag == QUERY_TAG}  # fmt: skip

    def prepare_answers(self, epoch: int) -> int:
        """Answer every query into its sender's sum (plus this client's share of the sum's
        noise); request the sum of the answers to this client's own query."""
        st = self.settings
        for sender, g in self._queries.items():
            grad = self._answer_rows(g)
            if st.cross_sum_noise > 0:
                std = st.cross_sum_noise * sensitivity(st, g.shape[0])
                grad = grad + self.answer_rng.normal(0, std / np.sqrt(len(self.peers)), grad.shape)
            self.sums.client.add_contribution(sender, grad)
        self._queries = {}
        if not self._pending:
            return 0
        rows, _ = next(iter(self._pending.values()))
        self.sums.client.expect_sum(SumRequest(tuple(self._pending), tuple(rows.shape)))
        return len(self._pending)

    def finish_answers(self, epoch: int) -> float:
        """The second half of the epoch with the summed answers."""
        if not self._pending:
            return self.step([])
        result = self.sums.client.result()
        assert result is not None
        total = np.asarray(result.total, dtype=np.float32)
        first = next(iter(self._pending))
        rows = self._pending[first][0].detach().numpy().astype(np.float64)
        self.received_sum = (rows, total.astype(np.float64), tuple(self._pending))
        self._pending = {first: self._pending[first]}  # one common batch
        return self.step([Envelope(first, self.party_id, ANSWER_TAG,
                                   Payload({"grad": total}, {"epoch": epoch}))])  # fmt: skip

    def step(self, inbox: list[Envelope]) -> float:
        """Second half: local fGen loss plus ``α`` × each peer's answered gradient."""
        st = self.settings
        if self._epoch is None or self.fgen_opt is None:
            return 0.0
        z, pred = self._epoch
        with party_torch_rng(self.seed, self.party_id, "neighgen-step", self._epoch_idx):
            loss = self._local_losses(z, self._gen, with_degree=False)
        for env in inbox:
            if env.tag != ANSWER_TAG or env.sender not in self._pending:
                continue
            rows, batch = self._pending[env.sender]
            grad = torch.as_tensor(env.payload.array("grad"))
            active = torch.as_tensor(
                (np.arange(st.num_pred)[None, :] < pred[batch][:, None]).reshape(-1, 1)
            )  # only the first ñ_v rows of each query node count
            scale = rows.shape[0] * rows.shape[1]
            loss = loss + st.cross_weight * (rows * grad * active).sum() / scale
        self.fgen_opt.zero_grad()
        loss.backward()
        self.fgen_opt.step()
        self._pending.clear()  # the answers are not kept
        self._epoch = None
        return float(loss.detach())

    @torch.no_grad()
    def mending(self) -> tuple[np.ndarray, np.ndarray]:
        """Generated rows and the edges that mend the client's FULL local graph."""
        self.net.eval()
        feats = Features(self.x)
        z = self.net.embed(feats, propagation(self.edges, self.x.shape[0], "gcn"))
        gen = self.net.generate(z, self._noise(len(z)))
        _, _, rows, new_edges = mended(
            self.x, self.edges, gen, counts(self.net.degree(z), self.settings.num_pred)
        )
        return rows.numpy().astype(np.float32), new_edges


def sensitivity(settings: FedSageSettings, rows: int) -> float:
    """L2 sensitivity of one client's answers to one query of ``rows`` rows when one of its
    nodes changes: every row may change, each clipped to C: 2·C·√rows."""
    return 2.0 * settings.cross_clip * float(np.sqrt(rows))


class FedSageServer(EdgeServer):
    """FedSage's edge server; with ``cross_sum`` it also relays the answers' secure sums."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sums = HostedSum(self.party_id)

    def roles(self) -> Iterable[object | None]:
        return (*super().roles(), *self.sums.roles())


class FedSageClient(EdgeClient):
    """The classifier client of FedSage(+) with its NeighGen as a role."""

    def __init__(self, view: ClientGraph, training: LocalTraining, agg, server_id: str,
                 neighgen: NeighGenState | None, seed: int = 0) -> None:  # fmt: skip
        super().__init__(view, training, agg, server_id, seed=seed)
        self.neighgen = neighgen

    def roles(self) -> Iterable[object | None]:
        own = self.neighgen.roles() if self.neighgen is not None else ()
        return (*super().roles(), *own)

    def mend_graph(self) -> int:
        """Mend this client's graph with its own NeighGen's output; returns the rows added."""
        if self.neighgen is None:
            return 0
        rows, edges = self.neighgen.mending()
        self.mend([rows], edges)
        return len(rows)


@party_builder
def fedsage_server(params: np.ndarray, stack: dict[str, Any], neighbours: dict[str, int],
                   holds_model: bool) -> FedSageServer:  # fmt: skip
    sid = stack["server"]
    return FedSageServer(sid, params, protocol_party(stack, sid), stack["clients"], neighbours,
                         holds_model)  # fmt: skip


@party_builder
def fedsage_client(
    view: Payload, stack: dict[str, Any], training: dict[str, Any], peers: list[str] | None,
    noise_seed: int | None, seed: int,
) -> FedSageClient:  # fmt: skip
    """A FedSage client; with ``peers`` (the other clients) a FedSage+ client with its own
    NeighGen, whose model randomness comes from the experiment's seed."""
    config, v = config_from_json(stack["config"]), view_from_payload(view)
    pid = client_party_id(v.client_id)
    state = None
    if peers is not None:
        neighgen_seed = int(make_rng(seed, "fedsage", pid).integers(2**62))
        state = NeighGenState(pid, v, peers, config.fedsage, neighgen_seed, noise_seed)
    training_ = LocalTraining(**training)
    return FedSageClient(v, training_, protocol_party(stack, pid), stack["server"], state, seed)
