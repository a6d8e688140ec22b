"""FedGCN's parties (Yao et al., NeurIPS 2023): a client that runs its neighbour sums and
then trains as a FedAvg client on its propagated features, in its own process; the server
that relays (or adds) the sums and then plays FedAvg's server. Built from recipes, so the
propagated features never leave the client that computed them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from protocols.wire import Payload
from securefgl.algorithms.common.server_optimizer import GlobalOptimizer
from securefgl.algorithms.fedavg.parties import FedAvgClient, FedAvgServer
from securefgl.algorithms.fedgcn.neighbour_sums import NeighbourSumClient
from securefgl.algorithms.fedgcn.settings import FedGCNSettings
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import SERVER, Party, client_party_id
from securefgl.federation.builders import config_from_json, protocol_party, view_from_payload
from securefgl.federation.hosted_sums import HostedSum
from securefgl.federation.recipes import party_builder


def model_inputs(view: ClientGraph, settings: FedGCNSettings) -> int:
    """The MLP's input width: ``ÂᴸX``, ``[ÂX ‖ … ‖ ÂᴸX]`` or ``[X ‖ ÂX ‖ … ‖ ÂᴸX]``."""
    hops = {"last": 1, "hops": settings.hops, "all": settings.hops + 1}[settings.features]
    return view.num_features * hops


class FedGCNClient(Party):
    """Client ``i``: the neighbour-sum role, then, after :meth:`start_training`, a FedAvg
    client on the augmented view."""

    def __init__(
        self, view: ClientGraph, settings: FedGCNSettings, config: ExperimentConfig,
        stack: dict[str, Any], noise_seed: int | None, seed: int,
    ) -> None:  # fmt: skip
        self.party_id = client_party_id(view.client_id)
        self.sums: NeighbourSumClient | None = NeighbourSumClient(view, settings)
        self.training: FedAvgClient | None = None
        self._start = (config, stack, noise_seed, seed)

    def roles(self) -> Iterable[object | None]:
        sums = self.sums.roles() if self.sums is not None else ()
        training = self.training.roles() if self.training is not None else ()
        return (self, *sums, *training)

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
    """FedAvg's server that also relays (or adds) the neighbour sums."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.sums = HostedSum(SERVER)

    def roles(self) -> Iterable[object | None]:
        return (*super().roles(), *self.sums.roles())


@party_builder
def fedgcn_server(params: np.ndarray, stack: dict[str, Any], holds_model: bool) -> FedGCNServer:
    """FedAvg's server with the initial model ``params``, plus the relay."""
    cfg = config_from_json(stack["config"])
    opt = GlobalOptimizer(params, cfg.server_optimizer, cfg.lr, cfg.weight_decay)
    return FedGCNServer(params, protocol_party(stack, SERVER), holds_model, opt)
