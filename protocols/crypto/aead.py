"""Authenticated encryption (ChaCha20-Poly1305) for secrets in transit.

``seal`` output is ``nonce (12 bytes) || ciphertext+tag``; ``open_sealed`` raises
:class:`IntegrityError` if a single bit was changed or the associated data differ.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from protocols.base import ProtocolError

NONCE_BYTES = 12


class IntegrityError(ProtocolError, ValueError):
    """A sealed message failed authentication (tampered, truncated or misaddressed): a
    protocol error (the round aborts), and a ``ValueError`` as before."""


def seal(key: bytes, plaintext: bytes, associated_data: bytes) -> bytes:
    nonce = os.urandom(NONCE_BYTES)
    return nonce + ChaCha20Poly1305(key).encrypt(nonce, plaintext, associated_data)


def open_sealed(key: bytes, sealed: bytes, associated_data: bytes) -> bytes:
    if not isinstance(sealed, bytes) or len(sealed) < NONCE_BYTES + 16:
        raise IntegrityError("sealed message is too short")
    try:
        return ChaCha20Poly1305(key).decrypt(
            sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], associated_data
        )
    except InvalidTag as err:
        raise IntegrityError("authentication failed: message tampered or misaddressed") from err
