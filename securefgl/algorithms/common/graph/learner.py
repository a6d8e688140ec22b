"""What every graph-classification client holds, and the server's initial broadcast.

A :class:`GraphLearner` holds one client's graphs (its training, test and, if any,
validation graphs), its model and its optimizer (Adam, created once so its state persists
across rounds, GPFL's code ``setupGC.setup_devices``; or plain SGD, FedVN's code). Every
method starts from the same initial model, sent by the server in round −1
(:class:`InitServer`), as in GPFL's code (``download_from_server``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from protocols.base import Envelope
from protocols.wire import Payload
from securefgl.algorithms.base import Algorithm
from securefgl.algorithms.common.graph.batching import GraphBatches
from securefgl.algorithms.common.graph.bn_gin import BNGIN
from securefgl.algorithms.common.graph.models import GIN, GINDC, structure_encoding
from securefgl.algorithms.common.graph.settings import GraphTaskSettings
from securefgl.algorithms.common.graph.training import SplitPredictions, predict, train_epochs
from securefgl.algorithms.common.training import party_torch_rng, unlinked
from securefgl.config import ExperimentConfig
from securefgl.data.graph_views import GraphClientView
from securefgl.federation import SERVER, Call, Channel, Executor, Party, Target, client_party_id
from securefgl.federation.recipes import party_builder
from securefgl.models import get_flat, set_flat

INIT_TAG = "graph/initial-model"
INITIAL_MODEL = "initial model (server -> clients)"


def build_model(
    kind: str, num_features: int, num_classes: int, config: ExperimentConfig
) -> nn.Module:
    """``gin`` (GPFL's GIN, or FedVN's GIN-BN when ``model = "gin-bn"``) or FedStar's
    ``gin_dc`` with the ``[experiment.graph]`` sizes."""
    s = config.section(GraphTaskSettings)
    if kind == "gin" and s.model == "gin-bn":
        return BNGIN(num_features, s.hidden, num_classes, s.layers, s.dropout)
    if kind == "gin":
        return GIN(num_features, s.hidden, num_classes, s.layers, s.dropout)
    if kind == "gin_dc":
        n_se = s.fedstar_rw + s.fedstar_dg
        return GINDC(num_features, n_se, s.hidden, num_classes, s.layers, s.dropout)
    raise ValueError(f"unknown graph model {kind!r}")


def encodings(view: GraphClientView, mask: torch.Tensor, config: ExperimentConfig) -> np.ndarray:
    """FedStar's structure encodings of the client's graphs in ``mask`` (computed locally)."""
    data, s = view.dataset(mask), config.section(GraphTaskSettings)
    parts = [structure_encoding(data.graph(g)[1], int(data.num_nodes[g]), s.fedstar_rw,
                                s.fedstar_dg) for g in range(data.num_graphs)]  # fmt: skip
    return np.concatenate(parts) if parts else np.zeros((0, s.fedstar_rw + s.fedstar_dg))


class GraphLearner:
    """One client's graphs, model and optimizer (a mix-in of the client parties)."""

    party_id: str
    model: nn.Module

    def init_learner(
        self, view: GraphClientView, config: ExperimentConfig, kind: str, seed: int
    ) -> None:
        self.party_id = client_party_id(view.client_id)
        self.config = config
        self.settings = config.section(GraphTaskSettings)
        enc = kind == "gin_dc"
        self.train_set = GraphBatches(
            view.dataset(view.train_mask),
            encodings(view, view.train_mask, config) if enc else None,
        )
        self.test_set = GraphBatches(
            view.dataset(view.test_mask),
            encodings(view, view.test_mask, config) if enc else None,
        )
        self.val_set: GraphBatches | None = None
        assert view.val_mask is not None
        if bool(view.val_mask.any()):
            self.val_set = GraphBatches(
                view.dataset(view.val_mask),
                encodings(view, view.val_mask, config) if enc else None,
            )
        self.seed = seed  # the experiment's: this client's initialisation and dropout streams
        with party_torch_rng(seed, self.party_id, "init"):  # replaced by the initial model
            self.model = build_model(kind, view.num_features, view.num_classes, config)
        self.opt = make_optimizer(self.model.parameters(), self.settings)
        self.shuffle = np.random.default_rng([seed, view.client_id])  # simulation, not privacy
        self.weight = float(view.num_train)

    def training_weight(self) -> float:
        return self.weight

    @property
    def flat(self) -> np.ndarray:
        return get_flat(self.model)

    def load_flat(self, vector: np.ndarray) -> None:
        set_flat(self.model, np.asarray(vector, dtype=np.float32))

    def train_local(self, round_idx: int, center: bool = False, mu: float = 0.0) -> float:
        """``local_epochs`` epochs; with ``center``, FedProx's term towards the start."""
        ref = [p.detach().clone() for p in self.model.parameters()] if center else None
        with party_torch_rng(self.seed, self.party_id, round_idx):  # this client's dropout
            return train_epochs(
                self.model, self.opt, self.train_set, self.settings.batch_size, self.shuffle,
                self.config.local_epochs, ref, mu,
            )  # fmt: skip

    def receive_initial(self, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag == INIT_TAG:
                self.load_flat(env.payload.array("params"))

    def predict(self) -> SplitPredictions:
        """Test (and validation) predictions of the current model."""
        return predictions(self.model, self.test_set, self.val_set, self.settings.eval_batch_size)


def make_optimizer(params: Any, s: GraphTaskSettings) -> torch.optim.Optimizer:
    """The ``[experiment.graph]`` optimizer over ``params`` (Adam or plain SGD)."""
    if s.optimizer == "sgd":
        return torch.optim.SGD(params, lr=s.lr, weight_decay=s.weight_decay)
    return torch.optim.Adam(params, lr=s.lr, weight_decay=s.weight_decay)


def predictions(
    model: nn.Module, test: GraphBatches, val: GraphBatches | None, eval_batch: int | None
) -> SplitPredictions:
    """``{"test": ..., "val": ...}`` (no ``val`` without validation graphs)."""
    out = {"test": unlinked(*predict(model, test, eval_batch))}
    if val is not None:
        out["val"] = unlinked(*predict(model, val, eval_batch))
    return out


class InitServer(Party):
    """The server's side of the set-up: the initial model, sent once to every client."""

    def __init__(self, params: np.ndarray) -> None:
        self.party_id = SERVER
        self.initial = params

    def broadcast_initial(self, receivers: list[str]) -> list[Envelope]:
        payload = Payload({"params": self.initial}, {"round": -1})
        return [Envelope(self.party_id, r, INIT_TAG, payload) for r in receivers]


@party_builder
def init_server(params: np.ndarray) -> InitServer:
    return InitServer(params)


def deliver(
    executor: Executor, channel: Channel, sent: list[Envelope],
    method: Callable[..., Any], *args: Any,
) -> None:  # fmt: skip
    """Send ``sent`` through the channel and hand every receiver its inbox:
    ``method(*args, inbox)`` (``method`` given as ``Class.method``) on each receiver."""
    inbox: dict[str, list[Envelope]] = {}
    for env in channel.transmit(sent):
        inbox.setdefault(env.receiver, []).append(env)
    target = Target.of(method)
    executor.call([Call(r, target, (*args, box)) for r, box in inbox.items()])


def send_initial(
    executor: Executor, channel: Channel, clients: list[str]
) -> None:
    """Round −1: the server's initial model to every client (``receive_initial``)."""
    channel.round = -1
    sent = executor.call([Call.to(SERVER, InitServer.broadcast_initial, clients)])[0]
    deliver(executor, channel, sent, GraphLearner.receive_initial)


class GraphAlgorithm(Algorithm):
    """A graph-classification algorithm (``task = "graph"``)."""

    task: ClassVar[str] = "graph"

    def model_label(self) -> str:
        return "GIN"
