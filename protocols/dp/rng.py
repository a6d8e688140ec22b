"""Noise generators for the DP mechanisms.

Real runs (``seed=None``) seed every generator from the OS CSPRNG (``secrets``): numpy's
PCG64 from 256 secret bits (its whole 255-bit state and increment), torch's MT19937 by
filling its whole 624-word state with secret words (``torch.Generator.manual_seed`` keeps
only 32 bits of a seed, so seeding it with a secret integer would leave 2^32 possible noise
streams). Tests and ``seeded_noise`` runs (NOT PRIVATE) pass an integer ``seed`` and get
reproducible, per-party independent streams.

What this gives: no one can guess or search the seed, and runs never share noise. What it
does not: neither PCG64 nor MT19937 is a cryptographic PRG. MT19937 is linear, so 624
consecutive exact outputs reveal its state and every later draw; PCG64's state can be
recovered from a few hundred exact outputs at a large but feasible cost (Bouillaguet,
Martinez, Sauvage, ToSC 2020). A party that learns exact noise values (e.g. knows the
update a noised upload was made from) could then predict that generator's later noise.
numpy and torch have no CSPRNG generator (Opacus' ``secure_mode`` needs the unmaintained
torchcsprng), and floating-point draws are open to Mironov's (CCS'12) least-significant-bit
attacks except where Opacus' secure-mode noise is used (:mod:`protocols.dp.dpsgd`). Good for
benchmarks and audits, not a production-grade DP release.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import numpy as np

#: How a run's privacy noise was drawn, as its results say it (``"noise"``): from secret
#: seeds, from the public experiment seed (every privacy claim void), or not at all.
NOISE_SECRET, NOISE_SEEDED, NOISE_NONE = "secret", "seeded (NOT PRIVATE)", "none"
#: what every claim of a seeded-noise run carries under ``void``
VOID = "seeded noise: NOT PRIVATE"


def noise_label(seeded: bool, claims: bool) -> str:
    """``"noise"`` of a run's results: seeded (NOT PRIVATE) whenever ``seeded_noise`` is on;
    otherwise secret when the run claims a privacy guarantee (``claims``), else none."""
    if seeded:
        return NOISE_SEEDED
    return NOISE_SECRET if claims else NOISE_NONE


def make_rng(seed: int | None = None, *key: str | int) -> np.random.Generator:
    """A generator seeded from ``secrets`` (``seed=None``) or from ``(seed, *key)``.

    ``key`` (e.g. a party id and a purpose string) separates streams deterministically, so
    two parties built with the same test seed never share noise.
    """
    if seed is None:
        return np.random.Generator(np.random.PCG64(secrets.randbits(256)))
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


#: torch's CPU generator state: seed (u64), left (i32), seeded (i32), next (u64), then the
#: 624 MT19937 words (each in a u64 slot), normal-sampling caches; 5056 bytes in all
_MT_WORDS, _MT_OFFSET, _MT_STATE_BYTES = 624, 24, 5056


def make_torch_generator(seed: int | None = None, *key: str | int) -> Any:
    """A CPU ``torch.Generator``: ``seed=None`` fills its whole MT19937 state (624 words)
    from ``secrets``; an integer ``seed`` seeds it from :func:`make_rng` (reproducible)."""
    import torch

    if seed is not None:
        state = make_rng(seed, *key).integers(0, 2**63 - 1)
        return torch.Generator().manual_seed(int(state))
    generator = torch.Generator()
    generator.set_state(_secret_mt_state(torch))
    return generator


def _secret_mt_state(torch: Any) -> Any:
    """A valid CPU generator state whose MT19937 words all come from ``secrets``."""
    raw = torch.Generator().manual_seed(1).get_state().numpy().copy()
    words = raw[_MT_OFFSET : _MT_OFFSET + 8 * _MT_WORDS].view("<u8")
    if raw.size != _MT_STATE_BYTES or words[0] != 1 or words[1] != 1812433254:
        raise RuntimeError(  # init_genrand(1) puts 1 and 1812433253·1 + 1 first
            "this torch build's generator state has an unknown layout: cannot seed it from "
            "secret words (protocols.dp.rng)"
        )
    secret = np.frombuffer(secrets.token_bytes(4 * _MT_WORDS), dtype="<u4")
    words[:] = secret.astype(np.uint64)
    head = raw[: _MT_OFFSET].view("<u8")
    head[0] = 0  # the "initial seed" means nothing here
    raw[8:12].view("<i4")[0] = 1  # left = 1: twist the secret words before the first output
    raw[16:24].view("<u8")[0] = 0  # next
    return torch.from_numpy(raw)
