"""Cryptographic PRG for secure-aggregation masks: the ChaCha20 keystream as uint words.

A mask of ``n`` words (uint64, or uint32 for masks in Z_2^32) is the ChaCha20 keystream
under a 32-byte seed and an all-zero nonce, read little-endian; ``offset`` seeks to word
``offset``, so disjoint segments of one stream can serve different calls. This is the PRG
of Bonawitz et al. 2017 and Bell et al. 2020 (Flower's SecAgg+ seeds numpy with a 32-bit
fold of the seed instead; we do not). The zero nonce is safe because every seed is
single-use (fresh, or HKDF-bound to experiment, round, purpose and pair). The block counter
limits one mask to 2^38 bytes; a stream is read with one word width throughout.
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

SEED_BYTES = 32
_NONCE = bytes(16)  # 4-byte block counter (starts at 0) || 12-byte nonce
WORD_DTYPES = (np.dtype(np.uint32), np.dtype(np.uint64))
_MAX_BYTES = 1 << 38
_CHUNK_BYTES = 1 << 18  # 256 KiB: each keystream chunk is added while still in cache
_zeros = b""  # shared read-only zero plaintext, grown on demand
_local = threading.local()


def _zero_view(nbytes: int) -> memoryview:
    global _zeros
    if len(_zeros) < nbytes:
        _zeros = bytes(nbytes)
    return memoryview(_zeros)[:nbytes]


def _check_seed(seed: bytes) -> None:
    if not isinstance(seed, bytes | bytearray) or len(seed) != SEED_BYTES:
        raise ValueError(f"a PRG seed is {SEED_BYTES} bytes")


def _keystream(seed: bytes, byte_offset: int = 0) -> Any:
    """A ChaCha20 encryptor positioned at keystream byte ``byte_offset``."""
    block, skip = divmod(byte_offset, 64)  # 64-byte ChaCha20 blocks
    nonce = block.to_bytes(4, "little") + _NONCE[4:]  # 32-bit block counter || zero nonce
    encryptor = Cipher(algorithms.ChaCha20(bytes(seed), nonce), mode=None).encryptor()
    if skip:
        encryptor.update(_zero_view(skip))
    return encryptor


def _word_dtype(dtype: Any, what: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in WORD_DTYPES:
        raise ValueError(f"{what} must be uint32 or uint64 words, got {dt}")
    return dt


def _check_range(offset: int, n: int, itemsize: int) -> None:
    if not 0 <= offset * itemsize <= _MAX_BYTES - n * itemsize:
        raise ValueError(
            f"mask words [{offset}, {offset + n}) exceed the stream's {_MAX_BYTES // itemsize}"
        )


def _fill(encryptor: Any, out: np.ndarray) -> None:
    """Next ``out.nbytes`` keystream bytes into the contiguous word array ``out``."""
    nbytes = out.nbytes
    if encryptor.update_into(_zero_view(nbytes), memoryview(out).cast("B")) != nbytes:
        raise RuntimeError("short ChaCha20 keystream")  # pragma: no cover
    if sys.byteorder == "big":  # pragma: no cover - masks are little-endian words
        out.byteswap(inplace=True)


def mask_words(
    seed: bytes,
    n: int,
    out: np.ndarray | None = None,
    *,
    offset: int = 0,
    dtype: Any = np.uint64,
) -> np.ndarray:
    """``n`` pseudorandom words (``dtype`` uint64 or uint32) from ``seed`` (32 bytes),
    starting at stream word ``offset``; writes into ``out`` (of that dtype) if given."""
    _check_seed(seed)
    dt = _word_dtype(dtype, "dtype")
    if not 0 <= n <= _MAX_BYTES // dt.itemsize:
        raise ValueError(f"mask length must be in [0, {_MAX_BYTES // dt.itemsize}], got {n}")
    _check_range(offset, n, dt.itemsize)
    if out is None:
        out = np.empty(n, dtype=dt)
    elif out.dtype != dt or out.shape != (n,) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a contiguous {dt} array of shape ({n},)")
    if n:
        _fill(_keystream(seed, offset * dt.itemsize), out)
    return out


def add_mask(acc: np.ndarray, seed: bytes, sign: int, *, offset: int = 0) -> None:
    """``acc += sign * PRG(seed)[offset : offset + len(acc)]`` modulo the word size, in
    place (``sign`` is +1 or -1; ``acc`` is uint64 or uint32, words of its width).

    Streams the keystream in cache-sized chunks through a small per-thread buffer, so a
    mask of any length costs one pass over ``acc`` and no allocation.
    """
    MaskStream(seed).add_to(acc, sign, offset)


class MaskStream:
    """One seed's keystream, added into accumulators segment by segment.

    :meth:`add_to` with ``offset`` where the previous call ended continues the same cipher
    (no new key setup); any other offset seeks. For consumers that walk one long stream in
    order (a pair's mask stream cut into consecutive jobs).
    """

    def __init__(self, seed: bytes) -> None:
        _check_seed(seed)
        self._seed = bytes(seed)
        self._encryptor: Any = None
        self._position = -1

    def add_to(self, acc: np.ndarray, sign: int, offset: int) -> None:
        """``acc += sign * PRG(seed)[offset : offset + len(acc)]`` modulo the word size, in
        place (words of ``acc``'s width, uint64 or uint32)."""
        dt = _word_dtype(acc.dtype, "the accumulator")
        if acc.ndim != 1 or not acc.flags.c_contiguous:
            raise ValueError("the accumulator must be a contiguous 1-d array")
        if sign not in (1, -1):
            raise ValueError(f"sign must be +1 or -1, got {sign}")
        n = acc.shape[0]
        _check_range(offset, n, dt.itemsize)
        byte_offset = offset * dt.itemsize
        if byte_offset != self._position:
            self._encryptor = _keystream(self._seed, byte_offset)
        self._position = byte_offset + acc.nbytes
        op = np.add if sign > 0 else np.subtract
        buf = getattr(_local, "chunk", None)
        if buf is None:
            buf = _local.chunk = np.empty(_CHUNK_BYTES, dtype=np.uint8)
        step = _CHUNK_BYTES // dt.itemsize
        for start in range(0, n, step):
            part = acc[start : start + step]
            words = buf.view(dt)[: part.shape[0]]
            _fill(self._encryptor, words)
            op(part, words, out=part)


def prg_throughput(n: int = 10**6, repeats: int = 5) -> float:
    """Measured PRG speed in uint64 words per second (best of ``repeats``, reused buffer)."""
    out = np.empty(n, dtype=np.uint64)
    seed = secrets.token_bytes(SEED_BYTES)
    mask_words(seed, n, out=out)  # warm up buffers
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        mask_words(seed, n, out=out)
        best = min(best, time.perf_counter() - start)
    return n / best
