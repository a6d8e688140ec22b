"""Recipe arguments shared by the algorithms' party builders: a client's own view and the
experiment's settings as wire values, and a party's side of the aggregation protocol
found (in the driver's process) or rebuilt (elsewhere) from the stack's settings; the
builder of a party that only plays a protocol role."""

from __future__ import annotations

import json
from typing import Any

import torch

from protocols.base import ProtocolParty
from protocols.identity import HONEST_BUT_CURIOUS, KeyRegistry, Pki
from protocols.wire import Payload
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.data.graph_views import GraphClientView
from securefgl.federation.party import PartyError, ProtocolHost
from securefgl.federation.recipes import party_builder
from securefgl.federation.stack import ProtocolStack, build_stack, live_stack

_VIEW_TENSORS = (
    "x", "y", "train_mask", "val_mask", "test_mask", "edge_index", "node_ids",
    "external_edges", "external_owner",
)  # fmt: skip


def config_json(config: ExperimentConfig) -> str:
    return json.dumps(config.to_dict(), sort_keys=True)


def config_from_json(text: str) -> ExperimentConfig:
    return ExperimentConfig.from_dict(json.loads(text))


def view_payload(view: ClientGraph) -> Payload:
    """A client's view as a wire payload (its tensors as arrays, the rest as metadata)."""
    fields = {name: getattr(view, name).numpy() for name in _VIEW_TENSORS}
    meta = {
        "client_id": view.client_id, "cross_edges": view.cross_edges,
        "num_classes": view.num_classes, "num_global_nodes": view.num_global_nodes,
    }  # fmt: skip
    return Payload(fields, meta)


def view_from_payload(payload: Payload) -> ClientGraph:
    tensors = {name: torch.from_numpy(payload.array(name)) for name in _VIEW_TENSORS}
    return ClientGraph(**payload.meta, **tensors)


_GRAPH_TENSORS = ("x", "edge_index", "node_ptr", "edge_ptr", "y", "train_mask", "test_mask",
                  "val_mask")


def graph_view_payload(view: GraphClientView) -> Payload:
    """A graph-classification client's graphs as a wire payload."""
    fields = {name: getattr(view, name).numpy() for name in _GRAPH_TENSORS}
    meta = {"client_id": view.client_id, "num_classes": view.num_classes, "name": view.name}
    return Payload(fields, meta)


def graph_view_from_payload(payload: Payload) -> GraphClientView:
    tensors = {name: torch.from_numpy(payload.array(name)) for name in _GRAPH_TENSORS}
    return GraphClientView(**payload.meta, **tensors)


def stack_args(stack: ProtocolStack, noise_seed: int | None, config: ExperimentConfig,
               server_id: str, client_ids: list[str], dim: int) -> dict[str, Any]:  # fmt: skip
    """What a process needs to find or rebuild ``stack`` and its own protocol party."""
    return {
        "token": stack.token, "config": config_json(config),
        "per_round": stack.clients_per_round, "experiment_id": stack.experiment_id,
        "noise_seed": noise_seed, "server": server_id, "clients": list(client_ids), "dim": dim,
        "registry": None if stack.pki is None else stack.pki.registry.to_wire(),
    }  # fmt: skip


def protocol_party(args: dict[str, Any], party_id: str) -> ProtocolParty:
    """``party_id``'s side of the aggregation protocol (``args``: :func:`stack_args`).

    In the driver's process this is the driver's own stack; elsewhere the stack is rebuilt
    from the same settings and experiment id, so every process agrees on the protocol, and
    secrets (keys, masks, noise) are made later by each party itself. In the
    malicious-server model the process sees the experiment's PKI through the registry and
    the signing keys the registrar provisioned to it (:meth:`Pki.held`)."""
    stack = live_stack(args["token"])
    if stack is None:
        config = config_from_json(args["config"])
        registry = args.get("registry")
        if registry is None and config.protocol.threat_model != HONEST_BUT_CURIOUS:
            raise PartyError("the malicious-server model needs the experiment's key registry")
        pki = None if registry is None else Pki.held(KeyRegistry.from_wire(registry))
        stack = build_stack(config, args["per_round"], args["experiment_id"],
                            args["noise_seed"], pki=pki)  # fmt: skip
    parties = stack.parties(args["server"], args["clients"], args["dim"])
    if party_id == args["server"]:
        return parties.server
    found = parties.clients.get(party_id) or parties.others.get(party_id)
    if found is None:
        raise PartyError(f"{party_id!r} has no role in the {stack.protocol.name} protocol")
    return found


@party_builder
def protocol_host(party_id: str, stack: dict[str, Any]) -> ProtocolHost:
    """A party that only plays a protocol role (e.g. CKKS's key authority)."""
    return ProtocolHost(party_id, protocol_party(stack, party_id))
