"""FedGCN (Yao et al., NeurIPS 2023): secure neighbour sums, then FedAvg on the result.

:class:`FedGCN` runs :func:`~securefgl.algorithms.fedgcn.neighbour_sums.run_neighbour_sums` once
(setup bytes), then :class:`~securefgl.algorithms.fedavg.algorithm.FedAvg` rounds, unchanged,
through the configured protocol stack, on client views whose features are the propagated ones,
fed to an MLP. **Deviation**: FedGCN's second GCN layer needs every external neighbour's
``H¹_u`` individually; a secure sum only delivers ``Σ_u``, so the non-linearity moves after the
propagation (SGC, Wu et al. 2019, with an MLP head; ``features="hops"``/``"all"``: SIGN, Rossi
et al. 2020). No external node ever becomes a node of a client's graph."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, ClassVar

import numpy as np
from torch_geometric.data import Data

from securefgl.algorithms.fedavg.algorithm import FedAvg
from securefgl.algorithms.fedgcn.neighbour_sums import PrecomputeReport, run_neighbour_sums
from securefgl.algorithms.fedgcn.parties import (
    FedGCNClient,
    fedgcn_client,
    fedgcn_server,
    model_inputs,
)
from securefgl.algorithms.fedgcn.settings import FedGCNSettings
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation.builders import view_payload
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import Recipe, recipe
from securefgl.federation.transcript import STRUCTURE

log = logging.getLogger(__name__)

NEIGHBOUR_SUMS = "neighbour sums (pre-training)"


class FedGCN(FedAvg):
    """FedGCN-2hop: secure neighbour sums, then FedAvg/FedSGD of an MLP on the propagated
    features. ``settings`` default to the configuration's ``fedgcn`` section."""

    name = "fedgcn"
    needs_cross_edges = True
    hops: ClassVar[int | None] = None  # None: the section's hops
    mu_used = False
    instead_of = {"model": "its model is an MLP on the propagated features (SGC-style)"}

    def __init__(self, config: ExperimentConfig, settings: FedGCNSettings | None = None) -> None:
        super().__init__(dataclasses.replace(config, model="mlp"))
        settings = settings or config.fedgcn
        if settings.sum_mode is None:  # as protected as the training rounds' transport
            settings = settings.replace(sum_mode=config.protocol.secure_sum_mode())
        self.settings = settings if self.hops is None else settings.replace(hops=self.hops)
        self.report: PrecomputeReport | None = None

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        if any(v.cross_edges != "known" for v in federation.views):
            raise ConfigError("fedgcn needs cross_edges = 'known' (clients know their edges)")
        super().setup(federation, global_data)

    def model_inputs(self, view: ClientGraph) -> int:
        return model_inputs(view, self.settings)

    def server_recipe(self, params: np.ndarray, stack: dict[str, Any], holds: bool) -> Recipe:
        return recipe(fedgcn_server, params=params, stack=stack, holds_model=holds)

    def client_recipe(self, view: ClientGraph, stack: dict[str, Any]) -> Recipe:
        fed = self.federation
        return recipe(
            fedgcn_client, view=view_payload(view), stack=stack,
            settings=dataclasses.asdict(self.settings), noise_seed=fed.noise_seed, seed=fed.seed,
        )  # fmt: skip

    def before_training(self, ids: list[str]) -> None:
        """The neighbour sums (pre-training, counted as set-up), then every client turns
        its propagated features into its training view."""
        fed = self.federation
        with fed.channel.transcript.family_scope(STRUCTURE):
            self.report = run_neighbour_sums(
                ids, self.executor, fed.channel, self.settings,
                f"securefgl/fedgcn|seed={fed.seed}", sum_options=fed.stack.sum_options(),
            )  # fmt: skip
        log.info(
            "fedgcn pre-training (%s, %d hops): %.1f s, %.1f MB",
            self.report.sum_mode, self.report.hops, self.report.seconds, self.report.bytes / 1e6,
        )  # fmt: skip
        self.executor.map(ids, FedGCNClient.start_training)

    def protection(self) -> dict[str, str]:
        mode, shared = str(self.settings.sum_mode), self.settings.sum_keys == "shared"
        return {**super().protection(),
                NEIGHBOUR_SUMS: f"{mode} (one key of the clients)" if shared else mode}  # fmt: skip

    def model_label(self) -> str:
        kind = {"last": "ÂᴸX", "hops": "[ÂX ‖ … ‖ ÂᴸX]", "all": "[X ‖ ÂX ‖ … ‖ ÂᴸX]"}
        return f"MLP on {kind[self.settings.features]} (L = {self.settings.hops})"


class FedGCN1Hop(FedGCN):
    """FedGCN-1hop: one secure-sum round, MLP on ``ÂX``."""

    name = "fedgcn-1hop"
    hops = 1
