"""FED-PUB's parties (Baek et al., ICML 2023, Algorithm 1) and the baselines of its Table 1
on the same client training. Algorithm: :mod:`securefgl.algorithms.fedpub.algorithm`.

A client holds its subgraph, its masked GCN, its Adam state and what it is sent: the
initial model, the proxy graph, its row and column of α (secure sums) or its personalised
model (plain). The server holds what reaches it: the functional embeddings h̃_i (plain or
noised), and with ``sums = "plain"`` every client's model θ_j (or update, GCFL).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import networkx as nx
import numpy as np
import torch
import torch.nn.functional as F

from protocols.base import Envelope
from protocols.dp.clip_noise import clip_l2
from protocols.dp.rng import make_rng
from protocols.wire import Payload
from securefgl.algorithms.base import SplitPredictions
from securefgl.algorithms.common.training import party_torch_rng, predict_splits
from securefgl.algorithms.fedpub.model import MaskedGCN, normalized_adjacency, proxy_graph
from securefgl.algorithms.fedpub.settings import FedPubSettings
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import SERVER, Party, client_party_id
from securefgl.federation.builders import config_from_json, view_from_payload
from securefgl.federation.hosted_sums import HostedSum
from securefgl.federation.recipes import party_builder

TAG_INIT = "fedpub/initial-model"
TAG_PROXY = "fedpub/proxy-graph"
TAG_EMBEDDING = "fedpub/embedding"
TAG_MODEL = "fedpub/model"
TAG_MIX = "fedpub/personalised-model"
TAG_WEIGHTS = "fedpub/weights"
TAG_SIZE = "fedpub/training-size"

VARIANTS = ("fed-pub", "fedavg", "fedprox", "fedper", "gcfl", "local")


def _flat(model: MaskedGCN, names: list[str]) -> np.ndarray:
    return torch.cat([getattr(model, n).detach().reshape(-1) for n in names]).numpy().astype(
        np.float64
    )


def _load(model: MaskedGCN, names: list[str], flat: np.ndarray) -> None:
    at = 0
    with torch.no_grad():
        for n in names:
            p = getattr(model, n)
            p.copy_(torch.from_numpy(flat[at : at + p.numel()]).view_as(p).to(p.dtype))
            at += p.numel()


class PubClient(Party):
    """One client of FED-PUB or of a baseline trained the same way (``variant``)."""

    model_tag: ClassVar[str] = TAG_MIX

    def __init__(self, view: ClientGraph, config: ExperimentConfig, settings: FedPubSettings,
                 variant: str, seed: int, noise_seed: int | None) -> None:  # fmt: skip
        self.party_id = client_party_id(view.client_id)
        self.s, self.variant, self.seed = settings, variant, seed
        self.data = view.to_data()
        self.adj = normalized_adjacency(self.data.edge_index, view.num_nodes)
        masks = settings.masks and variant == "fed-pub"
        with party_torch_rng(seed, self.party_id, "init"):  # replaced by the server's model
            self.model = MaskedGCN(view.num_features, settings.hidden, view.num_classes,
                                   config.dropout, masks, settings.l1)  # fmt: skip
        self.names = self.model.shared_names(classifier=variant != "fedper")
        self.opt = torch.optim.Adam(self.model.parameters(), lr=settings.lr,
                                    weight_decay=settings.weight_decay)  # fmt: skip
        self.weight = float(self.data.train_mask.sum())
        self.noise = make_rng(noise_seed, "fedpub-embedding", self.party_id)
        self.sums = HostedSum(self.party_id)
        self.proxy: tuple[torch.Tensor, torch.Tensor] | None = None
        self.pending: np.ndarray | None = None  # θ̄_i, loaded at the start of the next round
        self.anchor: list[torch.Tensor] | None = None  # θ̄_i as received (proximal terms)
        self.start: np.ndarray | None = None
        self.theta: np.ndarray | None = None
        self.row: dict[str, float] = {}
        self.column: dict[str, float] = {}

    def roles(self) -> Iterable[object | None]:
        return (self, *self.sums.roles())

    def training_weight(self) -> float:
        return self.weight

    def send_size(self) -> list[Envelope]:
        """Its training-node count, to the server (GCFL's weights inside a cluster)."""
        return [Envelope(self.party_id, SERVER, TAG_SIZE,
                         Payload({"n": np.array([self.weight])}, {"round": -1}))]  # fmt: skip

    def receive_initial(self, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag == TAG_INIT:
                _load(self.model, self.model.shared_names(), env.payload.array("params"))
            elif env.tag == TAG_PROXY:
                x, ei = env.payload.array("x"), env.payload.array("edge_index")
                adj = normalized_adjacency(torch.from_numpy(ei.astype(np.int64)), x.shape[0])
                self.proxy = (torch.from_numpy(x.astype(np.float32)), adj)

    # -- local training ---------------------------------------------------------------
    def local_round(self, round_idx: int, mu: float) -> float:
        """Load θ̄_i (masks stay local), take ``local_steps`` Adam steps on the own nodes."""
        if self.pending is not None:
            _load(self.model, self.names, self.pending)
            self.pending = None
        s, model, data = self.s, self.model, self.data
        self.start = _flat(model, self.names)
        center = [getattr(model, n).detach().clone() for n in self.names]
        model.train()
        loss_value = 0.0
        with party_torch_rng(self.seed, self.party_id, round_idx):
            for _ in range(s.local_steps):
                self.opt.zero_grad()
                out = model(data.x, self.adj)
                loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
                params = [getattr(model, n) for n in self.names]
                if s.regularisers == "paper" and self.variant == "fed-pub":
                    loss = loss + s.l1 * model.mask_l1()
                    if round_idx > 0:
                        loss = loss + s.loc_l2 * sum(torch.linalg.vector_norm(p - c)
                                                     for p, c in zip(params, center, strict=True))
                if mu > 0 and round_idx > 0:
                    loss = loss + mu / 2 * sum(((p - c) ** 2).sum()
                                               for p, c in zip(params, center, strict=True))
                loss.backward()
                self.opt.step()
                loss_value = float(loss.detach())
        self.theta = _flat(model, self.names)
        return loss_value

    def embedding(self, round_idx: int) -> list[Envelope]:
        """h̃_i: the mean second-layer output on the proxy graph (eval mode), plain or
        clipped and Gaussian-noised (client-level, sensitivity 2·clip)."""
        assert self.proxy is not None, "no proxy graph received"
        self.model.eval()
        with torch.no_grad():
            h = self.model.embed(*self.proxy).mean(0).numpy().astype(np.float64)
        if self.s.embedding == "gaussian":
            c = self.s.embedding_clip
            h = clip_l2(h, c)
            h = h + self.noise.normal(0.0, self.s.embedding_noise * 2 * c, h.shape)
        return [Envelope(self.party_id, SERVER, TAG_EMBEDDING,
                         Payload({"h": h}, {"round": round_idx}))]  # fmt: skip

    # -- plain aggregation (the paper): θ_j to the server ---------------------------------
    def send_model(self, round_idx: int) -> list[Envelope]:
        assert self.theta is not None and self.start is not None
        vec = self.theta - self.start if self.variant == "gcfl" else self.theta
        return [Envelope(self.party_id, SERVER, TAG_MODEL,
                         Payload({"v": vec}, {"round": round_idx}))]  # fmt: skip

    def receive_mix(self, round_idx: int, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag == TAG_MIX:
                mix = env.payload.array("mix")
                self.pending = self.start + mix if self.variant == "gcfl" else mix  # type: ignore[operator]

    # -- secure personalised sums: θ̄_i = Σ_j α_ij θ_j addressed to i ----------------------
    def receive_weights(self, round_idx: int, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag == TAG_WEIGHTS:
                meta = env.payload.meta
                self.row = dict(zip(meta["senders"], env.payload.array("row").tolist(),
                                    strict=True))  # fmt: skip
                self.column = dict(zip(meta["receivers"], env.payload.array("column").tolist(),
                                       strict=True))  # fmt: skip

    def prepare_sum(self, round_idx: int) -> int:
        """Contribute α_ij θ_j to each receiver i; request Σ_j α_ij θ_j (own term local)."""
        assert self.theta is not None
        return self.sums.weighted_sum(self.row, self.column, self.theta)

    def finish_sum(self, round_idx: int) -> None:
        assert self.theta is not None
        if any(s != self.party_id for s in self.row):
            result = self.sums.client.result()
            assert result is not None
            self.pending = np.asarray(result.total)
        else:
            self.pending = self.theta.copy()

    def predict(self) -> SplitPredictions:
        """The model after this round's local step (the code evaluates it there)."""
        return predict_splits(_Bound(self.model, self.adj), self.data)


class _Bound(torch.nn.Module):
    """The model with its graph bound, for :func:`predict_splits` (``model(x, ei)``)."""

    def __init__(self, model: MaskedGCN, adj: torch.Tensor) -> None:
        super().__init__()
        self.inner, self.adj = model, adj

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.inner(x, self.adj)


class PubServer(Party):
    """Sends the initial model and the proxy graph; forms the mixing weights W (α for
    FED-PUB, uniform, block-uniform by cluster for GCFL); mixes when sums are plain."""

    def __init__(self, params: np.ndarray, proxy: tuple[np.ndarray, np.ndarray],
                 clients: list[str], settings: FedPubSettings, variant: str) -> None:
        self.party_id = SERVER
        self.params, self.proxy = params, proxy
        self.clients, self.s, self.variant = list(clients), settings, variant
        self.train_weights = np.ones(len(clients))
        self.sums = HostedSum(self.party_id)
        self.embeddings: np.ndarray | None = None
        self.similarity: np.ndarray | None = None  # S of the last round (kept for audits)
        self.W: np.ndarray | None = None
        self.clusters: list[list[int]] = [list(range(len(clients)))]
        self.splits: list[int] = []  # GCFL: rounds at which a cluster was cut

    def roles(self) -> Iterable[object | None]:
        return (self, *self.sums.roles())

    def receive_sizes(self, inbox: list[Envelope]) -> None:
        """The clients' training-node counts (GCFL's weights inside a cluster)."""
        got = {env.sender: env.payload.array("n") for env in inbox if env.tag == TAG_SIZE}
        self.train_weights = np.array([float(got[c][0]) for c in self.clients])

    def broadcast_initial(self, receivers: list[str]) -> list[Envelope]:
        x, ei = self.proxy
        model = Payload({"params": self.params}, {"round": -1})
        proxy = Payload({"x": x, "edge_index": ei}, {"round": -1})
        return [Envelope(self.party_id, r, tag, p) for r in receivers
                for tag, p in ((TAG_INIT, model), (TAG_PROXY, proxy))]  # fmt: skip

    def receive_embeddings(self, round_idx: int, inbox: list[Envelope]) -> None:
        got = {env.sender: env.payload.array("h") for env in inbox if env.tag == TAG_EMBEDDING}
        self.embeddings = np.stack([got[c] for c in self.clients])

    def weights(self, round_idx: int, deltas: np.ndarray | None = None) -> np.ndarray:
        """W (k × k, rows sum to 1) for this round's variant."""
        k = len(self.clients)
        if self.variant == "fed-pub":
            assert self.embeddings is not None, "the embeddings must arrive first"
            e = self.embeddings / np.maximum(np.linalg.norm(self.embeddings, axis=1,
                                                            keepdims=True), 1e-12)  # fmt: skip
            self.similarity = e @ e.T
            z = np.exp(self.s.tau * (self.similarity - self.similarity.max(1, keepdims=True)))
            return z / z.sum(1, keepdims=True)
        if self.variant == "local":
            return np.eye(k)
        if self.variant == "gcfl":
            assert deltas is not None
            self._gcfl_split(round_idx, deltas)
            w = np.zeros((k, k))
            for members in self.clusters:
                tw = self.train_weights[members]
                w[np.ix_(members, members)] = tw / tw.sum()
            return w
        return np.full((k, k), 1.0 / k)  # fedavg, fedprox, fedper: the code's uniform mean

    def _gcfl_split(self, round_idx: int, deltas: np.ndarray) -> None:
        """GCFL (Xie et al., NeurIPS 2021, §4.1): cut a cluster in two by a minimum cut of
        the updates' cosine similarities when its mean update is small and one is large."""
        norms = np.linalg.norm(deltas, axis=1)
        unit = deltas / np.maximum(norms[:, None], 1e-12)
        out = []
        for members in self.clusters:
            mean_norm = float(np.linalg.norm(deltas[members].mean(0)))
            if (round_idx >= self.s.gcfl_warmup and len(members) > 2
                    and mean_norm < self.s.gcfl_eps1
                    and float(norms[members].max()) > self.s.gcfl_eps2):  # fmt: skip
                sim = unit[members] @ unit[members].T
                g = nx.Graph()
                for a in range(len(members)):
                    for b in range(a + 1, len(members)):
                        g.add_edge(a, b, weight=float(sim[a, b] + 1.0))
                _, (left, right) = nx.stoer_wagner(g)
                out += [[members[i] for i in left], [members[i] for i in right]]
                self.splits.append(round_idx)
            else:
                out.append(members)
        self.clusters = out

    def mix(self, round_idx: int, inbox: list[Envelope]) -> list[Envelope]:
        """Plain aggregation (the paper): Σ_j W_ij v_j for every client i."""
        got = {env.sender: env.payload.array("v") for env in inbox if env.tag == TAG_MODEL}
        v = np.stack([got[c] for c in self.clients])
        self.W = w = self.weights(round_idx, v if self.variant == "gcfl" else None)
        mixed = w @ v
        return [Envelope(SERVER, c, TAG_MIX, Payload({"mix": mixed[i]}, {"round": round_idx}))
                for i, c in enumerate(self.clients)]  # fmt: skip

    def send_weights(self, round_idx: int, min_senders: int) -> list[Envelope]:
        """Secure sums: each client's row (its senders) and column (its receivers) of α."""
        self.W = w = self.weights(round_idx)
        k = len(self.clients)
        for i in range(k):  # too few remote senders would reveal their models to i
            remote = [j for j in range(k) if j != i and w[i, j] > 0]
            if 0 < len(remote) < min_senders:
                w[i, i] += w[i, remote].sum()
                w[i, remote] = 0.0
        out = []
        for i, c in enumerate(self.clients):
            row = [j for j in range(k) if w[i, j] > 0]
            col = [j for j in range(k) if j != i and w[j, i] > 0]
            payload = Payload(
                {"row": w[i, row], "column": w[col, i]},
                {"round": round_idx, "senders": [self.clients[j] for j in row],
                 "receivers": [self.clients[j] for j in col]},
            )  # fmt: skip
            out.append(Envelope(SERVER, c, TAG_WEIGHTS, payload))
        return out


@party_builder
def pub_client(view: Payload, config: str, variant: str, seed: int,
               noise_seed: int | None) -> PubClient:  # fmt: skip
    cfg = config_from_json(config)
    s = cfg.section(FedPubSettings).resolved(cfg.protocol.secure_sum_mode())
    return PubClient(view_from_payload(view), cfg, s, variant, seed, noise_seed)


@party_builder
def pub_server(params: np.ndarray, proxy_x: np.ndarray, proxy_edges: np.ndarray,
               clients: list[str], config: str, variant: str) -> PubServer:  # fmt: skip
    cfg = config_from_json(config)
    s = cfg.section(FedPubSettings).resolved(cfg.protocol.secure_sum_mode())
    return PubServer(params, (proxy_x, proxy_edges), clients, s, variant)


def make_proxy(settings: FedPubSettings, features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The run's proxy graph (public, from the experiment seed)."""
    return proxy_graph(settings.proxy_blocks, settings.proxy_nodes, settings.proxy_p, features,
                       seed)  # fmt: skip
