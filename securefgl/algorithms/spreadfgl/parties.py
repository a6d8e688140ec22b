"""Builders of SpreadFGL's parties (Zhong et al.; FedGL): a patching client from its own
view, an imputing edge server from its clients' ids, its neighbour servers and the
settings, each built where the executor keeps it (:mod:`securefgl.federation.recipes`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from protocols.dp.rng import make_rng
from protocols.wire import Payload
from securefgl.algorithms.common.edge.client import LocalTraining
from securefgl.algorithms.spreadfgl.client import PatchingClient
from securefgl.algorithms.spreadfgl.h_release import HRelease
from securefgl.algorithms.spreadfgl.imputation import Imputer
from securefgl.algorithms.spreadfgl.server import ImputingServer
from securefgl.algorithms.spreadfgl.settings import SpreadFGLSettings
from securefgl.federation import client_party_id
from securefgl.federation.builders import config_from_json, protocol_party, view_from_payload
from securefgl.federation.recipes import party_builder


@party_builder
def patching_client(
    view: Payload, stack: dict[str, Any], training: dict[str, Any], noise_seed: int | None,
    seed: int,
) -> PatchingClient:  # fmt: skip
    """A client of the edge server ``stack["server"]`` that uploads H, through its own
    :class:`HRelease`, and patches its graph."""
    config, v = config_from_json(stack["config"]), view_from_payload(view)
    pid, st = client_party_id(v.client_id), config.section(SpreadFGLSettings)
    release = HRelease(st, v.num_nodes, pid, noise_seed, config.protocol.dp_accountant,
                       config.protocol.dp_delta)  # fmt: skip
    return PatchingClient(
        v, LocalTraining(**training), protocol_party(stack, pid), stack["server"], release,
        st.refresh, st.generated_scale, seed,
    )  # fmt: skip


@party_builder
def imputing_server(
    params: np.ndarray, stack: dict[str, Any], neighbours: dict[str, int], num_classes: int,
    num_features: int, seed: int, holds_model: bool,
) -> ImputingServer:  # fmt: skip
    """Edge server ``stack["server"]`` over ``stack["clients"]`` with its imputer;
    ``neighbours``: neighbour server id → its number of clients (the public topology)."""
    config, sid = config_from_json(stack["config"]), stack["server"]
    st = config.section(SpreadFGLSettings)
    imputer = Imputer(
        num_classes, num_features, st, seed=int(make_rng(seed, "imputer", sid).integers(2**62))
    )
    return ImputingServer(
        sid, params, protocol_party(stack, sid), stack["clients"], neighbours, holds_model,
        imputer=imputer, settings=st,
    )  # fmt: skip
