"""Local training: every client trains alone on its own subgraph (the lower bound).

No message is exchanged. Each round is ``local_epochs`` full-batch steps per client.
"""

from __future__ import annotations

import numpy as np
from torch_geometric.data import Data

from securefgl.algorithms.base import Algorithm, SplitPredictions
from securefgl.algorithms.common.training import make_optimizer, predict_splits, train_epochs
from securefgl.federation.federation import Federation
from securefgl.models import build_model


class Local(Algorithm):
    name = "local"
    setting = "local"

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        self.graphs = [v.to_data() for v in federation.views]
        self.models = [
            build_model(
                cfg.model, v.num_features, cfg.hidden, v.num_classes, cfg.layers, cfg.dropout
            )
            for v in federation.views
        ]
        self.optimizers = [make_optimizer(m, cfg.lr, cfg.weight_decay) for m in self.models]

    def train_round(self, round_idx: int) -> float:
        losses, weights = [], []
        for model, opt, data in zip(self.models, self.optimizers, self.graphs, strict=True):
            losses.append(train_epochs(model, data, opt, self.config.local_epochs))
            weights.append(float(data.train_mask.sum()))
        return float(np.average(losses, weights=weights)) if sum(weights) else 0.0

    def predict(self) -> list[SplitPredictions]:
        return [predict_splits(m, d) for m, d in zip(self.models, self.graphs, strict=True)]
