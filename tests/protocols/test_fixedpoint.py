"""Fixed-point codec in Z_2^64 and Z_2^32: exact wrapped sums, two's complement, overflow
refused early."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from protocols.base import ProtocolError
from protocols.fixedpoint import (
    DEFAULT_PRECISION_BITS,
    FixedPointCodec,
    FixedPointOverflowError,
    ring_codec,
)


def _sum(words: list[np.ndarray]) -> np.ndarray:
    total = np.zeros_like(words[0])
    for w in words:
        total += w  # uint64 wraps modulo 2^64
    return total


@settings(max_examples=50, deadline=None)
@given(
    word_bits=st.sampled_from([32, 64]),
    n=st.integers(1, 20),
    data=st.data(),
)
def test_sum_of_encodings_decodes_to_the_sum(word_bits: int, n: int, data: st.DataObject) -> None:
    bound = 1000.0 if word_bits == 64 else 100.0
    top = FixedPointCodec.finest(bound, n, word_bits).frac_bits
    frac_bits = data.draw(st.integers(min(8, top), top))
    codec = FixedPointCodec(frac_bits, bound=bound, max_summands=n, word_bits=word_bits)
    assert codec.dtype == (np.uint64 if word_bits == 64 else np.uint32)
    floats = st.floats(-bound, bound, allow_nan=False)
    xs = [data.draw(arrays(np.float64, 6, elements=floats)) for _ in range(n)]
    decoded = codec.decode(_sum([codec.encode(x) for x in xs]))
    exact = np.sum(xs, axis=0)
    assert np.all(np.abs(decoded - exact) <= n * codec.resolution / 2 + 1e-9 * np.abs(exact))


def test_roundtrip_and_twos_complement() -> None:
    codec = FixedPointCodec(16)
    x = np.array([0.0, 1.0, -1.0, 2.5, -3.75, 1e-6])
    words = codec.encode(x)
    assert words.dtype == np.uint64
    assert int(words[2]) == 2**64 - 2**16  # -1 in two's complement
    np.testing.assert_array_equal(codec.decode(words)[:5], x[:5])
    assert abs(codec.decode(words)[5] - 1e-6) <= codec.resolution / 2


def test_32_bit_words_wrap_mod_2_32() -> None:
    codec = FixedPointCodec(16, word_bits=32)
    words = codec.encode(np.array([1.0, -1.0, 0.5]))
    assert words.dtype == np.uint32 and int(words[1]) == 2**32 - 2**16
    np.testing.assert_array_equal(codec.decode(words), [1.0, -1.0, 0.5])
    with pytest.raises(TypeError, match="uint32"):
        codec.decode(words.astype(np.uint64))
    with pytest.raises(ValueError, match="contiguous uint32"):
        codec.encode(np.ones(2), out=np.empty(2, np.uint64))
    with pytest.raises(ValueError, match=r"frac_bits must be an int in \[0, 30\]"):
        FixedPointCodec(31, word_bits=32)
    with pytest.raises(ValueError, match="word_bits"):
        FixedPointCodec(8, word_bits=16)


@pytest.mark.parametrize(
    ("bound", "n", "word_bits", "expected"),
    [
        (1.0, 10, 32, 27),  # 10 x 2^27 < 2^31 <= 10 x 2^28
        (1.0, 20, 32, 26),
        (1.0, 1, 32, 30),  # capped at word_bits - 2
        (1.0, 10, 64, 59),
        (2.0**20, 4, 32, 8),  # 4 x 2^20 x 2^9 = 2^31: one past the top
    ],
)
def test_finest_codec_takes_every_fractional_bit_the_headroom_allows(
    bound: float, n: int, word_bits: int, expected: int
) -> None:
    codec = FixedPointCodec.finest(bound, n, word_bits)
    assert codec.frac_bits == expected and codec.effective_bound == bound
    if expected < word_bits - 2:
        with pytest.raises(FixedPointOverflowError):
            FixedPointCodec(expected + 1, bound, n, word_bits)


def test_finest_codec_refuses_what_cannot_fit() -> None:
    with pytest.raises(FixedPointOverflowError, match="headroom"):
        FixedPointCodec.finest(2.0**31, 2, 32)
    with pytest.raises(ValueError, match="positive"):
        FixedPointCodec.finest(0.0, 2, 32)


def test_headroom_check_at_construction() -> None:
    # n * bound * 2^f must stay below 2^63.
    FixedPointCodec(20, bound=2.0**30, max_summands=2**12)  # 2^62: fits
    with pytest.raises(FixedPointOverflowError, match="headroom"):
        FixedPointCodec(20, bound=2.0**31, max_summands=2**12)  # 2^63: does not
    with pytest.raises(OverflowError):
        FixedPointCodec(24, bound=1e12, max_summands=1000)
    assert issubclass(FixedPointOverflowError, ProtocolError)


def test_encode_refuses_values_beyond_the_bound() -> None:
    codec = FixedPointCodec(24, bound=10.0, max_summands=5)
    codec.encode(np.array([10.0, -10.0]))
    with pytest.raises(FixedPointOverflowError, match="exceeds the fixed-point bound"):
        codec.encode(np.array([1.0, -10.5]))
    with pytest.raises(ValueError, match="NaN"):
        codec.encode(np.array([np.nan]))
    with pytest.raises(ValueError, match="NaN"):
        codec.encode(np.array([np.inf]))


@pytest.mark.parametrize("n", [1, 2, 3, 1000])
def test_default_bound_is_the_largest_safe_one(n: int) -> None:
    codec = FixedPointCodec(24, max_summands=n)
    b = codec.effective_bound
    for sign in (1.0, -1.0):
        words = codec.encode(np.full(1, sign * b))
        total = _sum([words] * n)
        assert codec.decode(total)[0] == pytest.approx(sign * n * b, rel=1e-12)
    # One more summand than declared would wrap: the check is what prevents it.
    wrapped = codec.decode(_sum([codec.encode(np.full(1, b))] * (n + 1)))[0]
    assert wrapped < 0
    with pytest.raises(FixedPointOverflowError):
        codec.encode(np.full(1, np.nextafter(b, np.inf)))


def test_parameter_validation() -> None:
    with pytest.raises(ValueError, match="frac_bits"):
        FixedPointCodec(63)
    with pytest.raises(ValueError, match="max_summands"):
        FixedPointCodec(16, max_summands=0)
    with pytest.raises(ValueError, match="bound"):
        FixedPointCodec(16, bound=float("nan"))
    with pytest.raises(TypeError, match="uint64"):
        FixedPointCodec(16).decode(np.zeros(2, np.int64))


def test_encode_into_out_and_in_place() -> None:
    codec = FixedPointCodec(20, max_summands=4)
    x = np.array([1.25, -3.5, 1e-3, 0.0])
    expected = codec.encode(x)
    out = np.empty(4, np.uint64)
    assert codec.encode(x, out=out) is out
    np.testing.assert_array_equal(out, expected)
    in_place = np.empty(4, np.uint64)
    in_place.view(np.float64)[:] = x
    codec.encode(in_place.view(np.float64), out=in_place)
    np.testing.assert_array_equal(in_place, expected)
    with pytest.raises(ValueError, match="contiguous uint64"):
        codec.encode(x, out=np.empty(3, np.uint64))


def test_sum_bound_codec_lets_partial_sums_wrap() -> None:
    """With a bound on the SUM (guaranteed by the caller) only the total must fit: partial
    sums may wrap modulo 2^w and still decode exactly."""
    codec = FixedPointCodec.for_sum_bound(1000.0, 3, word_bits=32)
    assert codec.frac_bits == 21  # 1000 x 2^21 + 3 < 2^31 <= 1000 x 2^22
    assert FixedPointCodec.for_sum_bound(2047.0, 20, word_bits=32).frac_bits == 20
    assert FixedPointCodec.for_sum_bound(1.0, 10, word_bits=32).frac_bits == 30
    parts = [np.array([900.0, 0.25]), np.array([900.0, 0.5]), np.array([-850.0, 0.0])]
    total = _sum([codec.encode(p) for p in parts])  # 1800 > 1024 = the range, mid-way
    np.testing.assert_array_equal(codec.decode(total), [950.0, 0.75])
    with pytest.raises(FixedPointOverflowError, match="exceeds the fixed-point bound"):
        codec.encode(np.array([1000.5]))
    with pytest.raises(FixedPointOverflowError, match="headroom"):
        FixedPointCodec.for_sum_bound(2.0**31, 2, word_bits=32)


# ------------------------------------------------------------------ the ring of a masked sum


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 5000),
    bound=st.floats(1e-6, 1e9, allow_nan=False),
    precision=st.integers(0, 40),
    signs=st.lists(st.sampled_from([1.0, -1.0]), min_size=1, max_size=8),
)
def test_worst_case_sum_is_exact_in_the_chosen_ring(
    n: int, bound: float, precision: int, signs: list[float]
) -> None:
    """n inputs all at +bound (or all at -bound, per coordinate): the decoded sum is exactly
    n times the rounded bound, in whichever ring was chosen; the ring is the smallest that
    resolves the bound to 2^-precision of itself."""
    try:
        codec = ring_codec(bound, n, precision_bits=precision)
    except FixedPointOverflowError:
        # nothing fits: even 64 bits cannot hold n x bound at this precision
        assert np.log2(n) + precision > 60 or bound * 2.0**-precision > 2.0**62 / n
        return
    assert codec.resolution <= bound * 2.0**-precision
    if codec.word_bits == 64:  # 32 bits could not do it
        with pytest.raises(FixedPointOverflowError):
            ring_codec(bound, n, ring_bits=32, precision_bits=precision)
    worst = np.array(signs) * bound
    words = codec.encode(worst)
    total = np.zeros_like(words)
    for _ in range(min(n, 64)):  # n additions, by doubling past 64 to stay quick
        total += words
    if n > 64:
        total = codec.encode(worst) * np.array(n, dtype=codec.dtype)
    rounded = np.rint(worst * codec.scale)
    np.testing.assert_array_equal(codec.decode(total), n * rounded / codec.scale)
    # the signed range holds it: one more step would not (the headroom is tight)
    assert n * abs(rounded).max() <= 2 ** (codec.word_bits - 1) - 1


@pytest.mark.parametrize(
    ("bound", "n", "ring"),
    [
        (1.0, 10, 32), (3.0, 100, 32), (2000.0, 10, 32), (1.0, 2047, 32),  # 2047 x 2^20 < 2^31
        (1.0, 2048, 64), (1e6, 100, 32), (1.0, 10**6, 64),
    ],
)  # fmt: skip
def test_smallest_ring_that_holds_the_sum(bound: float, n: int, ring: int) -> None:
    codec = ring_codec(bound, n)
    assert codec.word_bits == ring
    assert codec.resolution <= bound * 2.0**-DEFAULT_PRECISION_BITS
    assert codec.effective_bound == bound
    # every fractional bit the ring leaves: one more would overflow the worst case
    with pytest.raises(FixedPointOverflowError):
        FixedPointCodec(codec.frac_bits + 1, bound, n, ring)


def test_ring_codec_without_a_bound_keeps_the_64_bit_headroom() -> None:
    codec = ring_codec(None, 10)
    assert (codec.word_bits, codec.frac_bits) == (64, 24)
    assert codec.effective_bound == FixedPointCodec(24, max_summands=10).effective_bound
    assert ring_codec(None, 10, frac_bits=16).frac_bits == 16
    with pytest.raises(ValueError, match="32-bit ring needs a bound"):
        ring_codec(None, 10, ring_bits=32)


def test_ring_codec_refuses_what_no_ring_holds() -> None:
    with pytest.raises(FixedPointOverflowError, match="no ring holds.*coarser than"):
        ring_codec(1.0, 4096, ring_bits=32)  # 12 + 20 bits > 31
    with pytest.raises(FixedPointOverflowError, match="32 bits.*64 bits"):
        ring_codec(1.0, 2**20, precision_bits=50)
    with pytest.raises(FixedPointOverflowError, match="headroom"):
        ring_codec(2.0**40, 10, ring_bits=32)
    assert ring_codec(1.0, 4096, ring_bits=32, precision_bits=18).word_bits == 32
    assert ring_codec(1.0, 10, ring_bits=64).word_bits == 64  # a ring can be forced
    assert ring_codec(1.0, 10, frac_bits=8).frac_bits == 8
    with pytest.raises(ValueError, match="ring_bits"):
        ring_codec(1.0, 10, ring_bits=16)
    with pytest.raises(ValueError, match="precision_bits"):
        ring_codec(1.0, 10, precision_bits=-1)
