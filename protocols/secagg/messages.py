"""SecAgg's messages: tags, the size of a Shamir share and helpers for message fields.

Per-peer fields are named ``kind:client`` (``to:c1``, ``from:c2``, ``b:c3``, ``s:c4``); id
lists travel in the metadata. The self-mask commitment binds ``b_u`` to (experiment, round,
client) so the server detects inconsistent shares (a deviation from Bonawitz et al. 2017).
"""

from __future__ import annotations

import hashlib
from typing import Any

from protocols.base import ProtocolError
from protocols.crypto import shamir
from protocols.crypto.prg import SEED_BYTES
from protocols.secagg.rounds import SecAggConfig
from protocols.wire import Payload, WireFormatError

TAG_KEYS = "secagg/keys"
TAG_KEYLIST = "secagg/keylist"
TAG_SHARES = "secagg/shares"
TAG_ROUTED = "secagg/routed-shares"
TAG_MASKED = "secagg/masked-input"
TAG_UNMASK_REQUEST = "secagg/unmask-request"
TAG_UNMASK = "secagg/unmask"

SHARE_BYTES = len(shamir.split(bytes(SEED_BYTES), 1, 1)[0][1])


def b_commitment(config: SecAggConfig, round_idx: int, cid: str, seed: bytes) -> bytes:
    return hashlib.sha256(config.context(round_idx, "self-mask-commit", cid) + seed).digest()


def id_list(meta: dict[str, Any], key: str, who: str) -> list[str]:
    ids = meta.get(key)
    if not isinstance(ids, list) or not all(isinstance(c, str) for c in ids):
        raise ProtocolError(f"{who}: message field {key!r} must be a list of client ids")
    if len(set(ids)) != len(ids):
        raise ProtocolError(f"{who}: duplicate ids in {key!r}")
    return ids


def split_fields(payload: Payload, who: str) -> dict[str, dict[str, bytes]]:
    """``{"to:c1": blob, "b:c2": blob}`` -> ``{"to": {"c1": blob}, "b": {"c2": blob}}``."""
    out: dict[str, dict[str, bytes]] = {}
    for name in payload.fields:
        kind, sep, cid = name.partition(":")
        if not sep:
            continue
        try:
            out.setdefault(kind, {})[cid] = payload.blob(name)
        except WireFormatError as err:
            raise ProtocolError(f"{who}: field {name!r} must be a byte blob") from err
    return out
