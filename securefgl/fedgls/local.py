"""Local-GNNk (FedGLS, Fu et al., TMLR, Sec. 5.1.2): every client trains its own GCN alone,
graphless clients on the cosine kNN graph of their features; nothing is exchanged.

:class:`OwnModelClient` is a client whose model never leaves it (also FedProto's base): E
Adam epochs of cross-entropy per round, one Adam state kept across rounds (the model is
never replaced by an aggregate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import torch
from torch_geometric.data import Data

from securefgl.algorithms.base import Algorithm, Federation, SplitPredictions
from securefgl.algorithms.training import SPLITS
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import TRAIN, Party, client_party_id
from securefgl.fedgls.clients import Serving
from securefgl.fedgls.graphless import graphless_ids, without_edges
from securefgl.fedgls.learner import feature_knn
from securefgl.fedgls.losses import ce_loss
from securefgl.fedgls.models import Net, Propagation, gcn_propagation


def client_setup(
    view: ClientGraph, config: ExperimentConfig, graphless: bool, gnn_on_graphless: bool
) -> tuple[ClientGraph, Net, Propagation | None]:
    """A client's view (no edges if graphless), its model and its graph: a GCN over Â, or
    on a graphless client a GCN over its feature kNN (``gnn_on_graphless``) or an MLP."""
    s = config.fedgls
    if graphless:
        view = without_edges(view)
    d, c = view.num_features, view.num_classes
    if graphless and not gnn_on_graphless:
        return view, Net("mlp", d, config.hidden, c, s.split, config.dropout), None
    net = Net("gcn", d, config.hidden, c, s.split, config.dropout)
    prop = (
        feature_knn(view.x, s.knn_k, s.knn_graph == "weighted")
        if graphless
        else gcn_propagation(view.edge_index, view.num_nodes)
    )
    return view, net, prop


class OwnModelClient(Party):
    """A client with its own model, trained on its own graph."""

    SUBPARTIES: ClassVar[Mapping[str, str]] = {TRAIN: ""}

    def __init__(
        self, view: ClientGraph, config: ExperimentConfig, net: Net, prop: Propagation | None
    ) -> None:
        self.party_id = client_party_id(view.client_id)
        self.view, self.config, self.net, self.prop = view, config, net, prop
        self.weight = float(view.num_nodes)
        decay = config.weight_decay
        self.opt = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=decay)

    def training_weight(self) -> float:
        return self.weight

    def epoch_loss(self) -> torch.Tensor:
        """The local objective of one epoch (cross-entropy on the training nodes)."""
        return ce_loss(self.net(self.view.x, self.prop), self.view.y, self.view.train_mask)

    def local_update(self, round_idx: int, mu: float = 0.0) -> float:
        if not bool(self.view.train_mask.any()):
            return 0.0
        losses = []
        self.net.train()
        for _ in range(self.config.local_epochs):
            self.opt.zero_grad()
            loss = self.epoch_loss()
            loss.backward()
            self.opt.step()
            losses.append(float(loss.item()))
        return float(np.mean(losses))

    def serving_model(self) -> Serving:
        return Serving(self.net, self.prop)

    def predict(self) -> SplitPredictions:
        self.net.eval()
        with torch.no_grad():
            pred = self.net(self.view.x, self.prop).argmax(dim=-1)
        return {s: (self.view.y[m].numpy(), pred[m].numpy()) for s in SPLITS
                if (m := getattr(self.view, f"{s}_mask")) is not None}  # fmt: skip


class LocalGNNk(Algorithm):
    """No communication: each client's GCN on Â, or on its feature kNN if graphless."""

    name = "local-gnnk"

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        views = federation.views
        self.graphless = graphless_ids([v.client_id for v in views], self.config.fedgls,
                                       federation.seed)  # fmt: skip
        self.clients: dict[str, OwnModelClient] = {}
        for v in views:
            view, net, prop = client_setup(v, self.config, v.client_id in self.graphless, True)
            party = OwnModelClient(view, self.config, net, prop)
            self.clients[party.party_id] = party
        self.executor = federation.make_executor(self.clients)
        self._weights = self.executor.map(list(self.clients), TRAIN, "training_weight")

    def train_round(self, round_idx: int) -> float:
        losses = self.executor.map(list(self.clients), TRAIN, "local_update", round_idx, 0.0)
        return float(np.average(losses, weights=self._weights))

    def predict(self) -> list[SplitPredictions]:
        return self.executor.map(list(self.clients), TRAIN, "predict")

    def protection(self) -> dict[str, str]:
        return {"messages": "none (every client trains alone)"}

    def model_label(self) -> str:
        return "GCN per client (graphless clients: cosine kNN graph)"
