"""The self-train baseline's client: its own GIN from the common initial model, never
communicating after it (GPFL's Table 2)."""

from __future__ import annotations

from protocols.wire import Payload
from securefgl.algorithms.common.graph.learner import GraphLearner
from securefgl.config import ExperimentConfig
from securefgl.data.graph_views import GraphClientView
from securefgl.federation import Party
from securefgl.federation.builders import config_from_json, graph_view_from_payload
from securefgl.federation.recipes import party_builder


class SelfTrainClient(GraphLearner, Party):
    def __init__(self, view: GraphClientView, config: ExperimentConfig, seed: int) -> None:
        self.init_learner(view, config, "gin", seed)

    def local_round(self, round_idx: int) -> float:
        return self.train_local(round_idx)


@party_builder
def selftrain_client(view: Payload, config: str, seed: int) -> SelfTrainClient:
    return SelfTrainClient(graph_view_from_payload(view), config_from_json(config), seed)
