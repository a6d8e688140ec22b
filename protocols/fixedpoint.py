"""Fixed-point encoding of real vectors into Z_2^64 for masked sums, with a headroom check.

``encode(x) = round(x * 2^frac_bits) mod 2^64`` (two's complement); numpy uint64 arithmetic
wraps modulo 2^64, so masked sums need no explicit reduction. ``decode`` reads a sum back as
a signed int64 and divides by ``2^frac_bits``. Round-to-nearest adds at most
``2^-(frac_bits+1)`` of error per summand and coordinate.

The sum of ``max_summands`` encodings is exact (no wrap-around) when every encoded entry is
bounded by ``bound``: the codec refuses at construction a ``bound`` with
``max_summands * round(bound * 2^frac_bits) > 2^63 - 1`` and refuses on encode any entry
with ``|x| > bound``. Without a declared bound it uses the largest one the headroom allows.
This protects correctness for honest clients only: the masked sum hides inputs, so the
server cannot check a malicious client's range (Flower merely warns on overflow).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from protocols.base import ProtocolError

_INT64_MAX = (1 << 63) - 1


class FixedPointOverflowError(ProtocolError, OverflowError):
    """A value or a sum would not fit the fixed-point range (raised before any wrap-around)."""


def _per_summand_limit(max_summands: int) -> float:
    """Largest float q with ``max_summands * q <= 2^63 - 1`` (exactly, as integers)."""
    limit = _INT64_MAX // max_summands
    q = float(limit)
    while int(q) > limit:
        q = math.nextafter(q, 0.0)
    return q


@dataclass(frozen=True)
class FixedPointCodec:
    """Encode floats as ``round(x * 2^frac_bits)`` in Z_2^64; sums of up to ``max_summands``.

    ``bound``: declared max ``|x|`` of any entry of one summand (for weighted averages that is
    max of ``|w_i x_i|`` and ``w_i``); ``None`` = the largest bound the headroom allows.
    """

    frac_bits: int = 24
    bound: float | None = None
    max_summands: int = 1
    _limit: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.frac_bits, int) or not 0 <= self.frac_bits <= 62:
            raise ValueError(f"frac_bits must be an int in [0, 62], got {self.frac_bits!r}")
        if not isinstance(self.max_summands, int) or self.max_summands < 1:
            raise ValueError(f"max_summands must be a positive int, got {self.max_summands!r}")
        q_max = _per_summand_limit(self.max_summands)
        if self.bound is None:
            limit = q_max / self.scale  # exact: scale is a power of two
        else:
            if not math.isfinite(self.bound) or self.bound < 0:
                raise ValueError(f"bound must be a finite non-negative float, got {self.bound}")
            if np.rint(self.bound * self.scale) > q_max:
                raise FixedPointOverflowError(
                    f"fixed-point headroom exceeded: {self.max_summands} summands x bound "
                    f"{self.bound:g} x 2^{self.frac_bits} does not fit below 2^63; lower "
                    "frac_bits, the value bound or the number of clients"
                )
            limit = float(self.bound)
        object.__setattr__(self, "_limit", limit)

    @property
    def scale(self) -> float:
        return float(1 << self.frac_bits)

    @property
    def resolution(self) -> float:
        """Quantization step ``2^-frac_bits``."""
        return 1.0 / self.scale

    @property
    def effective_bound(self) -> float:
        """The bound enforced on encode (declared, or the largest the headroom allows)."""
        return self._limit

    def check_peak(self, peak: float) -> None:
        """Raise :class:`FixedPointOverflowError` if an input with max ``|x|`` = ``peak``
        could make a sum of ``max_summands`` encodings overflow."""
        if not peak <= self._limit:  # also catches NaN
            raise FixedPointOverflowError(
                f"input max |x| = {peak:g} exceeds the fixed-point bound {self._limit:g} "
                f"({self.max_summands} summands, frac_bits={self.frac_bits}); a sum could "
                "overflow 2^63: clip the input, raise the declared bound or lower frac_bits"
            )

    def encode(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``x`` (float) as uint64 words; raises before encoding anything out of range.

        ``out``: a contiguous uint64 array of ``x``'s shape to write into; ``x`` may be
        ``out.view(np.float64)`` itself (encoding in place, no temporary).
        """
        arr = np.asarray(x, dtype=np.float64)
        lo, hi = (float(arr.min()), float(arr.max())) if arr.size else (0.0, 0.0)
        if not (math.isfinite(lo) and math.isfinite(hi)):  # min/max propagate NaN
            raise ValueError("cannot fixed-point encode NaN or infinite values")
        self.check_peak(max(-lo, hi))
        if out is None:
            out = np.empty(arr.shape, dtype=np.uint64)
        elif out.dtype != np.uint64 or out.shape != arr.shape or not out.flags.c_contiguous:
            raise ValueError(f"out must be a contiguous uint64 array of shape {arr.shape}")
        scaled = out.view(np.float64)
        np.multiply(arr, self.scale, out=scaled)  # exact: scale is a power of two
        np.rint(scaled, out=out.view(np.int64), casting="unsafe")  # |value| < 2^63 checked
        return out

    def decode(self, total: np.ndarray) -> np.ndarray:
        """A uint64 sum of encodings back to float64 (two's complement)."""
        arr = np.asarray(total)
        if arr.dtype != np.uint64:
            raise TypeError(f"decode expects uint64 words, got {arr.dtype}")
        return arr.view(np.int64).astype(np.float64) / self.scale
