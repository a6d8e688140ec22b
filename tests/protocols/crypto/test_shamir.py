"""Shamir t-of-n over GF(2^128 + 51): any t shares reconstruct, fewer do not."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.crypto import shamir
from protocols.crypto.shamir import ShamirError, combine, split


class _SeededRng:
    """A deterministic stand-in for :mod:`secrets` (tests only)."""

    def __init__(self, seed: int) -> None:
        self._r = random.Random(seed)

    def randbelow(self, bound: int) -> int:
        return self._r.randrange(bound)


@settings(max_examples=40, deadline=None)
@given(
    secret=st.binary(min_size=0, max_size=150),
    n=st.integers(1, 12),
    data=st.data(),
)
def test_any_t_shares_reconstruct(secret: bytes, n: int, data: st.DataObject) -> None:
    t = data.draw(st.integers(1, n))
    shares = split(secret, t, n)
    assert sorted(x for x, _ in shares) == list(range(1, n + 1))
    subset = data.draw(st.permutations(shares))[: data.draw(st.integers(t, n))]
    assert combine(subset, t) == secret


@settings(max_examples=30, deadline=None)
@given(secret=st.binary(min_size=1, max_size=70), n=st.integers(2, 10), data=st.data())
def test_fewer_than_t_shares_fail(secret: bytes, n: int, data: st.DataObject) -> None:
    t = data.draw(st.integers(2, n))
    shares = data.draw(st.permutations(split(secret, t, n)))
    with pytest.raises(ShamirError, match=f"need {t} shares"):
        combine(shares[: t - 1], t)
    # Interpolating t-1 points of a degree t-1 polynomial gives a random field element:
    # either it does not even fit the secret's length (error) or it is a wrong secret.
    try:
        assert combine(shares[: t - 1], t - 1) != secret
    except ShamirError as err:
        assert "inconsistent" in str(err)


def test_t_minus_one_shares_are_consistent_with_any_secret() -> None:
    """Perfect hiding, concretely (t=2): one share fits every secret for some coefficient."""
    (x, share), _ = split(b"A" * 16, 2, 2, rng=_SeededRng(0))  # one field element
    a_val = int.from_bytes(share[2:], "big")
    b_secret = int.from_bytes(b"B" * 16, "big")
    coeff = (a_val - b_secret) * pow(x, -1, shamir.PRIME) % shamir.PRIME
    assert (b_secret + coeff * x) % shamir.PRIME == a_val


def test_custom_points_and_deterministic_rng() -> None:
    key = bytes(range(32))
    shares = split(key, 3, 4, rng=_SeededRng(5), xs=[7, 11, 400, 9])
    assert [x for x, _ in shares] == [7, 11, 400, 9]
    assert shares == split(key, 3, 4, rng=_SeededRng(5), xs=[7, 11, 400, 9])
    assert all(len(s) == 2 + 2 * shamir.ELEMENT_BYTES for _, s in shares)  # two chunks
    assert combine(shares[1:], 3) == key
    assert combine(list(reversed(shares)), 3) == key


def test_errors() -> None:
    shares = split(b"secret", 2, 3)
    with pytest.raises(ShamirError, match="duplicate"):
        combine([shares[0], shares[0]], 2)
    with pytest.raises(ShamirError, match="duplicate"):
        split(b"s", 2, 3, xs=[1, 1, 2])
    with pytest.raises(ShamirError, match="outside"):
        split(b"s", 2, 2, xs=[0, 1])
    with pytest.raises(ShamirError, match="t <= n"):
        split(b"s", 4, 3)
    with pytest.raises(ShamirError, match="does not match"):
        combine([shares[0], (shares[1][0], shares[1][1][:-1])], 2)
    bad = (shares[1][0], shares[1][1][:2] + b"\xff" * shamir.ELEMENT_BYTES)
    with pytest.raises(ShamirError, match="not a field element"):
        combine([shares[0], bad], 2)
    other = split(b"secret-2", 2, 3)
    with pytest.raises(ShamirError, match="disagree"):
        combine([shares[0], other[1]], 2)
