"""Local-GNNk (FedGLS, Fu et al., TMLR, Sec. 5.1.2): every client trains its own GCN alone,
graphless clients on the cosine kNN graph of their features; nothing is exchanged.

:class:`OwnModelClient` is a client whose model never leaves it (also FedProto's base): E
Adam epochs of cross-entropy per round, one Adam state kept across rounds (the model is
never replaced by an aggregate).
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data

from protocols.wire import Payload
from securefgl.algorithms.base import Algorithm, Evaluators, SplitPredictions
from securefgl.algorithms.common.training import SPLITS, party_torch_rng, unlinked
from securefgl.algorithms.fedgls.clients import Serving
from securefgl.algorithms.fedgls.graphless import graphless_ids, view_payload_of
from securefgl.algorithms.fedgls.learner import feature_knn
from securefgl.algorithms.fedgls.losses import ce_loss
from securefgl.algorithms.fedgls.models import Net, Propagation, gcn_propagation
from securefgl.algorithms.fedgls.settings import UNREAD_BY_FEDGLS
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import Party, client_party_id
from securefgl.federation.builders import (
    config_from_json,
    config_json,
    view_from_payload,
)
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import party_builder, recipe


def client_setup(
    view: ClientGraph, config: ExperimentConfig, graphless: bool, gnn_on_graphless: bool,
    seed: int,
) -> tuple[Net, Propagation | None]:  # fmt: skip
    """A client's model (initialised from its own stream of the experiment's ``seed``) and
    its graph: a GCN over Â, or on a graphless client (whose ``view`` came without edges,
    :func:`~securefgl.algorithms.fedgls.graphless.view_payload_of`) a GCN over its feature kNN
    (``gnn_on_graphless``) or an MLP."""
    s = config.fedgls
    d, c = view.num_features, view.num_classes
    kind = "mlp" if graphless and not gnn_on_graphless else "gcn"
    with party_torch_rng(seed, client_party_id(view.client_id), "init"):
        net = Net(kind, d, config.hidden, c, s.split, config.dropout)
    if kind == "mlp":
        return net, None
    prop = (
        feature_knn(view.x, s.knn_k, s.knn_graph == "weighted")
        if graphless
        else gcn_propagation(view.edge_index, view.num_nodes)
    )
    return net, prop


class OwnModelClient(Party):
    """A client with its own model, trained on its own graph."""

    def __init__(
        self, view: ClientGraph, config: ExperimentConfig, net: Net, prop: Propagation | None,
        seed: int = 0,
    ) -> None:  # fmt: skip
        self.party_id = client_party_id(view.client_id)
        self.seed = seed  # the experiment's: this client's dropout stream
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
        with party_torch_rng(self.seed, self.party_id, round_idx):
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
        return {s: unlinked(self.view.y[m].numpy(), pred[m].numpy()) for s in SPLITS
                if (m := getattr(self.view, f"{s}_mask")) is not None}  # fmt: skip


@party_builder
def own_model_client(view: Payload, config: str, graphless: bool, seed: int) -> OwnModelClient:
    """Local-GNNk's client (a graphless client's view arrives without its edges)."""
    cfg = config_from_json(config)
    v = view_from_payload(view)
    net, prop = client_setup(v, cfg, graphless, True, seed)
    return OwnModelClient(v, cfg, net, prop, seed)


class LocalGNNk(Algorithm):
    """No communication: each client's GCN on Â, or on its feature kNN if graphless."""

    name = "local-gnnk"
    setting = "local"
    instead_of = UNREAD_BY_FEDGLS


    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        views = federation.views
        self.graphless = graphless_ids([v.client_id for v in views], self.config.fedgls,
                                       federation.seed)  # fmt: skip
        config = config_json(self.config)
        recipes = {}
        for v in views:
            graphless = v.client_id in self.graphless
            recipes[client_party_id(v.client_id)] = recipe(
                own_model_client, view=view_payload_of(v, graphless),
                config=config, graphless=graphless, seed=federation.seed,
            )  # fmt: skip
        self.executor = federation.make_executor(recipes)
        self.clients = {pid: self.executor.held(pid) for pid in recipes}
        self._weights = self.executor.map(list(self.clients), OwnModelClient.training_weight)

    def train_round(self, round_idx: int) -> float:
        losses = self.executor.map(list(self.clients), OwnModelClient.local_update, round_idx, 0.0)
        return float(np.average(losses, weights=self._weights))

    def evaluators(self) -> Evaluators:
        return Evaluators(list(self.clients), OwnModelClient.predict)

    def protection(self) -> dict[str, str]:
        return {"messages": "none (every client trains alone)"}

    def model_label(self) -> str:
        return "GCN per client (graphless clients: cosine kNN graph)"
