"""Central training on the global graph: the upper bound. NOT federated.

It sees every node, feature and edge, so it exists only as a reference point; results
carry ``setting: central`` (``federated: false``).
"""

from __future__ import annotations

from torch_geometric.data import Data

from securefgl.algorithms.base import Algorithm, SplitPredictions
from securefgl.algorithms.common.training import make_optimizer, predict_splits, train_epochs
from securefgl.federation.federation import Federation
from securefgl.models import build_model


class Central(Algorithm):
    name = "central"
    setting = "central"
    needs_global_graph = True

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        if global_data is None:
            raise ValueError("central needs the global graph")
        cfg = self.config
        self.data = global_data
        self.model = build_model(
            cfg.model,
            global_data.num_features,
            cfg.hidden,
            int(global_data.num_classes),
            cfg.layers,
            cfg.dropout,
        )
        self.optimizer = make_optimizer(self.model, cfg.lr, cfg.weight_decay)

    def train_round(self, round_idx: int) -> float:
        return train_epochs(self.model, self.data, self.optimizer, self.config.local_epochs)

    def predict(self) -> list[SplitPredictions]:
        return [predict_splits(self.model, self.data)]
