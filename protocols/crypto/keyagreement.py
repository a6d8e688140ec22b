"""X25519 key agreement with HKDF-SHA256 key derivation bound to a context string.

The context (e.g. ``b"secagg|exp=..|round=3|pair=c1,c4|mask"``) makes every derived key
single-purpose: the same pair of keys never yields the same secret for two uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

PUBLIC_KEY_BYTES = 32


@dataclass(frozen=True)
class KeyPair:
    """An X25519 key pair; only ``public`` ever leaves its owner."""

    private: X25519PrivateKey
    public: bytes

    @classmethod
    def generate(cls) -> KeyPair:
        private = X25519PrivateKey.generate()
        return cls(private, private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def derive_key(secret: bytes, context: bytes, length: int = 32) -> bytes:
    """HKDF-SHA256 of ``secret`` with ``context`` as info (no salt: inputs are uniform)."""
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=context).derive(secret)


def shared_secret(own: KeyPair, peer_public: bytes) -> bytes:
    """The raw X25519 secret of ``own`` and ``peer_public``: never use it as a key directly;
    :func:`derive_key` it per context (callers may cache it to derive many keys)."""
    if len(peer_public) != PUBLIC_KEY_BYTES:
        raise ValueError(
            f"an X25519 public key has {PUBLIC_KEY_BYTES} bytes, got {len(peer_public)}"
        )
    return own.private.exchange(X25519PublicKey.from_public_bytes(peer_public))


def agree(own: KeyPair, peer_public: bytes, context: bytes, length: int = 32) -> bytes:
    """Shared key between ``own`` and the holder of ``peer_public``, bound to ``context``."""
    return derive_key(shared_secret(own, peer_public), context, length)
