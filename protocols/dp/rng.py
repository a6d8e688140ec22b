"""Noise generators for the DP mechanisms.

Real runs draw a fresh 128-bit seed from the OS CSPRNG (``secrets``) for every generator;
tests pass an integer ``seed`` and get reproducible, per-party independent streams.

Deviation from a hardened DP library: the sampler is numpy's PCG64 with floating-point
Gaussian / Laplace draws. PCG64 is not a cryptographic PRG, and floating-point noise is open
to Mironov-style (CCS'12) least-significant-bit attacks. Opacus' ``secure_mode`` (torchcsprng)
has the same purpose and is likewise not used here. Good enough for benchmarks and audits,
not a production-grade DP release.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import numpy as np


def make_rng(seed: int | None = None, *key: str | int) -> np.random.Generator:
    """A generator seeded from ``secrets`` (``seed=None``) or from ``(seed, *key)``.

    ``key`` (e.g. a party id and a purpose string) separates streams deterministically, so
    two parties built with the same test seed never share noise.
    """
    if seed is None:
        return np.random.Generator(np.random.PCG64(secrets.randbits(128)))
    words = [int(seed) & (2**64 - 1)]
    for part in key:
        digest = hashlib.sha256(str(part).encode()).digest()
        words.append(int.from_bytes(digest[:8], "little"))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))


def as_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    """Accept a generator, an integer seed (tests) or ``None`` (fresh secret seed)."""
    if isinstance(rng, np.random.Generator):
        return rng
    return make_rng(rng)


def make_torch_generator(seed: int | None = None, *key: str | int) -> Any:
    """A ``torch.Generator`` seeded like :func:`make_rng` (``None``: from ``secrets``)."""
    import torch

    state = make_rng(seed, *key).integers(0, 2**63 - 1)
    return torch.Generator().manual_seed(int(state))
