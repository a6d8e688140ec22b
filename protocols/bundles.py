"""One message for a sender's parts of one step, one part per receiver of the parts.

In an all-to-all step (every sender has something for many receivers, all relayed by the
server) one message per (sender, receiver) costs K(K−1) messages a step, and the relay
decodes each of them. A bundle carries a sender's parts for every receiver in one message:
K messages a step, the same fields and values (one header instead of K − 1).

Layout (a plain :class:`~protocols.wire.Payload`): ``meta["parts"]`` lists
``{"to": receiver, "meta": part meta}`` in order, the field ``"<i>/<name>"`` is the field
``name`` of part ``i``; the bundle's other meta (e.g. the round) is the step's.
:func:`unbundle` checks the layout and returns each receiver's part as its own payload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocols.base import ProtocolError
from protocols.wire import FieldValue, Payload

PARTS = "parts"


def bundle(parts: Mapping[str, Payload], /, **meta: Any) -> Payload:
    """One payload holding ``parts`` (receiver -> its part) and the step's ``meta``."""
    if PARTS in meta:
        raise ValueError(f"{PARTS!r} is the bundle's own meta key")
    fields: dict[str, FieldValue] = {}
    listed = []
    for i, (receiver, part) in enumerate(parts.items()):
        listed.append({"to": receiver, "meta": part.meta})
        fields.update({f"{i}/{name}": value for name, value in part.fields.items()})
    return Payload(fields, {**meta, PARTS: listed})


def unbundle(payload: Payload, who: str) -> dict[str, Payload]:
    """Each receiver's part of a :func:`bundle` (``who`` names the reader in errors)."""
    listed = payload.meta.get(PARTS)
    if not isinstance(listed, list):
        raise ProtocolError(f"{who}: a bundle without its list of parts")
    receivers = []
    parts: dict[str, Payload] = {}
    for entry in listed:
        receiver = entry.get("to") if isinstance(entry, dict) else None
        meta = entry.get("meta") if isinstance(entry, dict) else None
        if not isinstance(receiver, str) or not isinstance(meta, dict) or receiver in parts:
            raise ProtocolError(f"{who}: a malformed or repeated part in a bundle")
        receivers.append(receiver)
        parts[receiver] = Payload({}, meta)
    owner = {str(i): receiver for i, receiver in enumerate(receivers)}
    for name, value in payload.fields.items():
        index, _, field = name.partition("/")
        if index not in owner or not field:
            raise ProtocolError(f"{who}: bundle field {name!r} belongs to no part")
        parts[owner[index]].fields[field] = value
    return parts
