"""FedAvg's parties: the typed role of a client in FedAvg's rounds (:class:`RoundClient`),
the FedAvg client on its own subgraph and the server, each built where the executor keeps
it (:mod:`securefgl.federation.recipes`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
import torch
from torch_geometric.data import Data

from protocols.base import AggregationClient, AggregationServer, Envelope
from protocols.dp.rng import make_rng
from protocols.wire import Payload
from securefgl.algorithms.base import SplitPredictions
from securefgl.algorithms.common.server_optimizer import GlobalOptimizer
from securefgl.algorithms.common.training import party_torch_rng, predict_splits, train_epochs
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import SERVER, Party, client_party_id
from securefgl.federation.builders import config_from_json, protocol_party, view_from_payload
from securefgl.federation.recipes import party_builder
from securefgl.models import build_model, get_flat, set_flat

MODEL_TAG = "fedavg/model"


class RoundClient(ABC):
    """What FedAvg's round loop calls on a client (the typed role of every client that
    trains a shared model by FedAvg's rounds, whatever its model).

    For protocols that give the aggregate to the clients (CKKS), :meth:`apply_result`
    applies the same server-optimizer step on every client to the decrypted mean, so all
    copies stay identical. Needs ``agg``, ``params``, ``global_opt``, ``weight``, ``coin``
    and :meth:`optimizer_settings`.
    """

    agg: AggregationClient
    params: np.ndarray | None
    global_opt: GlobalOptimizer | None
    weight: float
    coin: np.random.Generator  # this client's own secret randomness for Poisson sampling
    #: the (vector, weight) this client last handed to its protocol: its own data, read only
    #: by the simulator's audit of the aggregate (:meth:`FedAvg.aggregate_error`)
    last_input: tuple[np.ndarray, float] | None = None

    def training_weight(self) -> float:
        """This client's weight in the federated mean (e.g. its labelled nodes)."""
        return self.weight

    def joins_round(self, round_idx: int, probability: float) -> bool:
        """Poisson sampling: this client's own coin decides whether it takes part."""
        return bool(self.coin.random() < probability)

    def optimizer_settings(self) -> tuple[str, float, float]:
        """(kind, lr, weight decay) of the global optimizer."""
        raise NotImplementedError

    #: the tag of the server's broadcast this client takes its model from
    model_tag: ClassVar[str] = MODEL_TAG

    def roles(self) -> Iterable[object | None]:
        return (self, self.agg)

    def receive_model(self, inbox: list[Envelope]) -> None:
        """Take the global model from the server's broadcast."""
        for env in inbox:
            if env.tag == self.model_tag:
                self.params = env.payload.array("params").astype(np.float32)

    @abstractmethod
    def local_update(self, round_idx: int, mu: float) -> float:
        """Train on the client's own data and hand the update to ``agg``; the loss."""

    @abstractmethod
    def predict(self) -> Any:
        """Predictions on the client's own data (the simulator's evaluation oracle)."""

    def submit(self, round_idx: int, vector: np.ndarray, weight: float) -> None:
        """Hand this round's update to the protocol (and keep it as :attr:`last_input`)."""
        self.last_input = (vector, weight)
        self.agg.begin_round(round_idx, vector, weight)

    def apply_result(self, round_idx: int) -> None:
        result = self.agg.result()
        if result is not None and self.params is not None:
            self.apply_mean(result.mean, round_idx)

    def apply_mean(self, mean: np.ndarray, round_idx: int) -> None:
        """One step of the global optimizer (the server's, replicated here) on ``mean``."""
        if self.params is None:
            raise RuntimeError("no global model to update")
        if self.global_opt is None:
            self.global_opt = GlobalOptimizer(self.params, *self.optimizer_settings())
        self.params = self.global_opt.step(mean)


class FedAvgClient(RoundClient, Party):
    """A client party: its own subgraph, its model and its side of the protocol."""

    def __init__(
        self,
        view: ClientGraph,
        config: ExperimentConfig,
        agg: AggregationClient,
        num_classes: int,
        noise_seed: int | None = None,
        seed: int = 0,
    ) -> None:
        self.party_id = client_party_id(view.client_id)
        self.coin = make_rng(noise_seed, "client-sampling", self.party_id)
        self.seed = seed  # the experiment's: this client's dropout stream (not privacy noise)
        self.data: Data = view.to_data()
        with party_torch_rng(seed, self.party_id, "init"):  # replaced by the server's model
            self.model = build_model(
                config.model, view.num_features, config.hidden, num_classes, config.layers,
                config.dropout,
            )  # fmt: skip
        self.config = config
        self.agg = agg
        self.params: np.ndarray | None = None  # the global model as this client knows it
        self.weight = float(self.data.train_mask.sum())
        self.global_opt: GlobalOptimizer | None = None  # when clients hold the aggregate

    def local_update(self, round_idx: int, mu: float) -> float:
        if self.params is None:
            raise RuntimeError(f"{self.party_id}: no global model received")
        set_flat(self.model, self.params)
        center = [p.detach().clone() for p in self.model.parameters()] if mu > 0 else None
        opt = torch.optim.SGD(self.model.parameters(), lr=self.config.client_lr)
        with party_torch_rng(self.seed, self.party_id, round_idx):
            loss = train_epochs(self.model, self.data, opt, self.config.local_epochs, center, mu)
        delta = get_flat(self.model).astype(np.float64) - self.params
        self.submit(round_idx, delta, max(self.weight, 1e-12))
        return loss

    def optimizer_settings(self) -> tuple[str, float, float]:
        cfg = self.config
        return cfg.server_optimizer, cfg.lr, cfg.weight_decay

    def predict(self) -> SplitPredictions:
        if self.params is None:
            raise RuntimeError(f"{self.party_id}: no model to evaluate yet")
        set_flat(self.model, self.params)
        return predict_splits(self.model, self.data)


@party_builder
def fedavg_client(
    view: Payload, stack: dict[str, Any], noise_seed: int | None, seed: int
) -> FedAvgClient:
    """A FedAvg client, built where it lives from its own view and the stack's settings."""
    config, v = config_from_json(stack["config"]), view_from_payload(view)
    agg = protocol_party(stack, client_party_id(v.client_id))
    return FedAvgClient(v, config, agg, v.num_classes, noise_seed, seed)


class FedAvgServer(Party):
    """Holds the global model when the protocol lets it see the aggregate."""

    model_tag: ClassVar[str] = MODEL_TAG

    def __init__(
        self,
        params: np.ndarray,
        agg: AggregationServer,
        holds_model: bool,
        optimizer: GlobalOptimizer,
    ) -> None:
        self.party_id = SERVER
        self.params: np.ndarray | None = params
        self.agg = agg
        self.holds_model = holds_model
        self.optimizer = optimizer

    def roles(self) -> Iterable[object | None]:
        return (self, self.agg)

    def broadcast(self, round_idx: int, receivers: list[str]) -> list[Envelope]:
        if self.params is None:
            return []
        payload = Payload({"params": self.params}, {"round": round_idx})
        if not self.holds_model:
            self.params = None  # sent once (random init); from now on clients hold the model
        return [Envelope(self.party_id, r, self.model_tag, payload) for r in receivers]

    def begin_aggregation(self, round_idx: int, participants: list[str]) -> None:
        self.agg.begin_round(round_idx, participants)

    def apply_result(self, round_idx: int) -> None:
        result = self.agg.result()
        if result is not None and self.params is not None:
            self.params = self.optimizer.step(result.mean)

    def empty_round_mean(self, dim: int) -> np.ndarray | None:
        """Nobody took part: what a mechanism with central noise still releases (or None)."""
        release = getattr(self.agg, "empty_round_result", None)
        result = release(dim) if release is not None else None
        return None if result is None else result.mean

    def apply_empty_round(self, round_idx: int, dim: int) -> None:
        """Nobody took part: a mechanism with central noise still releases a noisy step."""
        mean = self.empty_round_mean(dim)
        if mean is not None and self.params is not None:
            self.params = self.optimizer.step(mean)


@party_builder
def fedavg_server(params: np.ndarray, stack: dict[str, Any], holds_model: bool) -> FedAvgServer:
    """The FedAvg server with the initial model ``params`` (``holds_model``: the protocol
    delivers the aggregate to it)."""
    cfg = config_from_json(stack["config"])
    opt = GlobalOptimizer(params, cfg.server_optimizer, cfg.lr, cfg.weight_decay)
    return FedAvgServer(params, protocol_party(stack, SERVER), holds_model, opt)
