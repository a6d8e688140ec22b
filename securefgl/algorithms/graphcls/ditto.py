"""Ditto (Li et al., ICML 2021, Algorithm 1) on GIN: FedAvg plus a personal model per client.

Each round a client (i) trains its personal model v on its own graphs for ``local_epochs``
epochs with the pull ``λ/2 ||v − w^t||²`` towards the global model w^t it received, and (ii)
trains a copy of w^t as FedAvg does, whose update travels through the configured protocol
stack. Predictions come from the personal model. λ = ``ditto_lambda`` of
``[experiment.graph]`` (1.0; FedVN's paper does not state its value). The personal model
starts from the common initial model and never leaves the client.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from protocols.wire import Payload
from securefgl.algorithms.base import SplitPredictions
from securefgl.algorithms.common.graph.learner import make_optimizer, predictions
from securefgl.algorithms.common.graph.training import train_epochs
from securefgl.algorithms.common.training import party_torch_rng
from securefgl.algorithms.graphcls.fedavg import GraphFedAvg, GraphFedAvgClient
from securefgl.data.graph_views import GraphClientView
from securefgl.federation import client_party_id
from securefgl.federation.builders import (
    config_from_json,
    graph_view_from_payload,
    graph_view_payload,
    protocol_party,
)
from securefgl.federation.recipes import Recipe, party_builder, recipe


class DittoClient(GraphFedAvgClient):
    """A FedAvg client that also keeps a personal model (never sent)."""

    personal: Any = None

    def _personal(self) -> Any:
        if self.personal is None:  # the common initial model, received before round 0
            self._load_global()
            self.personal = copy.deepcopy(self.model)
            self.personal_opt = make_optimizer(self.personal.parameters(), self.settings)
            self.personal_shuffle = np.random.default_rng(self.shuffle.integers(2**62))
        return self.personal

    def local_update(self, round_idx: int, mu: float) -> float:
        personal = self._personal()
        self._load_global()
        anchor = [p.detach().clone() for p in self.model.parameters()]
        with party_torch_rng(self.seed, self.party_id, "ditto", round_idx):
            train_epochs(
                personal, self.personal_opt, self.train_set, self.settings.batch_size,
                self.personal_shuffle, self.config.local_epochs, anchor,
                self.settings.ditto_lambda,
            )  # fmt: skip
        return super().local_update(round_idx, 0.0)

    def predict(self) -> SplitPredictions:
        return predictions(self._personal(), self.test_set, self.val_set,
                           self.settings.eval_batch_size)  # fmt: skip


@party_builder
def ditto_client(
    view: Payload, stack: dict[str, Any], seed: int, noise_seed: int | None
) -> DittoClient:
    v = graph_view_from_payload(view)
    agg = protocol_party(stack, client_party_id(v.client_id))
    config = config_from_json(stack["config"])
    return DittoClient(v, config, agg, "gin", None, seed, noise_seed)


class Ditto(GraphFedAvg):
    """FedAvg's rounds with Ditto's personal models."""

    name = "ditto"

    def graph_client_recipe(
        self, view: GraphClientView, stack: dict[str, Any], shared: np.ndarray | None,
        initial: np.ndarray | None,
    ) -> Recipe:  # fmt: skip
        fed = self.federation
        return recipe(ditto_client, view=graph_view_payload(view), stack=stack, seed=fed.seed,
                      noise_seed=fed.noise_seed)  # fmt: skip

    def protection(self) -> dict[str, str]:
        return {**super().protection(), "personal models": "never sent (local)"}

    def model_label(self) -> str:
        return "GIN (Ditto: personal models, λ-pulled to the global one)"
