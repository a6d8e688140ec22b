"""A client of an edge server: its subgraph and its node classifier.

SpreadFGL (Zhong et al., §III-B, Algorithm 1 lines 4-5, 14): each round the client loads
its server's model ``W_j``, takes ``T_l`` local Adam steps (Eq. 8) on Eq. 7 (FedGL) or
Eq. 15 (SpreadFGL: ``+ λ Tr(W_L W_Lᵀ)``), and hands its parameter delta, weight 1 (uniform
aggregation, Eq. 4), to its side of the aggregation protocol. Also FedSage+'s classifier
client (``sage`` aggregator, a fixed mended graph). Its graph can carry generated
(virtual) rows linked to its own nodes (:meth:`EdgeClient.mend`): SpreadFGL's patches,
FedSage+'s mending.

The client's Adam state persists across rounds (its own optimiser; the paper does not
say). It holds its own view and what it received (generated rows, never raw features of
another client).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from protocols.base import AggregationClient, Envelope
from securefgl.algorithms.base import SplitPredictions
from securefgl.algorithms.common.edge.model import Block, Features, SageNet, propagation
from securefgl.algorithms.common.training import SPLITS, party_torch_rng, unlinked
from securefgl.data import ClientGraph
from securefgl.federation import Party, client_party_id
from securefgl.models import get_flat, set_flat

MODEL_TAG = "spreadfgl/model"


@dataclass(frozen=True)
class LocalTraining:
    """How a client trains: ``T_l`` steps, the aggregator, Eq. 15's λ, the CE reduction."""

    steps: int
    aggregator: str = "gcn"
    trace_weight: float = 0.0
    reduction: str = "sum"
    hidden: int = 64
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 0.0


class EdgeClient(Party):
    """A client of an edge server (module docstring); ``agg`` None: no server (LocalFGL)."""

    def __init__(
        self,
        view: ClientGraph,
        training: LocalTraining,
        agg: AggregationClient | None,
        server_id: str | None,
        seed: int = 0,
    ) -> None:
        self.party_id = client_party_id(view.client_id)
        self.seed = seed  # the experiment's: this client's initialisation and dropout streams
        self.server_id = server_id
        self.training = training
        self.agg = agg
        #: the delta last handed to the protocol: its own data, read only by the simulator's
        #: audit of the aggregate (:mod:`securefgl.federation.audit`)
        self.last_input: tuple[np.ndarray, float] | None = None
        self.x_own = sp.csr_matrix(view.x.numpy().astype(np.float32))
        self.y = view.y.clone()
        self.masks = {s: getattr(view, f"{s}_mask").clone() for s in SPLITS}
        self.edges = view.edge_index.numpy().astype(np.int64)
        self.num_own = view.num_nodes
        self.num_classes = view.num_classes
        with party_torch_rng(seed, self.party_id, "init"):
            self.model = SageNet(
                [view.num_features, training.hidden, view.num_classes],
                training.aggregator,
                training.dropout,
            )
        self.opt = torch.optim.Adam(
            self.model.parameters(), lr=training.lr, weight_decay=training.weight_decay
        )
        self.params: np.ndarray | None = None  # the server model as this client knows it
        self.blocks: list[Block] = []  # generated rows received (virtual nodes)
        self.patch: np.ndarray = np.zeros((2, 0), dtype=np.int64)
        self._rebuild()

    def roles(self) -> Iterable[object | None]:
        return (self, self.agg)

    # ----------------------------------------------------------------- the graph
    def _rebuild(self) -> None:
        self.feats = Features(self.x_own, self.blocks)
        edges = np.concatenate([self.edges, self.patch], axis=1)
        self.prop = propagation(edges, self.feats.num_rows, self.training.aggregator)

    def mend(self, blocks: list[Block], edges: np.ndarray) -> None:
        """Replace the virtual nodes by ``blocks`` linked by ``edges`` (FedSage+'s mending)."""
        self.blocks, self.patch = list(blocks), np.asarray(edges, np.int64).reshape(2, -1)
        self._rebuild()

    # ----------------------------------------------------------------- training
    def receive_model(self, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag == MODEL_TAG:
                self.params = env.payload.array("params").astype(np.float32)

    def _logits(self) -> torch.Tensor:
        return self.model(self.feats, self.prop)[: self.num_own]

    def _loss(self) -> torch.Tensor:
        t = self.training
        train = self.masks["train"]
        loss = nn.functional.cross_entropy(
            self._logits()[train], self.y[train], reduction=t.reduction
        )
        if t.trace_weight > 0:
            w = self.model.last_weight()
            trace = t.trace_weight * (w * w).sum()  # Tr(W Wᵀ) = ‖W‖_F²
            if t.reduction == "mean":  # Eq. 15 as a whole over the labelled nodes: λ keeps
                trace = trace / int(train.sum())  # its weight against the cross-entropy
            loss = loss + trace
        return loss

    def train_steps(self, round_idx: int) -> float:
        """``T_l`` full-batch Adam steps from the current weights; the mean loss."""
        if int(self.masks["train"].sum()) == 0:
            return 0.0
        self.model.train()
        losses = []
        with party_torch_rng(self.seed, self.party_id, round_idx):  # this client's dropout
            for _ in range(self.training.steps):
                self.opt.zero_grad()
                loss = self._loss()
                loss.backward()
                self.opt.step()
                losses.append(float(loss.detach()))
        return float(np.mean(losses))

    def local_update(self, round_idx: int) -> float:
        """Local steps from the server model; the delta goes to the aggregation protocol."""
        if self.params is None or self.agg is None:
            raise RuntimeError(f"{self.party_id}: no server model received")
        set_flat(self.model, self.params)
        loss = self.train_steps(round_idx)
        delta = get_flat(self.model).astype(np.float64) - self.params
        self.last_input = (delta, 1.0)
        self.agg.begin_round(round_idx, delta, 1.0)
        return loss

    def apply_result(self, round_idx: int) -> None:
        """Protocols that deliver the mean to the clients (CKKS): W ← W + mean delta."""
        result = self.agg.result() if self.agg is not None else None
        if result is not None and self.params is not None:
            self.params = (self.params + result.mean).astype(np.float32)

    # ----------------------------------------------------------------- evaluation
    @torch.no_grad()
    def probabilities(self) -> np.ndarray:
        self.model.eval()
        return torch.softmax(self._logits(), dim=-1).numpy()

    def predict(self) -> SplitPredictions:
        if self.params is not None:
            set_flat(self.model, self.params)
        self.model.eval()
        with torch.no_grad():
            pred = self._logits().argmax(dim=-1)
        return {s: unlinked(self.y[m].numpy(), pred[m].numpy()) for s, m in self.masks.items()}

    @torch.no_grad()
    def predict_on(self, x: np.ndarray, edge_index: np.ndarray, y: np.ndarray) -> float:
        """Accuracy (= micro-F1) of the model this client evaluates with on another graph
        (e.g. FedEgo's global test graph; a simulator oracle, not a message)."""
        if self.params is not None:
            set_flat(self.model, self.params)
        self.model.eval()
        feats = Features(sp.csr_matrix(np.asarray(x, dtype=np.float32)), [])
        prop = propagation(np.asarray(edge_index, np.int64), feats.num_rows,
                           self.training.aggregator)  # fmt: skip
        pred = self.model(feats, prop).argmax(dim=-1).numpy()
        return float((pred == np.asarray(y)).mean())
