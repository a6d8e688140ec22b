"""Client parties of the FedGLS family (Fu et al., TMLR, Algorithm 1 and Sec. 5.1.2).

Every client holds its own view (a graphless client's has no edges), its propagation (its
real graph, a fixed feature kNN, or the graph its learner g(ω) produces) and the models it
trains, and uploads ``θ_k − θ`` (and ``φ_k − φ``) through its side of the aggregation
protocol with weight ``n_k`` (Eq. 12: all nodes). The protocols put the weight inside the
protected sum (``protocols.base``: the weighted mean ``Σ w_i x_i / Σ w_i``; SecAgg masks
``w_i x_i`` and ``w_i`` together, CKKS encrypts both), so under secure aggregation the server
learns only ``Σ n_k``; under ``clip_noise`` the weights are uniform. The holder of the
aggregate applies it with SGD at learning rate 1: plain FedAvg (Eq. 4 and 12).

:class:`FedGLSClient` runs Algorithm 1: on a graphless client one Adam step of ω on the
contrastive loss (Eq. 8-9) with the just-received global θ, φ (in eval mode: a deterministic
function of X and the global models), then S is recomputed and held fixed; then E local
epochs, each one Adam step of θ on CE (Eq. 10) and one of φ on KD (Eq. 11, teacher detached
and in eval mode, θ_c frozen). θ / φ Adam states are reset each round (``optimizer_state``);
ω's persists (ω is never averaged). :class:`SingleModelClient` trains one model by CE (the
FedAvg baselines).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from protocols.base import AggregationClient
from protocols.dp.rng import make_rng
from securefgl.algorithms.base import SplitPredictions
from securefgl.algorithms.common.server_optimizer import GlobalOptimizer
from securefgl.algorithms.common.training import SPLITS, party_torch_rng, unlinked
from securefgl.algorithms.fedavg.parties import RoundClient
from securefgl.algorithms.fedgls.learner import AttentiveLearner
from securefgl.algorithms.fedgls.losses import ce_loss, contrastive_loss, kd_loss
from securefgl.algorithms.fedgls.models import Net, Propagation
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import Party, client_party_id
from securefgl.models import get_flat, set_flat

MODEL_TAG = "fedgls/model"


@dataclass(frozen=True)
class Layout:
    """The federated vector: parameter blocks (e.g. θ, φ) in order, and for federations
    that train different blocks on different clients (Fed-GNNMLP) one indicator per block,
    so that each block is averaged over the clients that trained it, inside the same sum."""

    sizes: tuple[int, ...]
    indicators: bool = False

    @property
    def params_dim(self) -> int:
        return sum(self.sizes)

    @property
    def dim(self) -> int:
        return self.params_dim + (len(self.sizes) if self.indicators else 0)

    def block(self, b: int) -> slice:
        start = sum(self.sizes[:b])
        return slice(start, start + self.sizes[b])

    def encode(self, deltas: Mapping[int, np.ndarray]) -> np.ndarray:
        out = np.zeros(self.dim)
        for b, delta in deltas.items():
            out[self.block(b)] = delta
            if self.indicators:
                out[self.params_dim + b] = 1.0
        return out

    def decode(self, mean: np.ndarray) -> np.ndarray:
        """The mean update of each block over the clients that trained it."""
        out = np.array(mean[: self.params_dim], dtype=np.float64)
        if self.indicators:
            for b in range(len(self.sizes)):
                share = float(mean[self.params_dim + b])
                out[self.block(b)] = out[self.block(b)] / share if share > 1e-9 else 0.0
        return out


class Serving(nn.Module):
    """A client's model with its graph baked in: ``model(x, edge_index)``, the edges
    ignored (a graphless client serves on its learned graph). ``x`` may stack ``b``
    copies of the client's rows (LinkTeller's batch)."""

    def __init__(self, net: Net, prop: Propagation | None) -> None:
        super().__init__()
        self.net = net
        self.num_nodes = None if prop is None else prop.num_nodes
        if prop is not None:
            self.register_buffer("rows", prop.rows.clone())
            self.register_buffer("cols", prop.cols.clone())
            self.register_buffer("weights", prop.weights.detach().clone())

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor | None = None) -> torch.Tensor:
        del edge_index  # the deployment's graph is baked in
        if self.num_nodes is None:
            return self.net(x)
        n = self.num_nodes
        b = x.shape[0] // n
        prop = Propagation(self.rows, self.cols, self.weights, n)
        out = self.net(x.view(b, n, -1).transpose(0, 1), prop)
        return out.transpose(0, 1).reshape(b * n, -1)


class FederatedClient(RoundClient, Party):
    """What every client of the family shares: its view, graph, blocks and protocol side."""

    model_tag = MODEL_TAG

    def __init__(
        self,
        view: ClientGraph,
        config: ExperimentConfig,
        agg: AggregationClient | None,  # None: a copy that never uploads (the replay attack)
        layout: Layout,
        nets: dict[int, Net],
        prop: Propagation | None,
        noise_seed: int | None = None,
        graphless: bool = False,
        seed: int = 0,
    ) -> None:
        self.party_id = client_party_id(view.client_id)
        self.seed = seed  # the experiment's: this client's dropout stream
        self.graphless = graphless  # its view holds no edges (the simulator's choice)
        self.predictor = min(nets)  # the block that classifies (θ for FedGLS)
        self.coin = make_rng(noise_seed, "client-sampling", self.party_id)
        self.view = view
        self.config, self.settings = config, config.fedgls
        self.agg, self.layout, self.nets, self.prop = agg, layout, nets, prop
        self.weight = float(view.num_nodes)  # n_k: every node (Eq. 12)
        self.params: np.ndarray | None = None
        self.global_opt = None
        self._kept: dict[str, torch.optim.Optimizer] = {}

    def optimizer_settings(self) -> tuple[str, float, float]:
        return "sgd", 1.0, 0.0  # FedAvg: the global model is the weighted mean (Eq. 12)

    def apply_result(self, round_idx: int) -> None:
        result = self.agg.result() if self.agg is not None else None
        if result is None or self.params is None:
            return
        if self.global_opt is None:
            self.global_opt = GlobalOptimizer(self.params, *self.optimizer_settings())
        self.params = self.global_opt.step(self.layout.decode(result.mean))

    def load(self) -> None:
        """The global parameters into this client's blocks."""
        if self.params is None:
            raise RuntimeError(f"{self.party_id}: no global model received")
        for b, net in self.nets.items():
            set_flat(net, self.params[self.layout.block(b)])

    def upload(self, round_idx: int) -> None:
        """``(θ_k − θ, …)`` of the blocks this client trained, weight n_k."""
        assert self.params is not None and self.agg is not None
        deltas = {
            b: get_flat(net).astype(np.float64) - self.params[self.layout.block(b)]
            for b, net in self.nets.items()
        }
        self.submit(round_idx, self.layout.encode(deltas), max(self.weight, 1e-12))

    def optimizer(self, key: str, module: nn.Module) -> torch.optim.Optimizer:
        """Adam with α (= β) and the experiment's weight decay: fresh each round, or kept."""
        if self.settings.optimizer_state == "keep" and key in self._kept:
            return self._kept[key]
        cfg = self.config
        opt = torch.optim.Adam(module.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        if self.settings.optimizer_state == "keep":
            self._kept[key] = opt
        return opt

    def ce_step(self, net: Net, opt: torch.optim.Optimizer) -> float:
        """One full-batch step of Eq. 10 on the training nodes (none: no step, loss 0)."""
        mask = self.view.train_mask
        if not bool(mask.any()):
            return 0.0
        net.train()
        opt.zero_grad()
        loss = ce_loss(net(self.view.x, self.prop), self.view.y, mask)
        loss.backward()
        opt.step()
        return float(loss.item())

    def serving_model(self) -> Serving:
        """The model this client deploys: the global predictor on its own graph."""
        self.load()
        return Serving(self.nets[self.predictor], self.prop)

    def predict(self) -> SplitPredictions:
        self.load()
        net = self.nets[self.predictor]
        net.eval()
        with torch.no_grad():
            pred = net(self.view.x, self.prop).argmax(dim=-1)
        return {
            s: unlinked(self.view.y[m].numpy(), pred[m].numpy())
            for s in SPLITS
            if (m := getattr(self.view, f"{s}_mask")) is not None
        }


class SingleModelClient(FederatedClient):
    """Fed-MLP, Fed-GNNMLP, Fed-GNNk, Fed-GNN: E Adam epochs of CE on one model."""

    def local_update(self, round_idx: int, mu: float = 0.0) -> float:
        self.load()
        ((_, net),) = self.nets.items()
        opt = self.optimizer("model", net)
        with party_torch_rng(self.seed, self.party_id, round_idx):
            losses = [self.ce_step(net, opt) for _ in range(self.config.local_epochs)]
        self.upload(round_idx)
        return float(np.mean(losses))


class FedGLSClient(FederatedClient):
    """Algorithm 1: blocks 0 = θ (the GCN f), 1 = φ (the MLP h); a graphless client also
    holds its learner g(ω), which never leaves it."""

    def __init__(self, *args: Any, learner: AttentiveLearner | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.learner = learner
        self.learner_opt: torch.optim.Optimizer | None = None
        if learner is not None:
            lr = self.settings.learner_lr
            self.learner_opt = torch.optim.Adam(learner.parameters(), lr=lr)
            with torch.no_grad():
                self.prop = learner(self.view.x).detach()  # ω = ones: the feature kNN

    @property
    def gcn(self) -> Net:
        return self.nets[0]

    @property
    def mlp(self) -> Net:
        return self.nets[1]

    def learn_graph(self) -> float:
        """One step of ω on Eq. 8-9 with the global θ, φ; S is recomputed and fixed."""
        assert self.learner is not None and self.learner_opt is not None
        x = self.view.x
        self.gcn.eval()
        self.mlp.eval()
        loss = torch.zeros(())
        if x.shape[0] >= 2:
            with torch.no_grad():
                h = self.mlp.encode(x)
            z = self.gcn.encode(x, self.learner(x))
            loss = contrastive_loss(z, h, self.settings.tau)
            params = list(self.learner.parameters())
            grads = torch.autograd.grad(loss, params)  # ω only: θ and φ are untouched
            self.learner_opt.zero_grad()
            for p, g in zip(params, grads, strict=True):
                p.grad = g
            self.learner_opt.step()
        with torch.no_grad():
            self.prop = self.learner(x).detach()
        return float(loss.item())

    def kd_step(self, opt: torch.optim.Optimizer) -> float:
        """One step of φ on Eq. 11: teacher = softmax(θ_c(Z)) (eval, detached), student =
        softmax(θ_c(h(X))) with θ_c frozen."""
        x = self.view.x
        self.gcn.eval()
        with torch.no_grad():
            teacher = torch.softmax(self.gcn(x, self.prop), dim=-1)
        self.mlp.train()
        opt.zero_grad()
        student = self.gcn.classify(self.mlp.encode(x), frozen=True)
        loss = kd_loss(student, teacher, self.settings.kd_reduction)
        loss.backward()
        opt.step()
        return float(loss.item())

    def local_update(self, round_idx: int, mu: float = 0.0) -> float:
        self.load()
        with party_torch_rng(self.seed, self.party_id, round_idx):  # this client's dropout
            if self.learner is not None:
                self.learn_graph()
            opt_theta = self.optimizer("theta", self.gcn)
            opt_phi = self.optimizer("phi", self.mlp)
            losses = []
            for _ in range(self.config.local_epochs):
                losses.append(self.ce_step(self.gcn, opt_theta))
                self.kd_step(opt_phi)
        self.upload(round_idx)
        return float(np.mean(losses))
