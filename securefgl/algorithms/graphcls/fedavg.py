"""Graph-classification baselines on GIN: self-train, FedAvg, FedProx, FedBN and FedStar.

As in GPFL's code (TMLR 2025, ``training.py``): every client trains ``local_epochs`` epochs
of mini-batch Adam (state kept across rounds; or plain SGD, ``optimizer = "sgd"``) from the
current model; FedAvg sets every client to the average of the local models weighted by
training graphs (``aggregate_weights``), FedProx adds ``μ/2 ||w − w_global||²`` (μ = 0.01),
FedBN (Li et al., ICLR 2021, §3) averages everything but the batch-norm parameters, which
stay with each client (on GIN-BN; GPFL's GIN has none, so there FedBN is FedAvg), FedStar
(Tan et al., AAAI 2023) averages only the structure channel of GIN_dc (parameters named
``_s``, ``aggregate_weights_se``) and keeps the rest local, and self-train never
communicates after the common initial model.

The averages travel through the configured protocol stack (plain, secagg, secagg+, ckks,
clip_noise, LDP), as FedAvg's do on node tasks: the mean of the clients' deltas with a
server step of 1 (plain averaging) equals the weighted average of the local models.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from torch import nn
from torch_geometric.data import Data

from protocols.base import AggregationClient, Role
from protocols.dp.rng import make_rng
from protocols.wire import Payload
from securefgl.algorithms.base import Evaluators, SplitPredictions
from securefgl.algorithms.common.graph.learner import (
    INITIAL_MODEL,
    GraphAlgorithm,
    GraphLearner,
    build_model,
    init_server,
    send_initial,
)
from securefgl.algorithms.common.graph.models import shared_structure_index, unshared_index
from securefgl.algorithms.common.server_optimizer import GlobalOptimizer
from securefgl.algorithms.fedavg.algorithm import MODEL_BROADCAST, MODEL_UPDATES, FedAvg
from securefgl.algorithms.fedavg.parties import FedAvgServer, RoundClient
from securefgl.algorithms.graphcls.parties import SelfTrainClient, selftrain_client
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data.graph_views import GraphClientView
from securefgl.federation import SERVER, Party, client_party_id
from securefgl.federation.builders import (
    config_from_json,
    config_json,
    graph_view_from_payload,
    graph_view_payload,
    protocol_party,
)
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import Recipe, party_builder, recipe
from securefgl.models import get_flat

PLAIN_AVERAGE = ("sgd", 1.0, 0.0)  # the server step that turns the mean delta into FedAvg


class SelfTrain(GraphAlgorithm):
    name = "self-train"
    setting = "local"

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        views: list[GraphClientView] = federation.views  # type: ignore[assignment]
        self.ids = [client_party_id(v.client_id) for v in views]
        init = build_model("gin", views[0].num_features, views[0].num_classes, self.config)
        config = config_json(self.config)
        self.executor = federation.make_executor({
            SERVER: recipe(init_server, params=get_flat(init)),
            **{pid: recipe(selftrain_client, view=graph_view_payload(v), config=config,
                           seed=federation.seed) for pid, v in zip(self.ids, views, strict=True)},
        })  # fmt: skip
        self.clients = {pid: self.executor.held(pid) for pid in self.ids}
        self.federation = federation
        send_initial(self.executor, federation.channel, self.ids)
        self._weights = np.array(self.executor.map(self.ids, GraphLearner.training_weight))

    def train_round(self, round_idx: int) -> float:
        self.federation.channel.round = round_idx
        losses = self.executor.map(self.ids, SelfTrainClient.local_round, round_idx)
        return float(np.average(losses, weights=self._weights))

    def evaluators(self) -> Evaluators:
        return Evaluators(self.ids, GraphLearner.predict)

    def protection(self) -> dict[str, str]:
        return {INITIAL_MODEL: "plain"}


class GraphFedAvgClient(RoundClient, GraphLearner, Party):
    """A client: its graphs and model; ``params`` is the shared part of the global model as
    it knows it (all parameters, or FedStar's structure channel)."""

    def __init__(
        self,
        view: GraphClientView,
        config: ExperimentConfig,
        agg: AggregationClient,
        kind: str,
        shared: np.ndarray | None,
        seed: int,
        noise_seed: int | None,
        initial: np.ndarray | None = None,
    ) -> None:
        self.init_learner(view, config, kind, seed)
        self.coin = make_rng(noise_seed, "client-sampling", self.party_id)
        self.agg = agg
        self.shared = shared
        if initial is not None:  # FedStar: the private part starts from the common model too
            self.load_flat(initial)
        self.params: np.ndarray | None = None
        self.global_opt: GlobalOptimizer | None = None

    def _load_global(self) -> None:
        if self.params is None:
            raise RuntimeError(f"{self.party_id}: no global model received")
        flat = self.flat
        if self.shared is None:
            flat = self.params
        else:
            flat[self.shared] = self.params
        self.load_flat(flat)

    def local_update(self, round_idx: int, mu: float) -> float:
        self._load_global()
        loss = self.train_local(round_idx, center=mu > 0, mu=mu)
        new = self.flat if self.shared is None else self.flat[self.shared]
        delta = new.astype(np.float64) - self.params  # type: ignore[operator]
        self.submit(round_idx, delta, max(self.weight, 1e-12))
        return loss

    def optimizer_settings(self) -> tuple[str, float, float]:
        return PLAIN_AVERAGE

    def predict(self) -> SplitPredictions:
        self._load_global()
        return GraphLearner.predict(self)


@party_builder
def graph_fedavg_client(
    view: Payload, stack: dict[str, Any], kind: str, shared: np.ndarray | None,
    initial: np.ndarray | None, seed: int, noise_seed: int | None,
) -> GraphFedAvgClient:  # fmt: skip
    """A graph FedAvg/FedProx/FedStar client (``shared``: the indices that are averaged)."""
    v = graph_view_from_payload(view)
    agg = protocol_party(stack, client_party_id(v.client_id))
    config = config_from_json(stack["config"])
    return GraphFedAvgClient(v, config, agg, kind, shared, seed, noise_seed, initial)


@party_builder
def graph_fedavg_server(params: np.ndarray, stack: dict[str, Any], holds: bool) -> FedAvgServer:
    """FedAvg's server with plain averaging (server step 1 on the mean delta)."""
    opt = GlobalOptimizer(params, *PLAIN_AVERAGE)
    return FedAvgServer(params, protocol_party(stack, SERVER), holds, opt)


class GraphFedAvg(GraphAlgorithm, FedAvg):
    """FedAvg's round loop (:class:`~securefgl.algorithms.fedavg.algorithm.FedAvg`) on GIN
    clients."""

    name = "fedavg"
    kind: ClassVar[str] = "gin"

    def shared_index(self, model: Any) -> np.ndarray | None:
        return None  # every parameter

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        self.federation = federation
        self.rng = np.random.default_rng(federation.seed)
        views: list[GraphClientView] = federation.views  # type: ignore[assignment]
        protocol = federation.stack.protocol
        if protocol.output_role is Role.CLIENT and cfg.client_fraction < 1:
            raise ConfigError(f"{protocol.name} delivers the aggregate only to the clients of "
                              "the round: use client_fraction = 1 with it")  # fmt: skip
        init = build_model(self.kind, views[0].num_features, views[0].num_classes, cfg)
        shared = self.shared_index(init)
        params = get_flat(init) if shared is None else get_flat(init)[shared]
        self.dim = int(params.size)
        ids = [client_party_id(v.client_id) for v in views]
        holds = protocol.output_role is Role.SERVER
        initial = None if shared is None else get_flat(init)
        self._make_parties(
            federation,
            ids,
            lambda stack: recipe(graph_fedavg_server, params=params, stack=stack, holds=holds),
            lambda view, stack: self.graph_client_recipe(view, stack, shared, initial),
        )
        self._setup_and_start(federation, protocol, ids)

    def graph_client_recipe(
        self, view: GraphClientView, stack: dict[str, Any], shared: np.ndarray | None,
        initial: np.ndarray | None,
    ) -> Recipe:  # fmt: skip
        """A client's recipe (``shared``: the averaged positions; ``initial``: the whole
        common model when only part of it is averaged)."""
        fed = self.federation
        return recipe(
            graph_fedavg_client, view=graph_view_payload(view), stack=stack, kind=self.kind,
            shared=shared, initial=initial, seed=fed.seed, noise_seed=fed.noise_seed,
        )  # fmt: skip

    def evaluators(self) -> Evaluators:
        return Evaluators(list(self.clients), RoundClient.predict)

    def protection(self) -> dict[str, str]:
        return {
            MODEL_UPDATES: "+".join(self.federation.stack.names) or "plain",
            MODEL_BROADCAST: "plain (every client holds the model)",
        }

    def model_label(self) -> str:
        return "GIN"


class GraphFedProx(GraphFedAvg):
    name = "fedprox"
    mu_used = True


class FedBN(GraphFedAvg):
    """FedAvg of everything but the batch norms, which stay local (Li et al., ICLR 2021)."""

    name = "fedbn"

    @classmethod
    def check_stack(cls, config: ExperimentConfig) -> None:
        super().check_stack(config)
        if config.graph.model != "gin-bn":
            raise ConfigError(f"fedbn keeps the batch norms local, and --graph-model "
                              f"{config.graph.model} has none (it would be FedAvg): use "
                              "--graph-model gin-bn")  # fmt: skip

    def shared_index(self, model: Any) -> np.ndarray | None:
        return unshared_index(model, (nn.BatchNorm1d,))

    def protection(self) -> dict[str, str]:
        return {**super().protection(), "batch-norm parameters": "never sent (local)"}

    def model_label(self) -> str:
        return "GIN with local batch norms (FedBN)"


class FedStar(GraphFedAvg):
    """Only the structure channel is federated; the feature channel stays with each client."""

    name = "fedstar"
    kind = "gin_dc"

    def shared_index(self, model: Any) -> np.ndarray | None:
        return shared_structure_index(model)

    def protection(self) -> dict[str, str]:
        return {
            "structure-encoder updates (clients -> server)": "+".join(
                self.federation.stack.names) or "plain",
            "structure encoder (server -> clients)": "plain (every client holds it)",
            "feature channel": "never sent (local to each client)",
        }  # fmt: skip

    def model_label(self) -> str:
        return "GIN_dc (FedStar: shared structure encoder, local feature channel)"
