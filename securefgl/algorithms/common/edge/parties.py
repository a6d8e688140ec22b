"""Builders of the edge runtime's parties: a client from its own view, an edge server from
its clients' ids, its neighbour servers and the initial model, each built where the
executor keeps it (:mod:`securefgl.federation.recipes`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from protocols.wire import Payload
from securefgl.algorithms.common.edge.client import EdgeClient, LocalTraining
from securefgl.algorithms.common.edge.server import EdgeServer
from securefgl.federation import client_party_id
from securefgl.federation.builders import protocol_party, view_from_payload
from securefgl.federation.recipes import party_builder


@party_builder
def edge_client(view: Payload, stack: dict[str, Any], training: dict[str, Any],
                seed: int) -> EdgeClient:  # fmt: skip
    """A client of the edge server ``stack["server"]``."""
    v = view_from_payload(view)
    pid = client_party_id(v.client_id)
    return EdgeClient(v, LocalTraining(**training), protocol_party(stack, pid), stack["server"],
                      seed)  # fmt: skip


@party_builder
def local_client(view: Payload, training: dict[str, Any], seed: int) -> EdgeClient:
    """A client with its classifier alone, no server (LocalFGL)."""
    return EdgeClient(view_from_payload(view), LocalTraining(**training), None, None, seed=seed)


@party_builder
def edge_server(params: np.ndarray, stack: dict[str, Any], neighbours: dict[str, int],
                holds_model: bool) -> EdgeServer:  # fmt: skip
    """Edge server ``stack["server"]`` over ``stack["clients"]``; ``neighbours``: neighbour
    server id → its number of clients (the public topology)."""
    sid = stack["server"]
    return EdgeServer(sid, params, protocol_party(stack, sid), stack["clients"], neighbours,
                      holds_model)  # fmt: skip
