"""Cryptographic PRG for secure-aggregation masks: the ChaCha20 keystream as uint64 words.

A mask is the first ``8n`` bytes of the ChaCha20 keystream under a 32-byte seed (key) and an
all-zero nonce, read as little-endian uint64; ``offset`` reads words ``[offset, offset + n)``
of that stream (the block counter seeks to it, so a long stream can be consumed in disjoint
segments by different calls without generating what lies before). This is the PRG of
Bonawitz et al. 2017 (SecAgg) and Bell et al. 2020 (SecAgg+): its output is
indistinguishable from uniform in Z_2^64^n to anyone without the 256-bit seed. Flower's
SecAgg+ instead seeds ``numpy.random.RandomState`` with a 32-bit fold of the seed (32 bits
of mask entropy, not a CSPRNG); we do not.

The zero nonce is safe because every seed is single-use: seeds are fresh random values
(self masks) or HKDF outputs bound to (experiment, round, purpose, pair), so no (key, nonce)
pair ever encrypts two different streams. The 32-bit block counter limits one mask to
2^38 bytes (over 3·10^10 words).
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
_MAX_WORDS = (1 << 38) // 8
_CHUNK_WORDS = 1 << 15  # 256 KiB: each keystream chunk is added while still in cache
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


def _keystream(seed: bytes, offset: int = 0) -> Any:
    """A ChaCha20 encryptor positioned at keystream word ``offset``."""
    block, skip = divmod(offset, 8)  # 8 words per 64-byte ChaCha20 block
    nonce = block.to_bytes(4, "little") + _NONCE[4:]  # 32-bit block counter || zero nonce
    encryptor = Cipher(algorithms.ChaCha20(bytes(seed), nonce), mode=None).encryptor()
    if skip:
        encryptor.update(_zero_view(8 * skip))
    return encryptor


def _check_range(offset: int, n: int) -> None:
    if not 0 <= offset <= _MAX_WORDS - n:
        raise ValueError(f"mask words [{offset}, {offset + n}) exceed the stream's {_MAX_WORDS}")


def _fill(encryptor: Any, out: np.ndarray) -> None:
    """Next ``len(out)`` keystream words into the contiguous uint64 array ``out``."""
    nbytes = 8 * out.shape[0]
    if encryptor.update_into(_zero_view(nbytes), memoryview(out).cast("B")) != nbytes:
        raise RuntimeError("short ChaCha20 keystream")  # pragma: no cover
    if sys.byteorder == "big":  # pragma: no cover - masks are little-endian words
        out.byteswap(inplace=True)


def mask_uint64(
    seed: bytes, n: int, out: np.ndarray | None = None, *, offset: int = 0
) -> np.ndarray:
    """``n`` pseudorandom uint64 words from ``seed`` (32 bytes), starting at stream word
    ``offset``; writes into ``out`` if given."""
    _check_seed(seed)
    if not 0 <= n <= _MAX_WORDS:
        raise ValueError(f"mask length must be in [0, {_MAX_WORDS}], got {n}")
    _check_range(offset, n)
    if out is None:
        out = np.empty(n, dtype=np.uint64)
    elif out.dtype != np.uint64 or out.shape != (n,) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a contiguous uint64 array of shape ({n},)")
    if n:
        _fill(_keystream(seed, offset), out)
    return out


def add_mask(acc: np.ndarray, seed: bytes, sign: int, *, offset: int = 0) -> None:
    """``acc += sign * PRG(seed)[offset : offset + len(acc)]`` modulo 2^64, in place
    (``sign`` is +1 or -1).

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
        """``acc += sign * PRG(seed)[offset : offset + len(acc)]`` modulo 2^64, in place."""
        if acc.dtype != np.uint64 or acc.ndim != 1 or not acc.flags.c_contiguous:
            raise ValueError("the accumulator must be a contiguous 1-d uint64 array")
        if sign not in (1, -1):
            raise ValueError(f"sign must be +1 or -1, got {sign}")
        n = acc.shape[0]
        _check_range(offset, n)
        if offset != self._position:
            self._encryptor = _keystream(self._seed, offset)
        self._position = offset + n
        op = np.add if sign > 0 else np.subtract
        buf = getattr(_local, "chunk", None)
        if buf is None:
            buf = _local.chunk = np.empty(_CHUNK_WORDS, dtype=np.uint64)
        for start in range(0, n, _CHUNK_WORDS):
            part = acc[start : start + _CHUNK_WORDS]
            words = buf[: part.shape[0]]
            _fill(self._encryptor, words)
            op(part, words, out=part)


def prg_throughput(n: int = 10**6, repeats: int = 5) -> float:
    """Measured PRG speed in uint64 words per second (best of ``repeats``, reused buffer)."""
    out = np.empty(n, dtype=np.uint64)
    seed = secrets.token_bytes(SEED_BYTES)
    mask_uint64(seed, n, out=out)  # warm up buffers
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        mask_uint64(seed, n, out=out)
        best = min(best, time.perf_counter() - start)
    return n / best
