"""X25519 key agreement with HKDF-SHA256 key derivation bound to a context string.

The context (e.g. ``b"secagg|exp=..|round=3|pair=c1,c4|mask"``) makes every derived key
single-purpose: the same pair of keys never yields the same secret for two uses. Received
public keys are checked (:func:`check_public_key`): 32 bytes and not one of the low-order
points (RFC 7748, Sec. 6.1), which would give an all-zero shared secret.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from protocols.base import ProtocolError

PUBLIC_KEY_BYTES = 32
_P = 2**255 - 19
#: u-coordinates (mod p) of the points of order 1, 2, 4 and 8 on Curve25519 and its twist
#: (libsodium's blocklist); X25519 with any of them yields the all-zero secret.
_LOW_ORDER = frozenset(
    {
        0,
        1,
        325606250916557431795983626356110631294008115727848805560023387167927233504,
        39382357235489614581723060781553021112529911719440698176882885853963445705823,
        _P - 1,
    }
)


class KeyAgreementError(ProtocolError, ValueError):
    """A peer's public key has the wrong length or is a low-order point."""


def check_public_key(public: object) -> bytes:
    """``public`` if it is a usable X25519 public key, else :class:`KeyAgreementError`."""
    if not isinstance(public, bytes) or len(public) != PUBLIC_KEY_BYTES:
        size = len(public) if isinstance(public, bytes) else type(public).__name__
        raise KeyAgreementError(f"an X25519 public key has {PUBLIC_KEY_BYTES} bytes, got {size}")
    u = (int.from_bytes(public, "little") & ((1 << 255) - 1)) % _P  # RFC 7748 decoding
    if u in _LOW_ORDER:
        raise KeyAgreementError("X25519 public key is a low-order point")
    return public


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
    check_public_key(peer_public)
    try:
        return own.private.exchange(X25519PublicKey.from_public_bytes(peer_public))
    except ValueError as err:  # cannot happen after the check; kept as a last line
        raise KeyAgreementError(f"X25519 key agreement failed: {err}") from err


def agree(own: KeyPair, peer_public: bytes, context: bytes, length: int = 32) -> bytes:
    """Shared key between ``own`` and the holder of ``peer_public``, bound to ``context``."""
    return derive_key(shared_secret(own, peer_public), context, length)
