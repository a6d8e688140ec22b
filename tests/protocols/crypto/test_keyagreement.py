"""X25519 public keys from the wire: wrong lengths and low-order points are refused."""

from __future__ import annotations

import os

import pytest

from protocols.base import ProtocolError
from protocols.crypto.keyagreement import (
    KeyAgreementError,
    KeyPair,
    agree,
    check_public_key,
    shared_secret,
)

P = 2**255 - 19
LOW_ORDER = [
    0,
    1,
    325606250916557431795983626356110631294008115727848805560023387167927233504,
    39382357235489614581723060781553021112529911719440698176882885853963445705823,
    P - 1,
    P,  # non-canonical 0
    P + 1,  # non-canonical 1
]


@pytest.mark.parametrize("u", LOW_ORDER)
@pytest.mark.parametrize("top_bit", [0, 1 << 255])
def test_low_order_points_are_refused(u: int, top_bit: int) -> None:
    key = (u | top_bit).to_bytes(32, "little")
    with pytest.raises(KeyAgreementError, match="low-order"):
        check_public_key(key)
    with pytest.raises(ProtocolError):  # a protocol error, and still a ValueError
        shared_secret(KeyPair.generate(), key)
    with pytest.raises(ValueError):
        agree(KeyPair.generate(), key, b"ctx")


@pytest.mark.parametrize("key", [b"", bytes(31), bytes(33), "x" * 32, None])
def test_wrong_lengths_and_types_are_refused(key) -> None:
    with pytest.raises(KeyAgreementError, match="32 bytes"):
        check_public_key(key)


def test_honest_and_random_keys_pass() -> None:
    a, b = KeyPair.generate(), KeyPair.generate()
    assert check_public_key(b.public) == b.public
    assert agree(a, b.public, b"ctx") == agree(b, a.public, b"ctx")
    for _ in range(200):  # a random 32-byte string is almost never a low-order point
        shared_secret(a, check_public_key(os.urandom(32)))
