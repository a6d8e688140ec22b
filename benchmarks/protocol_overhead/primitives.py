"""Primitive limits measured on this machine, in this run: ChaCha20 PRG words/s, X25519 +
HKDF agreement, AEAD, Shamir, memcpy and TenSEAL CKKS costs (best of repeats)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.harness.timing import best_seconds
from protocols.crypto import shamir
from protocols.crypto.aead import open_sealed, seal
from protocols.crypto.keyagreement import KeyPair, agree
from protocols.crypto.prg import SEED_BYTES, add_mask, mask_words, prg_throughput

try:  # TenSEAL is a dependency, but keep the PRG / secagg part usable without it
    import tenseal as ts

    from protocols.ckks import (
        CKKSParams,
        ckks_encrypt_throughput,
        serialize_public,
        serialize_secret,
    )
    from protocols.ckks_codec import make_codec
except ImportError:  # pragma: no cover
    ts = None


def best_cpu(fn: Callable[[], Any], repeats: int) -> float:
    """Best CPU seconds (``time.process_time``) of ``fn`` over ``repeats`` calls."""
    return max(best_seconds(fn, repeats, time.process_time), 1e-9)


@dataclass
class Primitives:
    """Throughputs and unit costs measured on this machine, in this run."""

    dims: tuple[int, ...]
    prg_words_per_s: dict[int, float] = field(default_factory=dict)
    add_mask_s: dict[int, float] = field(default_factory=dict)
    memcpy_bytes_per_s: dict[int, float] = field(default_factory=dict)
    ckks_floats_per_s: dict[int, float] = field(default_factory=dict)
    # the same operations timed in CPU seconds, like the parties (executor clock)
    prg_cpu_words_per_s: dict[int, float] = field(default_factory=dict)
    ckks_cpu_floats_per_s: dict[int, float] = field(default_factory=dict)
    agree_cpu_s: float = math.inf
    prg_headline: float = 0.0  # words/s at 10^6
    agree_s: float = 0.0
    keygen_s: float = 0.0
    seal_s: float = 0.0
    open_s: float = 0.0
    ckks_chunk: dict[str, float] = field(default_factory=dict)
    ckks_headline: float | None = None  # floats/s at 10^5
    _shamir: dict[int, tuple[float, float]] = field(default_factory=dict)

    @classmethod
    def measure(cls, dims: Sequence[int], with_ckks: bool) -> Primitives:
        p = cls(tuple(sorted(set(dims))))
        p.prg_headline = prg_throughput(10**6, repeats=7)
        seed = bytes(range(SEED_BYTES))
        for d in p.dims:
            repeats = 7 if d <= 10**5 else 4
            p.prg_words_per_s[d] = prg_throughput(d, repeats=repeats)
            words = mask_words(seed, d)
            p.prg_cpu_words_per_s[d] = d / best_cpu(
                lambda w=words, d=d: mask_words(seed, d, out=w), repeats
            )
            acc = np.zeros(d + 1, dtype=np.uint64)
            add_mask(acc, seed, 1)
            p.add_mask_s[d] = best_seconds(lambda acc=acc: add_mask(acc, seed, 1), repeats)
            src = np.random.default_rng(0).uniform(-1, 1, d)
            dst = np.empty_like(src)
            copy = lambda s=src, t=dst: np.copyto(t, s)  # noqa: E731
            p.memcpy_bytes_per_s[d] = (
                8 * d / min(best_seconds(copy, repeats), best_cpu(copy, repeats))
            )
            del acc, src, dst, words
        a, b = KeyPair.generate(), KeyPair.generate()
        reps = 500
        agrees = lambda: [agree(a, b.public, b"bench") for _ in range(reps)]  # noqa: E731
        p.agree_s = best_seconds(agrees, 3) / reps
        p.agree_cpu_s = best_cpu(agrees, 3) / reps
        p.keygen_s = best_seconds(lambda: [KeyPair.generate() for _ in range(reps)], 3) / reps
        key, plain, ad = bytes(32), bytes(2 * 68), b"securefgl/secagg/v1 bench ad"
        sealed = seal(key, plain, ad)
        p.seal_s = best_seconds(lambda: [seal(key, plain, ad) for _ in range(reps)], 3) / reps
        p.open_s = (
            best_seconds(lambda: [open_sealed(key, sealed, ad) for _ in range(reps)], 3) / reps
        )
        if with_ckks and ts is not None:
            p._measure_ckks()
        return p

    def _measure_ckks(self) -> None:
        params = CKKSParams()
        for d in self.dims:
            repeats = 3 if d <= 10**5 else 1
            self.ckks_floats_per_s[d] = max(ckks_encrypt_throughput(d) for _ in range(repeats))
        self.ckks_headline = self.ckks_floats_per_s.get(10**5) or ckks_encrypt_throughput(10**5)
        ctx = params.make_context()
        client = make_codec(ctx, params)  # the aggregation's codec (packing, seeding)
        per = params.values_per_ciphertext
        for d in self.dims:  # what ckks_encrypt_throughput times, in CPU seconds
            repeats = 3 if d <= 10**5 else 1
            vals = np.random.default_rng(0).uniform(-1.0, 1.0, d)
            cpu = best_cpu(lambda v=vals: client.encrypt(v), repeats)
            self.ckks_cpu_floats_per_s[d] = d / cpu
        public = ts.context_from(serialize_public(ctx), n_threads=1)
        server = make_codec(public, params)
        m = 16
        values = np.random.default_rng(1).uniform(-1, 1, m * per)
        start = time.perf_counter()
        blobs = client.encrypt(values)
        enc = (time.perf_counter() - start) / m
        start = time.perf_counter()
        vecs = [server.load(blob, per, "bench") for blob in blobs]
        load = (time.perf_counter() - start) / m
        start = time.perf_counter()
        for v in vecs[1:]:
            server.add_(vecs[0], v)
        add = (time.perf_counter() - start) / (m - 1)
        start = time.perf_counter()
        ser = [server.dump(v) for v in vecs]
        serialize = (time.perf_counter() - start) / m
        start = time.perf_counter()
        for blob in ser:
            client.decrypt(client.load(blob, per, "bench"), per)
        decrypt = (time.perf_counter() - start) / m
        secret = serialize_secret(ctx)
        start = time.perf_counter()
        ts.context_from(secret, n_threads=1)
        ctx_load = time.perf_counter() - start
        self.ckks_chunk = {
            "encrypt_s": enc,
            "load_s": load,
            "add_s": add,
            "serialize_s": serialize,
            "load_decrypt_s": decrypt,
            "chunk_bytes": float(len(blobs[0])),
            "secret_context_bytes": float(len(secret)),
            "context_load_s": ctx_load,
        }

    def merge_best(self, other: Primitives) -> None:
        """Keep the better of two measurements of each primitive (the machine's limit)."""
        for mine, theirs in (
            (self.prg_words_per_s, other.prg_words_per_s),
            (self.memcpy_bytes_per_s, other.memcpy_bytes_per_s),
            (self.ckks_floats_per_s, other.ckks_floats_per_s),
            (self.prg_cpu_words_per_s, other.prg_cpu_words_per_s),
            (self.ckks_cpu_floats_per_s, other.ckks_cpu_floats_per_s),
        ):
            for key, value in theirs.items():
                mine[key] = max(mine.get(key, 0.0), value)
        for key, value in other.add_mask_s.items():
            self.add_mask_s[key] = min(self.add_mask_s.get(key, math.inf), value)
        self.prg_headline = max(self.prg_headline, other.prg_headline)
        if other.ckks_headline:
            self.ckks_headline = max(self.ckks_headline or 0.0, other.ckks_headline)
        for name in ("agree_s", "agree_cpu_s", "keygen_s", "seal_s", "open_s"):
            setattr(self, name, min(getattr(self, name), getattr(other, name)))
        for key, value in other.ckks_chunk.items():
            if key.endswith("_s"):
                self.ckks_chunk[key] = min(self.ckks_chunk.get(key, math.inf), value)

    def shamir_costs(self, holders: int) -> tuple[float, float]:
        """(split, combine) seconds for one 32-byte secret among ``holders``, t = h//2 + 1."""
        if holders not in self._shamir:
            t = holders // 2 + 1
            secret = bytes(SEED_BYTES)
            reps = 3 if holders > 200 else 10
            split = best_seconds(lambda: shamir.split(secret, t, holders), reps)
            shares = shamir.split(secret, t, holders)
            combine = best_seconds(lambda: shamir.combine(shares, t), reps)
            self._shamir[holders] = (split, combine)
        return self._shamir[holders]

    def nearest(self, table: dict[int, float], d: int) -> float:
        """Per-unit rate from the nearest measured d (rates are per word/byte/float)."""
        key = min(table, key=lambda k: abs(math.log(k) - math.log(max(d, 1))))
        return table[key]

    def prg_limit(self, d: int) -> float:
        """PRG words/s for the limit: the better of prg_throughput and its CPU-time replica."""
        return max(self.nearest(self.prg_words_per_s, d), self.nearest(self.prg_cpu_words_per_s, d))

    def ckks_limit(self, d: int) -> float | None:
        if not self.ckks_floats_per_s:
            return None
        return max(
            self.nearest(self.ckks_floats_per_s, d), self.nearest(self.ckks_cpu_floats_per_s, d)
        )

    @property
    def agree_limit(self) -> float:
        return min(self.agree_s, self.agree_cpu_s)

    def add_s(self, d: int) -> float:
        key = min(self.add_mask_s, key=lambda k: abs(math.log(k) - math.log(max(d, 1))))
        return self.add_mask_s[key] * (d + 1) / (key + 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "prg_uint64_per_s": self.prg_headline,
            "ckks_floats_per_s": self.ckks_headline,
            "x25519_agree_s": self.agree_limit,
            "x25519_agree_wall_s": self.agree_s,
            "x25519_agree_cpu_s": self.agree_cpu_s,
            "x25519_keygen_s": self.keygen_s,
            "aead_seal_s": self.seal_s,
            "aead_open_s": self.open_s,
            "prg_uint64_per_s_by_dim": {str(k): v for k, v in self.prg_words_per_s.items()},
            "prg_uint64_per_s_cpu_by_dim": {str(k): v for k, v in self.prg_cpu_words_per_s.items()},
            "add_mask_s_by_dim": {str(k): v for k, v in self.add_mask_s.items()},
            "memcpy_bytes_per_s_by_dim": {str(k): v for k, v in self.memcpy_bytes_per_s.items()},
            "ckks_floats_per_s_by_dim": {str(k): v for k, v in self.ckks_floats_per_s.items()},
            "ckks_floats_per_s_cpu_by_dim": {
                str(k): v for k, v in self.ckks_cpu_floats_per_s.items()
            },
            "ckks_per_chunk": self.ckks_chunk,
            "shamir_split_combine_s_by_holders": {
                str(h): {"split_s": s, "combine_s": c} for h, (s, c) in self._shamir.items()
            },
            "notes": (
                "prg = protocols.crypto.prg.prg_throughput (ChaCha20 keystream into a reused "
                "buffer, best of repeats, wall clock); *_cpu = the same operation timed in CPU "
                "seconds (time.process_time), as the parties are; each limit uses the better "
                "of the two (prg_uint64_per_s / ckks_floats_per_s above are the library "
                "functions' own wall-clock figures; x25519_agree_s is the better one); "
                "add_mask = keystream added into a d+1 accumulator "
                "(what a client does per mask); ckks = protocols.ckks.ckks_encrypt_throughput "
                "(encrypt + serialize, one thread, best of repeats); agree = X25519 exchange + "
                "HKDF-SHA256 (protocols.crypto.keyagreement.agree)."
            ),
        }
