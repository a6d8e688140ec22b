"""The mask PRG is the ChaCha20 keystream: deterministic, distinct per seed, uniform."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.crypto.prg import (
    SEED_BYTES,
    MaskStream,
    add_mask,
    mask_words,
    prg_throughput,
)


def _chacha20_block(key: bytes, counter: int, nonce: bytes) -> bytes:
    """RFC 8439 §2.3 block function, written independently of the library."""

    def rotl(v: int, c: int) -> int:
        return ((v << c) & 0xFFFFFFFF) | (v >> (32 - c))

    def qr(s: list[int], a: int, b: int, c: int, d: int) -> None:
        s[a] = (s[a] + s[b]) & 0xFFFFFFFF
        s[d] = rotl(s[d] ^ s[a], 16)
        s[c] = (s[c] + s[d]) & 0xFFFFFFFF
        s[b] = rotl(s[b] ^ s[c], 12)
        s[a] = (s[a] + s[b]) & 0xFFFFFFFF
        s[d] = rotl(s[d] ^ s[a], 8)
        s[c] = (s[c] + s[d]) & 0xFFFFFFFF
        s[b] = rotl(s[b] ^ s[c], 7)

    init = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    init += list(struct.unpack("<8I", key)) + [counter] + list(struct.unpack("<3I", nonce))
    s = list(init)
    for _ in range(10):
        qr(s, 0, 4, 8, 12), qr(s, 1, 5, 9, 13), qr(s, 2, 6, 10, 14), qr(s, 3, 7, 11, 15)
        qr(s, 0, 5, 10, 15), qr(s, 1, 6, 11, 12), qr(s, 2, 7, 8, 13), qr(s, 3, 4, 9, 14)
    return struct.pack("<16I", *((a + b) & 0xFFFFFFFF for a, b in zip(s, init, strict=True)))


def test_reference_block_matches_rfc8439_vector() -> None:
    block = _chacha20_block(bytes(range(32)), 1, bytes.fromhex("000000090000004a00000000"))
    assert block[:16].hex() == "10f1e7e4d13b5915500fdd1fa32071c4"


def test_mask_is_the_chacha20_keystream_as_little_endian_words() -> None:
    key = bytes(range(100, 132))
    expected = b"".join(_chacha20_block(key, i, bytes(12)) for i in range(3))
    words = mask_words(key, 24)
    assert words.dtype == np.uint64
    assert words.tobytes() == expected
    assert int(words[0]) == int.from_bytes(expected[:8], "little")
    halves = mask_words(key, 48, dtype=np.uint32)  # Z_2^32 masks: the same bytes
    assert halves.dtype == np.uint32 and halves.tobytes() == expected


def test_deterministic_prefix_stable_and_seed_dependent() -> None:
    a, b = bytes(32), bytes(31) + b"\x01"
    assert np.array_equal(mask_words(a, 1000), mask_words(a, 1000))
    assert np.array_equal(mask_words(a, 1000)[:10], mask_words(a, 10))
    assert np.mean(mask_words(a, 1000) == mask_words(b, 1000)) == 0.0


def test_distinct_random_seeds_give_distinct_masks() -> None:
    rng = np.random.default_rng(1)
    masks = {mask_words(rng.bytes(32), 4).tobytes() for _ in range(200)}
    assert len(masks) == 200


def _byte_chi_square(data: bytes) -> float:
    counts = np.bincount(np.frombuffer(data, np.uint8), minlength=256)
    expected = len(data) / 256
    return float(((counts - expected) ** 2 / expected).sum())


def test_output_looks_uniform() -> None:
    words = mask_words(b"\x42" * SEED_BYTES, 100_000)
    # 255 degrees of freedom: mean 255, sd 22.6; 400 is ~6 sd (false alarm ~1e-9).
    assert _byte_chi_square(words.tobytes()) < 400
    bits = np.unpackbits(words.view(np.uint8)).reshape(-1, 64).mean(axis=0)
    assert np.all(np.abs(bits - 0.5) < 0.01)
    # The test can fail: a low-entropy "mask" (small RNG range, like a 32-bit seed folded into
    # small words) is rejected.
    weak = np.random.default_rng(0).integers(0, 2**16, 100_000, dtype=np.uint64)
    assert _byte_chi_square(weak.tobytes()) > 400


def test_out_buffer_and_add_mask_roundtrip() -> None:
    seed = b"\x07" * 32
    out = np.zeros(50, np.uint64)
    assert mask_words(seed, 50, out=out) is out
    assert np.array_equal(out, mask_words(seed, 50))
    assert mask_words(seed, 0).shape == (0,)


@pytest.mark.parametrize("n", [0, 1, 50, 2**15, 2**16 + 3])
def test_add_mask_streams_the_same_mask(n: int) -> None:
    seed = b"\x09" * 32
    base = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    acc = base.copy()
    add_mask(acc, seed, +1)
    np.testing.assert_array_equal(acc, base + mask_words(seed, n))  # wraps mod 2^64
    add_mask(acc, seed, -1)
    np.testing.assert_array_equal(acc, base)


@settings(max_examples=40, deadline=None)
@given(
    offset=st.integers(0, 5000),
    n=st.integers(0, 3000),
    sign=st.sampled_from([1, -1]),
    dtype=st.sampled_from([np.uint64, np.uint32]),
)
def test_offset_reads_the_same_stream_from_any_word(offset, n, sign, dtype) -> None:
    """Seeking (block counter + skipped bytes) gives exactly the stream's words there, in
    words of either width."""
    seed = b"\x0b" * 32
    whole = mask_words(seed, offset + n, dtype=dtype)
    assert np.array_equal(mask_words(seed, n, offset=offset, dtype=dtype), whole[offset:])
    acc = np.arange(n, dtype=dtype)
    add_mask(acc, seed, sign, offset=offset)
    expected = np.arange(n, dtype=dtype) + dtype(sign % 2 ** (8 * acc.itemsize)) * whole[offset:]
    np.testing.assert_array_equal(acc, expected)  # wraps mod the word size


@settings(max_examples=30, deadline=None)
@given(
    cuts=st.lists(st.integers(0, 40_000), min_size=1, max_size=6),
    order=st.randoms(),
    dtype=st.sampled_from([np.uint64, np.uint32]),
)
def test_mask_stream_segments_in_any_order_are_the_stream(cuts, order, dtype) -> None:
    """A MaskStream read in consecutive segments (continuing its cipher) or out of order
    (seeking) adds exactly the stream's words at each segment."""
    seed = b"\x0c" * 32
    bounds = np.cumsum([0, *cuts])
    whole = mask_words(seed, int(bounds[-1]), dtype=dtype)
    for shuffle in (False, True):
        segments = list(range(len(cuts)))
        if shuffle:
            order.shuffle(segments)
        stream = MaskStream(seed)
        for j in segments:
            acc = np.zeros(cuts[j], dtype)
            stream.add_to(acc, +1, int(bounds[j]))
            assert np.array_equal(acc, whole[bounds[j] : bounds[j + 1]])


def test_offset_is_checked_against_the_stream_length() -> None:
    with pytest.raises(ValueError, match="exceed"):
        mask_words(bytes(32), 4, offset=-1)
    with pytest.raises(ValueError, match="exceed"):
        add_mask(np.zeros(4, np.uint64), bytes(32), 1, offset=2**35 - 3)
    with pytest.raises(ValueError, match="exceed"):
        add_mask(np.zeros(4, np.uint32), bytes(32), 1, offset=2**36 - 3)
    add_mask(np.zeros(4, np.uint32), bytes(32), 1, offset=2**36 - 4)  # the last words


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        mask_words(b"short", 4)
    with pytest.raises(ValueError, match="contiguous uint64"):
        mask_words(bytes(32), 4, out=np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="contiguous uint64"):
        mask_words(bytes(32), 4, out=np.zeros(5, np.uint64))
    with pytest.raises(ValueError, match="mask length"):
        mask_words(bytes(32), -1)
    with pytest.raises(ValueError, match="sign"):
        add_mask(np.zeros(3, np.uint64), bytes(32), 2)
    with pytest.raises(ValueError, match="uint32 or uint64"):
        add_mask(np.zeros(3, np.int64), bytes(32), 1)
    with pytest.raises(ValueError, match="uint32 or uint64"):
        mask_words(bytes(32), 4, dtype=np.uint16)


def test_throughput_helper() -> None:
    assert prg_throughput(10_000, repeats=2) > 1e6
