"""FedGCN's parties (Yao et al., NeurIPS 2023): a client that runs its neighbour sums and
then trains as a FedAvg client on its propagated features, in its own process; the server
that relays (or adds) the sums and then plays FedAvg's server. Built from recipes, so the
propagated features never leave the client that computed them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from protocols.wire import Payload
from securefgl.algorithms.common.server_optimizer import GlobalOptimizer
from securefgl.algorithms.fedavg.algorithm import FedAvgClient, FedAvgServer
from securefgl.algorithms.fedgcn.neighbour_sums import FEDGCN, NeighbourSumClient, NeighbourSumRelay
from securefgl.algorithms.fedgcn.settings import FedGCNSettings
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import AGG, SERVER, SUMS, TRAIN, Party, client_party_id
from securefgl.federation.builders import config_from_json, protocol_party, view_from_payload
from securefgl.federation.recipes import party_builder

START = "start"  # the client itself: turns from pre-training to training


def model_inputs(view: ClientGraph, settings: FedGCNSettings) -> int:
    """The MLP's input width: ``ÂᴸX``, ``[ÂX ‖ … ‖ ÂᴸX]`` or ``[X ‖ ÂX ‖ … ‖ ÂᴸX]``."""
    hops = {"last": 1, "hops": settings.hops, "all": settings.hops + 1}[settings.features]
    return view.num_features * hops


class FedGCNClient(Party):
    """Client ``i``: the neighbour-sum party (``fedgcn``, ``sums``), then, after
    :meth:`start_training` (``start``), a FedAvg client (``train``, ``agg``) on the
    augmented view."""

    SUBPARTIES: ClassVar[Mapping[str, str]] = {
        FEDGCN: "sums", SUMS: "sums.sum_party", START: "", TRAIN: "training",
        AGG: "training.agg",
    }  # fmt: skip

    def __init__(
        self, view: ClientGraph, settings: FedGCNSettings, config: ExperimentConfig,
        stack: dict[str, Any], noise_seed: int | None, seed: int,
    ) -> None:  # fmt: skip
        self.party_id = client_party_id(view.client_id)
        self.sums: NeighbourSumClient | None = NeighbourSumClient(view, settings)
        self.training: FedAvgClient | None = None
        self._start = (config, stack, noise_seed, seed)

    def start_training(self) -> None:
        """The FedAvg client on this client's propagated features (the sums are done)."""
        if self.sums is None:
            raise RuntimeError(f"{self.party_id}: training already started")
        view = self.sums.augmented_view()
        config, stack, noise_seed, seed = self._start
        agg = protocol_party(stack, self.party_id)
        self.training = FedAvgClient(view, config, agg, view.num_classes, noise_seed, seed)
        self.sums = None  # the per-hop state is no longer needed


@party_builder
def fedgcn_client(
    view: Payload, stack: dict[str, Any], settings: dict[str, Any], noise_seed: int | None,
    seed: int,
) -> FedGCNClient:
    """A FedGCN client from its own view (a wire payload) and the settings."""
    config = config_from_json(stack["config"])
    return FedGCNClient(
        view_from_payload(view), FedGCNSettings(**settings), config, stack, noise_seed, seed
    )


class FedGCNServer(FedAvgServer):
    """FedAvg's server with the neighbour sums' relay as a sub-party."""

    SUBPARTIES: ClassVar[Mapping[str, str]] = {
        **FedAvgServer.SUBPARTIES, FEDGCN: "relay", SUMS: "relay.sum_party",
    }  # fmt: skip

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.relay = NeighbourSumRelay(SERVER)


@party_builder
def fedgcn_server(params: np.ndarray, stack: dict[str, Any], holds_model: bool) -> FedGCNServer:
    """FedAvg's server with the initial model ``params``, plus the relay."""
    cfg = config_from_json(stack["config"])
    opt = GlobalOptimizer(params, cfg.server_optimizer, cfg.lr, cfg.weight_decay)
    return FedGCNServer(params, protocol_party(stack, SERVER), holds_model, opt)
