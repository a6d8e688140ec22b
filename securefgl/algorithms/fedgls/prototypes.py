"""FedProto (Tan et al., AAAI 2022) as FedGLS's baseline (Fu et al., TMLR, Sec. 5.1.2): GCNs
on graph clients, MLPs on graphless ones, only class prototypes exchanged.

Each round every client trains its own model for E epochs on cross-entropy plus
``λ · MSE(z_i, P̄_{y_i})`` over its training nodes whose class has a global prototype
(FedProto's regulariser; λ = ``prototype_weight``, not given by FedGLS: 1, FedProto's code
default), then uploads, through the configured protocol stack, ``[Σ_{i: y_i = c} z_i for
every class c ‖ count_c]`` with weight 1: the mean of that vector gives the global prototype
``P̄_c = Σ sums / Σ counts`` (FedProto's count-weighted average) without any per-client
count leaving the protected sum. The holder of the aggregate broadcasts (or, under CKKS,
already holds) the prototypes. ``z`` is the encoder's output (split A: the hidden width;
split C: the logits), computed in eval mode on the training nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F
from torch_geometric.data import Data

from protocols.base import AggregationClient, AggregationServer, Role
from protocols.wire import Payload
from securefgl.algorithms.common.server_optimizer import GlobalOptimizer
from securefgl.algorithms.fedavg.algorithm import MODEL_BROADCAST, MODEL_UPDATES, FedAvg
from securefgl.algorithms.fedavg.parties import FedAvgServer, RoundClient
from securefgl.algorithms.fedgls.graphless import graphless_ids, view_payload_of
from securefgl.algorithms.fedgls.local import OwnModelClient, client_setup
from securefgl.algorithms.fedgls.settings import UNREAD_BY_FEDGLS
from securefgl.data import ClientGraph
from securefgl.federation import SERVER, client_party_id
from securefgl.federation.builders import (
    config_from_json,
    protocol_party,
    view_from_payload,
)
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import Recipe, party_builder, recipe

PROTO_TAG = "fedproto/prototypes"
PROTOTYPES_UP = "prototype sums and counts (clients -> server)"
PROTOTYPES_DOWN = "global prototypes (server -> clients)"


def decode_prototypes(mean: np.ndarray, classes: int, dim: int) -> np.ndarray:
    """``[P̄ (classes × dim) ‖ present (classes)]`` from the mean of the uploads."""
    sums = mean[: classes * dim].reshape(classes, dim)
    counts = mean[classes * dim :]
    present = counts > 1e-9
    protos = np.zeros_like(sums)
    protos[present] = sums[present] / counts[present, None]
    return np.concatenate([protos.reshape(-1), present.astype(np.float64)])


class FedProtoClient(OwnModelClient, RoundClient):
    """A FedProto client: its own model, and its class prototypes as its round's update."""

    model_tag = PROTO_TAG  # the global prototypes, in place of a model

    def __init__(self, *args: Any, agg: AggregationClient, proto_dim: int) -> None:
        super().__init__(*args)
        self.agg, self.proto_dim = agg, proto_dim
        self.classes = self.view.num_classes
        self.params: np.ndarray | None = None  # the global prototypes as this client knows them

    def roles(self) -> Iterable[object | None]:
        return (self, self.agg)

    def joins_round(self, round_idx: int, probability: float) -> bool:
        return probability >= 1.0  # FedProto runs with every client (client_fraction = 1)

    def global_prototypes(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        if self.params is None:
            return None
        c, m = self.classes, self.proto_dim
        protos = torch.as_tensor(self.params[: c * m], dtype=torch.float32).view(c, m)
        return protos, torch.as_tensor(self.params[c * m :] > 0.5)

    def epoch_loss(self) -> torch.Tensor:
        x, y, mask = self.view.x, self.view.y, self.view.train_mask
        z = self.net.encode(x, self.prop)
        loss = F.cross_entropy(self.net.classify(z)[mask], y[mask])
        known = self.global_prototypes()
        if known is not None:
            protos, present = known
            keep = mask & present[y]
            if bool(keep.any()):
                reg = F.mse_loss(z[keep], protos[y[keep]])
                loss = loss + self.config.fedgls.prototype_weight * reg
        return loss

    def local_update(self, round_idx: int, mu: float = 0.0) -> float:
        loss = super().local_update(round_idx, mu)
        self.net.eval()
        mask = self.view.train_mask
        with torch.no_grad():
            z = self.net.encode(self.view.x, self.prop)[mask].double()
        y = self.view.y[mask]
        sums = torch.zeros(self.classes, self.proto_dim, dtype=torch.float64).index_add_(0, y, z)
        counts = torch.bincount(y, minlength=self.classes).double()
        vector = torch.cat([sums.reshape(-1), counts]).numpy()
        self.submit(round_idx, vector, 1.0)
        return loss

    def apply_result(self, round_idx: int) -> None:
        result = self.agg.result()  # CKKS: the clients hold the aggregate
        if result is not None:
            self.params = decode_prototypes(result.mean, self.classes, self.proto_dim).astype(
                np.float32
            )


class PrototypeServer(FedAvgServer):
    """Holds and broadcasts the global prototypes (when it sees the aggregate)."""

    model_tag = PROTO_TAG

    def __init__(self, agg: AggregationServer, holds: bool, classes: int, dim: int) -> None:
        zeros = np.zeros(classes * (dim + 1), dtype=np.float32)
        super().__init__(zeros, agg, holds, GlobalOptimizer(zeros, "sgd", 1.0, 0.0))
        self.classes, self.proto_dim = classes, dim

    def apply_result(self, round_idx: int) -> None:
        result = self.agg.result()
        if result is not None and self.params is not None:
            decoded = decode_prototypes(result.mean, self.classes, self.proto_dim)
            self.params = decoded.astype(np.float32)

    def apply_empty_round(self, round_idx: int, dim: int) -> None:
        return None


@party_builder
def fedproto_client(
    view: Payload, stack: dict[str, Any], graphless: bool, proto_dim: int, seed: int
) -> FedProtoClient:
    cfg = config_from_json(stack["config"])
    v = view_from_payload(view)
    net, prop = client_setup(v, cfg, graphless, False, seed)
    agg = protocol_party(stack, client_party_id(v.client_id))
    return FedProtoClient(v, cfg, net, prop, seed, agg=agg, proto_dim=proto_dim)


@party_builder
def prototype_server(stack: dict[str, Any], holds: bool, classes: int, dim: int) -> PrototypeServer:
    return PrototypeServer(protocol_party(stack, SERVER), holds, classes, dim)


class FedProto(FedAvg):
    name = "fedproto"
    all_clients = True
    instead_of = UNREAD_BY_FEDGLS

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        self.federation = federation
        self.rng = np.random.default_rng(federation.seed)
        views = federation.views
        self.graphless = graphless_ids([v.client_id for v in views], cfg.fedgls, federation.seed)
        protocol = federation.stack.protocol
        classes = views[0].num_classes
        proto_dim = cfg.hidden if cfg.fedgls.split == "A" else classes
        self.dim = classes * (proto_dim + 1)
        ids = [client_party_id(v.client_id) for v in views]
        holds = protocol.output_role is Role.SERVER
        seed = federation.seed

        def client(v: ClientGraph, stack: dict[str, Any]) -> Recipe:
            graphless = v.client_id in self.graphless
            return recipe(
                fedproto_client, view=view_payload_of(v, graphless),
                stack=stack, graphless=graphless, proto_dim=proto_dim, seed=seed,
            )  # fmt: skip

        self._make_parties(
            federation,
            ids,
            lambda stack: recipe(prototype_server, stack=stack, holds=holds, classes=classes,
                                 dim=proto_dim),  # fmt: skip
            client,
        )
        self._setup_and_start(federation, protocol, ids)

    def protection(self) -> dict[str, str]:
        stack = "+".join(self.federation.stack.names) or "plain"
        return {
            PROTOTYPES_UP: stack,
            PROTOTYPES_DOWN: "plain (every client holds them)",
            MODEL_UPDATES: "none (models stay local)",
            MODEL_BROADCAST: "none",
        }

    def model_label(self) -> str:
        return "own GCN per graph client, own MLP per graphless client (prototypes shared)"

    def model_short(self) -> str:
        return "own GCN/MLP"
