"""SecAgg's messages: tags, the secrets' and shares' sizes and helpers for message fields.

Uploads pack their per-peer items into one array each (``O(n)`` items of a few dozen bytes
weigh next to the vector at n = 500): the sealed shares as rows in the order of the key
list the server sent, the unmask shares as rows ``b`` / ``s`` with their owners' ids in the
metadata. The routed shares the server sends are named ``from:client``. The self-mask
commitment binds ``b_u`` to (experiment, round, client) so the server detects inconsistent
shares (a deviation from Bonawitz et al. 2017).

The shared secrets are 128-bit seeds (one element of :mod:`protocols.crypto.shamir`'s
field): ``b_u`` expands by HKDF to the self mask's PRG seed, ``s_u`` to the X25519 mask key
(128-bit security, that of X25519 itself; Bonawitz et al. share the key itself).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from protocols.base import ProtocolError
from protocols.crypto import shamir
from protocols.crypto.aead import NONCE_BYTES
from protocols.crypto.keyagreement import KeyPair, derive_key
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

SECRET_BYTES = 16
SHARE_BYTES = len(shamir.split(bytes(SECRET_BYTES), 1, 1)[0][1])
SEALED_BYTES = NONCE_BYTES + 2 * SHARE_BYTES + 16  # nonce, (b-share, s-share), Poly1305 tag


def self_mask_seed(b: bytes) -> bytes:
    """The self mask's PRG seed from the shared 128-bit secret ``b_u``."""
    return derive_key(b, b"securefgl/secagg/v1/self-mask", SEED_BYTES)


def mask_private(seed: bytes) -> bytes:
    """The X25519 mask private key (raw bytes) from the shared 128-bit secret ``s_u``."""
    return derive_key(seed, b"securefgl/secagg/v1/mask-key")


def mask_key_pair(seed: bytes) -> KeyPair:
    private = X25519PrivateKey.from_private_bytes(mask_private(seed))
    return KeyPair(private, private.public_key().public_bytes_raw())


def pack_rows(rows: Sequence[bytes], width: int) -> np.ndarray:
    """Equal-length byte strings as one (writable) uint8 array [len(rows), width]."""
    return np.frombuffer(b"".join(rows), np.uint8).reshape(len(rows), width).copy()


def byte_rows(array: object, count: int, width: int) -> list[bytes] | None:
    """The rows of a uint8 array of shape (count, width); None if it is anything else."""
    if not isinstance(array, np.ndarray) or array.dtype != np.uint8:
        return None
    return [row.tobytes() for row in array] if array.shape == (count, width) else None


def unpack_rows(payload: Payload, name: str, count: int, width: int, who: str) -> list[bytes]:
    """The ``count`` rows of ``width`` bytes of the array field ``name``."""
    rows = byte_rows(payload.fields.get(name), count, width)
    if rows is None:
        raise ProtocolError(f"{who}: field {name!r} must be uint8 of shape {(count, width)}")
    return rows


def unmask_fields(b: dict[str, bytes], s: dict[str, bytes]) -> tuple[dict[str, Any], dict]:
    """(fields, meta) of an unmask response: shares of b_v and of s_v by owner."""
    return ({"b": pack_rows(list(b.values()), SHARE_BYTES),
             "s": pack_rows(list(s.values()), SHARE_BYTES)},
            {"b_ids": list(b), "s_ids": list(s)})  # fmt: skip


def unmask_shares(payload: Payload, who: str) -> dict[str, dict[str, bytes]]:
    """``{"b": {owner: share}, "s": {owner: share}}`` of an unmask response."""
    if set(payload.fields) != {"b", "s"}:
        raise ProtocolError(f"{who}: an unmask response has exactly the fields b and s")
    out = {}
    for kind in ("b", "s"):
        ids = id_list(payload.meta, f"{kind}_ids", who)
        out[kind] = dict(zip(ids, unpack_rows(payload, kind, len(ids), SHARE_BYTES, who),
                             strict=True))  # fmt: skip
    return out


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
