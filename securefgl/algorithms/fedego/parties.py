"""FedEgo's parties (Zhang et al., ACM TKDD 2023, Algorithm 1) and the baselines of its
Tables 2-3 on the same model. Algorithm: :mod:`securefgl.algorithms.fedego.algorithm`.

A client holds its subgraph, its EgoNet and Adam state, its side of the aggregation
protocol (the shared reduction layer; the whole model for FedAvg / FedProx) and what it is
sent: the shared layer's mean, the server's personalised layers and the mean soft label
p_g. The server holds what reaches it: the protocol's output (plain or secagg: the mean of
the shared layer; ckks: nothing) and every client's mixed ego-graphs (r̄, ȳ), which it
trains its own personalised layers on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from protocols.base import AggregationClient, AggregationServer, Envelope
from protocols.dp.rng import make_rng
from protocols.wire import Payload
from securefgl.algorithms.base import SplitPredictions
from securefgl.algorithms.common.training import party_torch_rng, unlinked
from securefgl.algorithms.fedego.mixup import mix_batch
from securefgl.algorithms.fedego.model import SLOTS, EgoNet, sample_trees, shuffle_children
from securefgl.algorithms.fedego.settings import FedEgoSettings
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import SERVER, Party, client_party_id
from securefgl.federation.builders import config_from_json, protocol_party, view_from_payload
from securefgl.federation.recipes import party_builder

TAG_SHARED = "fedego/shared-layers"
TAG_MIXED = "fedego/mixed-ego-graphs"
TAG_PERSONAL = "fedego/server-personal-layers"

VARIANTS = ("fedego", "fedavg", "fedprox", "local")


def flat_of(params: list[torch.nn.Parameter]) -> np.ndarray:
    if not params:
        return np.zeros(0)
    return torch.cat([p.detach().reshape(-1) for p in params]).numpy().astype(np.float64)


def load_flat(params: list[torch.nn.Parameter], flat: np.ndarray) -> None:
    at = 0
    with torch.no_grad():
        for p in params:
            p.copy_(torch.from_numpy(flat[at : at + p.numel()]).view_as(p).to(p.dtype))
            at += p.numel()


def csr_of(edge_index: torch.Tensor, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, indices): the in-neighbours of every node."""
    src, dst = edge_index.numpy()
    order = np.lexsort((src, dst))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))]).astype(np.int64)
    return indptr, src[order].astype(np.int64)


def sparse_rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as sparse CSR when most entries are zero (bag-of-words features)."""
    return x.to_sparse_csr() if float((x != 0).float().mean()) < 0.2 else x


def _draw(draw: int) -> list[int]:
    """The extra seed words of evaluation draw ``draw`` (none for the default draw 0)."""
    if draw < 0:
        raise ValueError(f"evaluation draw must be >= 0, got {draw}")
    return [draw] if draw else []


def predict_graph(model: EgoNet, x: torch.Tensor, csr: tuple[np.ndarray, np.ndarray],
                  nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:  # fmt: skip
    """Predicted classes of ``nodes`` (one sampled tree each), eval mode."""
    model.eval()
    with torch.no_grad():
        r = model.reduce(x)
        out = []
        for chunk in np.array_split(nodes, max(1, nodes.size // 512)):
            t, v = sample_trees(*csr, chunk, rng)
            out.append(model.personal(r[torch.from_numpy(t)], torch.from_numpy(v)).argmax(-1))
    return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.int64)


class EgoClient(Party):
    """One FedEgo client, or a baseline client on the same model (``variant``)."""

    def __init__(self, view: ClientGraph, config: ExperimentConfig, settings: FedEgoSettings,
                 variant: str, agg: AggregationClient, seed: int,
                 noise_seed: int | None) -> None:  # fmt: skip
        self.party_id = client_party_id(view.client_id)
        self.s, self.variant, self.seed, self.agg = settings, variant, seed, agg
        #: the delta last handed to the protocol: its own data, read only by the simulator's
        #: audit of the aggregate (:mod:`securefgl.federation.audit`)
        self.last_input: tuple[np.ndarray, float] | None = None
        self.view = view
        self.x = sparse_rows(view.x)
        self.y = view.y
        self.csr = csr_of(view.edge_index, view.num_nodes)
        with party_torch_rng(seed, "fedego-init"):  # one initial model for every client
            self.model = EgoNet(view.num_features, settings.hidden, view.num_classes, 0.5)
        self.shared = self.model.parts(EgoNet.SHARED if variant == "fedego" else
                                       EgoNet.SHARED + EgoNet.PERSONAL)  # fmt: skip
        if variant == "local":
            self.shared = []
        self.personal = self.model.parts(EgoNet.PERSONAL)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=settings.lr, fused=True)
        self.rng = np.random.default_rng([seed, view.client_id, 0xE6])  # sampling, batches
        self.noise = make_rng(noise_seed, "fedego-mixup-dp", self.party_id)
        self.train_pos = np.flatnonzero(view.train_mask.numpy())
        self.epoch_size = max(1, view.num_nodes // 5)
        nontest = ~view.test_mask.numpy()
        counts = np.bincount(view.y.numpy()[nontest], minlength=view.num_classes)
        self.p_k = counts / max(counts.sum(), 1)  # own label distribution (never sent)
        self.global_shared: np.ndarray | None = None
        self.start: np.ndarray | None = None
        self.upload: dict[str, np.ndarray] = {}
        #: the centres of each mixed graph, by round (round 0 and the latest; audits only)
        self.upload_truth: dict[int, list[np.ndarray]] = {}
        self.lam: float | None = None

    def roles(self) -> Iterable[object | None]:
        return (self, self.agg)

    def receive_shared(self, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag == TAG_SHARED:
                self.global_shared = env.payload.array("params")

    # -- local stage --------------------------------------------------------------------
    def local_update(self, round_idx: int) -> float:
        """Load the shared layers' mean; ``local_epochs`` epochs of mini-batches on a fresh
        ``n_k // 5`` nodes each; the shared layers' update to the protocol; the mixup."""
        s, model = self.s, self.model
        if self.global_shared is not None and self.shared:
            load_flat(self.shared, self.global_shared)
        self.start = flat_of(self.shared)
        center = [p.detach().clone() for p in self.shared] if self.variant == "fedprox" else None
        model.train()
        losses = []
        with party_torch_rng(self.seed, self.party_id, round_idx):
            for _ in range(s.local_epochs):
                k = min(self.epoch_size, self.train_pos.size)
                nodes = self.rng.choice(self.train_pos, size=k, replace=False)
                for b in range(0, k, s.batch_size):
                    centres = nodes[b : b + s.batch_size]
                    trees, valid = sample_trees(*self.csr, centres, self.rng)
                    self.opt.zero_grad()
                    out = model(self.x, trees, valid)
                    loss = F.nll_loss(out, self.y[torch.from_numpy(centres)])
                    if center is not None and round_idx > 0:
                        loss = loss + s.mu / 2 * sum(((p - c) ** 2).sum()
                                                     for p, c in zip(self.shared, center,
                                                                     strict=True))  # fmt: skip
                    loss.backward()
                    self.opt.step()
                    losses.append(float(loss.detach()))
        if self.shared:
            delta = flat_of(self.shared) - self.start
            self.last_input = (delta, 1.0)
            self.agg.begin_round(round_idx, delta, 1.0)  # the code's uniform mean
        if self.variant == "fedego":
            self._mixup(round_idx)
        return float(np.mean(losses)) if losses else 0.0

    def _mixup(self, round_idx: int) -> None:
        """Ego-graph mixup (§4.3): the upload centres in batches of ``batch_size``; per batch
        the trees aligned slot by slot and the reduction embeddings r and one-hot labels
        averaged; with ``dp_noise`` each tree's (r, y) clipped to ``dp_clip`` and the sum
        noised before the division."""
        s, model = self.s, self.model
        model.eval()
        with torch.no_grad():
            r = model.reduce(self.x).numpy().astype(np.float64)
        onehot = np.eye(self.view.num_classes)[self.y.numpy()]
        centres = self.rng.permutation(self.train_pos)
        size = s.batch_size if s.mixup else 1
        rs, ys, truth = [], [], []
        for b in range(0, centres.size, size):
            batch = centres[b : b + size]
            trees, valid = sample_trees(*self.csr, batch, self.rng)
            mr, my = mix_batch(r, onehot, trees, valid, s.dp_clip, s.dp_noise, self.noise)
            rs.append(mr)
            ys.append(my)
            truth.append(batch)
        self.upload = {"r": np.stack(rs).astype(np.float32), "y": np.stack(ys).astype(np.float32)}
        self.upload_truth = {t: c for t, c in self.upload_truth.items() if t == 0}
        self.upload_truth[round_idx] = truth

    def send_mixed(self, round_idx: int) -> list[Envelope]:
        return [Envelope(self.party_id, SERVER, TAG_MIXED, Payload(dict(self.upload),
                                                                   {"round": round_idx}))]

    def apply_result(self, round_idx: int) -> None:
        """Protocols that deliver the mean to the clients (ckks): the same mean everywhere."""
        result = self.agg.result() if self.shared else None
        if result is not None and self.start is not None:
            self.global_shared = self.start + result.mean

    def receive_personal(self, round_idx: int, inbox: list[Envelope]) -> None:
        """θ_k ← λ_k θ_server + (1 − λ_k) θ_k with λ_k = (EMD(p_k, p_g)/2)^power, computed
        here from the client's own label distribution (it never leaves the client)."""
        for env in inbox:
            if env.tag != TAG_PERSONAL:
                continue
            p_g = env.payload.array("p_g")
            emd = float(np.abs(self.p_k - p_g).sum())
            lam = self.s.lambda_fixed
            if lam is None:
                lam = (emd / 2) ** self.s.lambda_power
            self.lam = float(lam)
            mixed = lam * env.payload.array("params") + (1 - lam) * flat_of(self.personal)
            load_flat(self.personal, mixed)

    def predict(self, draw: int = 0) -> SplitPredictions:
        """Predictions on every split; ``draw`` > 0 samples other trees (the authors'
        evaluation draws fresh neighbours at every evaluation)."""
        rng = np.random.default_rng([self.seed, self.view.client_id, 0xE7A1, *_draw(draw)])
        nodes = np.arange(self.view.num_nodes)
        pred = predict_graph(self.model, self.x, self.csr, nodes, rng)
        y = self.y.numpy()
        out = {}
        for split, mask in (("train", self.view.train_mask), ("val", self.view.val_mask),
                            ("test", self.view.test_mask)):  # fmt: skip
            m = mask.numpy()
            out[split] = unlinked(y[m], pred[m])
        return out

    def predict_on(self, x: np.ndarray, edge_index: np.ndarray, y: np.ndarray,
                   draw: int = 0) -> float:  # fmt: skip
        """Micro-F1 (= accuracy) of this client's model on another graph (the global test
        graph: the simulator's evaluation oracle, not a protocol message)."""
        rng = np.random.default_rng([self.seed, self.view.client_id, 0x61, *_draw(draw)])
        csr = csr_of(torch.from_numpy(edge_index), x.shape[0])
        xt = sparse_rows(torch.from_numpy(x).float())
        pred = predict_graph(self.model, xt, csr, np.arange(x.shape[0]), rng)
        return float((pred == y).mean())


class EgoServer(Party):
    """Averages the shared layers (through the protocol), trains its personalised layers on
    the mixed ego-graphs and sends them with the mean soft label p_g."""

    def __init__(self, params: np.ndarray, personal: np.ndarray, in_dim: int, classes: int,
                 settings: FedEgoSettings, agg: AggregationServer, holds: bool,
                 seed: int) -> None:  # fmt: skip
        self.party_id = SERVER
        self.params: np.ndarray | None = params
        self.s, self.agg, self.holds = settings, agg, holds
        with party_torch_rng(seed, "fedego-server"):
            self.net = EgoNet(in_dim, settings.hidden, classes, 0.5)
        self.personal = self.net.parts(EgoNet.PERSONAL)
        load_flat(self.personal, personal)
        self.opt = torch.optim.Adam(self.personal, lr=settings.lr, fused=True)
        self.rng = np.random.default_rng([seed, 0x5E])
        self.seed = seed
        self.received: dict[str, dict[str, np.ndarray]] = {}

    def roles(self) -> Iterable[object | None]:
        return (self, self.agg)

    def broadcast(self, round_idx: int, receivers: list[str]) -> list[Envelope]:
        if self.params is None:
            return []
        payload = Payload({"params": self.params}, {"round": round_idx})
        if not self.holds:
            self.params = None  # ckks: from now on the clients hold the mean
        return [Envelope(self.party_id, r, TAG_SHARED, payload) for r in receivers]

    def begin_aggregation(self, round_idx: int, participants: list[str]) -> None:
        self.agg.begin_round(round_idx, participants)

    def apply_result(self, round_idx: int) -> None:
        result = self.agg.result()
        if result is not None and self.params is not None:
            self.params = self.params + result.mean

    def train_on_mixed(self, round_idx: int, inbox: list[Envelope]) -> list[Envelope]:
        """The global stage (§4.4): ``server_epochs`` epochs of soft-label cross-entropy on
        20 % of the mixed ego-graphs (children re-drawn with replacement as the authors'
        sampler does); then the personalised layers and p_g to every client."""
        self.received = {env.sender: env.payload.fields for env in inbox if env.tag == TAG_MIXED}
        r = np.concatenate([f["r"] for f in self.received.values()])
        y = np.concatenate([f["y"] for f in self.received.values()])
        edged = np.ones(r.shape[0], dtype=bool)
        if self.s.authors_server_edges:  # local edge indices resolve to the first trees only
            edged[max(f["r"].shape[0] for f in self.received.values()):] = False
        p_g = y.reshape(-1, y.shape[-1]).mean(0)
        p_g = p_g / max(float(p_g.sum()), 1e-12)
        self.net.train()
        with party_torch_rng(self.seed, self.party_id, round_idx):
            for _ in range(self.s.server_epochs):
                k = max(1, int(round(self.s.train_fraction * r.shape[0])))
                pick = self.rng.choice(r.shape[0], size=k, replace=False)
                for b in range(0, k, self.s.batch_size):
                    idx = pick[b : b + self.s.batch_size]
                    slots = shuffle_children(idx.size, self.rng)
                    h0 = torch.from_numpy(np.take_along_axis(r[idx], slots[..., None], 1))
                    target = torch.from_numpy(y[idx, 0])
                    valid = torch.ones(idx.size, SLOTS, dtype=torch.bool)
                    valid[:, 1:] = torch.from_numpy(edged[idx])[:, None]
                    self.opt.zero_grad()
                    out = self.net.personal(h0.float(), valid)
                    loss = -(target * out).sum(-1).mean()
                    loss.backward()
                    self.opt.step()
        payload = Payload({"params": flat_of(self.personal), "p_g": p_g}, {"round": round_idx})
        return [Envelope(self.party_id, c, TAG_PERSONAL, payload) for c in self.received]


def ego_settings(config: ExperimentConfig) -> FedEgoSettings:
    return config.section(FedEgoSettings)


@party_builder
def ego_client(view: Payload, stack: dict[str, Any], variant: str, seed: int,
               noise_seed: int | None) -> EgoClient:  # fmt: skip
    cfg, v = config_from_json(stack["config"]), view_from_payload(view)
    agg = protocol_party(stack, client_party_id(v.client_id))
    return EgoClient(v, cfg, ego_settings(cfg), variant, agg, seed, noise_seed)


@party_builder
def ego_server(params: np.ndarray, personal: np.ndarray, in_dim: int, classes: int,
               stack: dict[str, Any], holds: bool, seed: int) -> EgoServer:  # fmt: skip
    cfg = config_from_json(stack["config"])
    return EgoServer(params, personal, in_dim, classes, ego_settings(cfg),
                     protocol_party(stack, SERVER), holds, seed)  # fmt: skip
