"""Shamir t-of-n secret sharing over the prime field GF(2^128 + 51).

Used by secure aggregation (Bonawitz et al. 2017; Bell et al. 2020) to share each client's
self-mask seed and mask private key among its peers for dropout recovery. Any ``t`` shares
reconstruct the secret; ``t - 1`` shares are independent of it (information-theoretic), as
long as the coefficients are uniform (they come from :mod:`secrets`).

A secret of ``L`` bytes is cut into 16-byte chunks (each < 2^128 < p; 2^128 + 51 is the
smallest prime above 2^128), one field element per chunk: a 128-bit secret is one element.
A share is ``L`` as 2 bytes big-endian followed by one 17-byte big-endian field element per
chunk; its x-coordinate travels separately.

Not verifiable secret sharing: a wrong share yields a wrong secret, not an error (callers
check what they can, e.g. a reconstructed private key against its public key).
"""

from __future__ import annotations

import secrets as _secrets
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Protocol

PRIME = (1 << 128) + 51
CHUNK_BYTES = 16
ELEMENT_BYTES = 17
MAX_SECRET_BYTES = 0xFFFF

Share = tuple[int, bytes]


class ShamirError(ValueError):
    """Invalid sharing parameters or shares that cannot be combined."""


class _RandBelow(Protocol):
    def randbelow(self, exclusive_upper_bound: int, /) -> int: ...


def _chunks(secret: bytes) -> list[int]:
    return [
        int.from_bytes(secret[i : i + CHUNK_BYTES], "big")
        for i in range(0, max(len(secret), 1), CHUNK_BYTES)
    ]


def split(
    secret: bytes,
    t: int,
    n: int,
    rng: _RandBelow = _secrets,
    *,
    xs: Sequence[int] | None = None,
) -> list[Share]:
    """Shares ``(x, share)`` of ``secret``, any ``t`` of which reconstruct it.

    The shares are evaluations at ``x = 1..n``, or at the ``n`` distinct points ``xs``.
    """
    if not isinstance(secret, bytes | bytearray) or len(secret) > MAX_SECRET_BYTES:
        raise ShamirError(f"secret must be bytes of at most {MAX_SECRET_BYTES} bytes")
    if not 1 <= t <= n:
        raise ShamirError(f"need 1 <= t <= n, got t={t}, n={n}")
    points = list(range(1, n + 1)) if xs is None else [int(x) for x in xs]
    if len(points) != n:
        raise ShamirError(f"{len(points)} x-coordinates given for n={n} shares")
    _check_xs(points)
    header = len(secret).to_bytes(2, "big")
    # polys[c][i]: coefficient of x^i for chunk c; the constant term is the chunk itself.
    polys = [[chunk] + [rng.randbelow(PRIME) for _ in range(t - 1)] for chunk in _chunks(secret)]
    shares = []
    for x in points:
        body = []
        for coeffs in polys:
            acc = 0
            for c in reversed(coeffs):  # Horner; x is small, so acc * x is cheap
                acc = (acc * x + c) % PRIME
            body.append(acc.to_bytes(ELEMENT_BYTES, "big"))
        shares.append((x, header + b"".join(body)))
    return shares


def _check_xs(xs: Iterable[int]) -> None:
    seen: set[int] = set()
    for x in xs:
        if not 0 < x < PRIME:
            raise ShamirError(f"x-coordinate {x} is outside [1, p)")
        if x in seen:
            raise ShamirError(f"duplicate x-coordinate {x}")
        seen.add(x)


@lru_cache(maxsize=256)
def _lagrange_at_zero(xs: tuple[int, ...]) -> tuple[int, ...]:
    """Coefficients l_i with f(0) = sum_i l_i f(x_i) for deg f < len(xs)."""
    nums, dens = [], []
    for i, xi in enumerate(xs):
        num = den = 1
        for j, xj in enumerate(xs):
            if j != i:
                num = num * xj % PRIME
                den = den * (xj - xi) % PRIME
        nums.append(num)
        dens.append(den)
    # One modular inversion for all denominators (Montgomery's batch trick).
    prefix = [1]
    for d in dens:
        prefix.append(prefix[-1] * d % PRIME)
    inv = pow(prefix[-1], -1, PRIME)
    inverses = [0] * len(dens)
    for i in range(len(dens) - 1, -1, -1):
        inverses[i] = inv * prefix[i] % PRIME
        inv = inv * dens[i] % PRIME
    return tuple(n * v % PRIME for n, v in zip(nums, inverses, strict=True))


def _parse(share: bytes) -> tuple[int, list[int]]:
    if not isinstance(share, bytes | bytearray) or len(share) < 2:
        raise ShamirError("a share is at least 2 bytes")
    length = int.from_bytes(share[:2], "big")
    n_chunks = max(1, -(-length // CHUNK_BYTES))
    if len(share) != 2 + n_chunks * ELEMENT_BYTES:
        raise ShamirError(f"share of {len(share)} bytes does not match a {length}-byte secret")
    values = [
        int.from_bytes(share[2 + i * ELEMENT_BYTES : 2 + (i + 1) * ELEMENT_BYTES], "big")
        for i in range(n_chunks)
    ]
    if any(v >= PRIME for v in values):
        raise ShamirError("share value is not a field element")
    return length, values


def combine(shares: Sequence[Share], t: int) -> bytes:
    """The secret from at least ``t`` shares (the first ``t`` are used).

    Raises :class:`ShamirError` on fewer than ``t`` shares, duplicate x-coordinates or
    malformed shares. Shares from different secrets give a wrong secret, not an error.
    """
    if t < 1:
        raise ShamirError(f"threshold must be >= 1, got {t}")
    if len(shares) < t:
        raise ShamirError(f"need {t} shares to reconstruct, got {len(shares)}")
    _check_xs(x for x, _ in shares)
    used = list(shares)[:t]
    parsed = [_parse(s) for _, s in used]
    lengths = {length for length, _ in parsed}
    if len(lengths) != 1:
        raise ShamirError(f"shares disagree on the secret length: {sorted(lengths)}")
    length = lengths.pop()
    lambdas = _lagrange_at_zero(tuple(int(x) for x, _ in used))
    out = []
    for c in range(len(parsed[0][1])):
        value = sum(lam * vals[c] for lam, (_, vals) in zip(lambdas, parsed, strict=True))
        value %= PRIME
        size = min(CHUNK_BYTES, length - c * CHUNK_BYTES)
        if value >= 1 << (8 * size):
            raise ShamirError("reconstructed value does not fit the secret: inconsistent shares")
        out.append(value.to_bytes(size, "big"))
    return b"".join(out)
