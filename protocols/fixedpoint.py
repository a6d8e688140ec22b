"""Fixed-point encoding of real vectors into Z_2^w (w = 64 or 32) for masked sums, with a
headroom check, and the choice of the smallest ring that holds a sum (:func:`ring_codec`).

``encode(x) = round(x * 2^frac_bits) mod 2^w`` (two's complement); numpy's unsigned
arithmetic wraps modulo 2^w, so masked sums need no explicit reduction, and ``decode`` reads
a sum as a signed integer. Each summand adds at most ``2^-(frac_bits+1)`` of error per
coordinate. The codec refuses a ``bound`` whose ``max_summands`` encodings could wrap and, on
encode, any ``|x| > bound`` (without a declared bound: the largest the headroom allows).
This protects correctness for honest clients only: the masked sum hides inputs, so the
server cannot check a malicious client's range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from protocols.base import ProtocolError

WORD_BITS = (32, 64)
#: default precision of :func:`ring_codec`: one summand's entries are resolved to at least
#: ``bound * 2^-20`` (about 1e-6 of the bound), so a 32-bit ring holds 1024 to 2047 summands
DEFAULT_PRECISION_BITS = 20
#: fractional bits when no value bound is known (64-bit ring, the headroom's largest bound)
DEFAULT_FRAC_BITS = 24


class FixedPointOverflowError(ProtocolError, OverflowError):
    """A value or a sum would not fit the fixed-point range (raised before any wrap-around)."""


def _per_summand_limit(max_summands: int, word_bits: int) -> float:
    """Largest float q with ``max_summands * q <= 2^(word_bits-1) - 1`` (exactly, as ints)."""
    limit = ((1 << (word_bits - 1)) - 1) // max_summands
    q = float(limit)
    while int(q) > limit:
        q = math.nextafter(q, 0.0)
    return q


def _check_finest_args(bound: float, word_bits: int) -> None:
    if not (math.isfinite(bound) and bound > 0):
        raise ValueError(f"bound must be a finite positive float, got {bound!r}")
    if word_bits not in WORD_BITS:
        raise ValueError(f"word_bits must be one of {WORD_BITS}, got {word_bits!r}")


@dataclass(frozen=True)
class FixedPointCodec:
    """Encode floats as ``round(x * 2^frac_bits)`` in Z_2^word_bits; sums of up to
    ``max_summands``.

    ``bound``: declared max ``|x|`` of any entry of one summand (for weighted averages that is
    max of ``|w_i x_i|`` and ``w_i``); ``None`` = the largest bound the headroom allows.
    ``word_bits``: 64 (uint64 words) or 32 (uint32).
    """

    frac_bits: int = 24
    bound: float | None = None
    max_summands: int = 1
    word_bits: int = 64
    _limit: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.word_bits not in WORD_BITS:
            raise ValueError(f"word_bits must be one of {WORD_BITS}, got {self.word_bits!r}")
        top = self.word_bits - 2
        if not isinstance(self.frac_bits, int) or not 0 <= self.frac_bits <= top:
            raise ValueError(f"frac_bits must be an int in [0, {top}], got {self.frac_bits!r}")
        if not isinstance(self.max_summands, int) or self.max_summands < 1:
            raise ValueError(f"max_summands must be a positive int, got {self.max_summands!r}")
        q_max = _per_summand_limit(self.max_summands, self.word_bits)
        if self.bound is None:
            limit = q_max / self.scale  # exact: scale is a power of two
        else:
            if not math.isfinite(self.bound) or self.bound < 0:
                raise ValueError(f"bound must be a finite non-negative float, got {self.bound}")
            if np.rint(self.bound * self.scale) > q_max:
                raise FixedPointOverflowError(
                    f"fixed-point headroom exceeded: {self.max_summands} summands x bound "
                    f"{self.bound:g} x 2^{self.frac_bits} does not fit below "
                    f"2^{self.word_bits - 1}; lower frac_bits, the value bound or the number "
                    "of clients"
                )
            limit = float(self.bound)
        object.__setattr__(self, "_limit", limit)

    @classmethod
    def finest(cls, bound: float, max_summands: int, word_bits: int = 64) -> FixedPointCodec:
        """The codec with the most fractional bits whose headroom holds ``max_summands``
        entries of ``|x| <= bound`` (refuses if even ``frac_bits = 0`` does not fit)."""
        _check_finest_args(bound, word_bits)
        for frac_bits in range(word_bits - 2, -1, -1):
            try:
                return cls(frac_bits, bound, max_summands, word_bits)
            except FixedPointOverflowError:
                continue
        return cls(0, bound, max_summands, word_bits)  # raises the headroom error

    @classmethod
    def for_sum_bound(
        cls, sum_bound: float, max_summands: int, word_bits: int = 64
    ) -> FixedPointCodec:
        """The finest codec for sums the CALLER guarantees to stay within ``|sum| <=
        sum_bound`` entrywise (e.g. a receiver that knows a bound on its own sum).

        Partial sums may wrap modulo 2^w harmlessly; only the total must fit, so the
        headroom is that of ONE summand plus the rounding of ``max_summands`` (each within
        half a step), not ``max_summands`` times the bound. Each entry is still checked
        against ``|x| <= sum_bound`` on encode. Nothing checks the guarantee itself.
        """
        _check_finest_args(sum_bound, word_bits)
        if not isinstance(max_summands, int) or max_summands < 1:
            raise ValueError(f"max_summands must be a positive int, got {max_summands!r}")
        top = (1 << (word_bits - 1)) - 1 - max_summands
        for frac_bits in range(word_bits - 2, -1, -1):
            if np.rint(sum_bound * 2.0**frac_bits) <= top:
                return cls(frac_bits, sum_bound, 1, word_bits)
        raise FixedPointOverflowError(
            f"fixed-point headroom exceeded: a sum bound of {sum_bound:g} does not fit "
            f"below 2^{word_bits - 1} even without fractional bits"
        )

    @property
    def dtype(self) -> np.dtype:
        """The unsigned word type of encodings (uint64 or uint32)."""
        return np.dtype(np.uint64 if self.word_bits == 64 else np.uint32)

    @property
    def _signed(self) -> np.dtype:
        return np.dtype(np.int64 if self.word_bits == 64 else np.int32)

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
                f"overflow 2^{self.word_bits - 1}: clip the input, raise the declared bound or "
                "lower frac_bits"
            )

    def encode(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``x`` (float) as words of :attr:`dtype`; raises before encoding anything out of
        range.

        ``out``: a contiguous array of :attr:`dtype` and ``x``'s shape to write into; with
        64-bit words ``x`` may be ``out.view(np.float64)`` itself (in place, no temporary).
        """
        arr = np.asarray(x, dtype=np.float64)
        lo, hi = (float(arr.min()), float(arr.max())) if arr.size else (0.0, 0.0)
        if not (math.isfinite(lo) and math.isfinite(hi)):  # min/max propagate NaN
            raise ValueError("cannot fixed-point encode NaN or infinite values")
        self.check_peak(max(-lo, hi))
        if out is None:
            out = np.empty(arr.shape, dtype=self.dtype)
        elif out.dtype != self.dtype or out.shape != arr.shape or not out.flags.c_contiguous:
            raise ValueError(f"out must be a contiguous {self.dtype} array of shape {arr.shape}")
        # exact: scale is a power of two; in place when the words are float64-sized
        scaled = np.multiply(
            arr, self.scale, out=out.view(np.float64) if out.itemsize == 8 else None
        )
        np.rint(scaled, out=out.view(self._signed), casting="unsafe")  # |value| range checked
        return out

    def decode(self, total: np.ndarray) -> np.ndarray:
        """A sum of encodings (words of :attr:`dtype`) back to float64 (two's complement)."""
        arr = np.asarray(total)
        if arr.dtype != self.dtype:
            raise TypeError(f"decode expects {self.dtype} words, got {arr.dtype}")
        return arr.view(self._signed).astype(np.float64) / self.scale


def ring_codec(
    bound: float | None,
    max_summands: int,
    *,
    ring_bits: int | None = None,
    precision_bits: int = DEFAULT_PRECISION_BITS,
    frac_bits: int | None = None,
) -> FixedPointCodec:
    """The codec of a masked sum of ``max_summands`` vectors whose entries satisfy
    ``|x| <= bound``: the smallest ring Z_2^w (``ring_bits=None``: 32, else 64; or the
    ring named) whose finest codec resolves one entry to ``bound * 2^-precision_bits`` or
    finer, with every fractional bit the headroom leaves (``frac_bits`` fixes them instead).

    The ring holds the worst case exactly: ``max_summands`` entries all at ``±bound`` sum to
    at most ``2^(w-1) - 1`` in magnitude, so no sum of honest inputs wraps, and the decoded
    sum is the exact sum of the rounded entries. That needs ``1 + log2(max_summands) +
    precision_bits`` bits, up to one more depending on where the bound falls between powers
    of two, whatever its size: with the default 20 bits, 32-bit words hold 1024 to 2047
    summands. ``bound=None`` (nothing known about the values): the 64-bit ring with
    ``frac_bits`` (default 24) and the largest bound its headroom allows; a 32-bit ring is
    refused then (``ValueError``). Raises :class:`FixedPointOverflowError` naming what to
    change when no allowed ring fits.
    """
    if ring_bits is not None and ring_bits not in WORD_BITS:
        raise ValueError(f"ring_bits must be one of {WORD_BITS} or None, got {ring_bits!r}")
    if not isinstance(precision_bits, int) or not 0 <= precision_bits <= 62:
        raise ValueError(f"precision_bits must be an int in [0, 62], got {precision_bits!r}")
    if bound is None:
        if ring_bits == 32:
            raise ValueError(
                "a 32-bit ring needs a bound on the values (declare one, or clip them: "
                "without it only the 64-bit ring's headroom protects the sum)"
            )
        f = DEFAULT_FRAC_BITS if frac_bits is None else frac_bits
        return FixedPointCodec(f, None, max_summands, 64)
    _check_finest_args(bound, ring_bits or 64)
    rings = WORD_BITS if ring_bits is None else (ring_bits,)
    needed = bound * 2.0**-precision_bits
    reasons = []
    for w in rings:
        try:
            if frac_bits is not None:
                return FixedPointCodec(frac_bits, bound, max_summands, w)
            codec = FixedPointCodec.finest(bound, max_summands, w)
        except FixedPointOverflowError as err:
            reasons.append(f"{w} bits: {err}")
            continue
        except ValueError as err:  # frac_bits beyond this ring
            reasons.append(f"{w} bits: {err}")
            continue
        if codec.resolution <= needed:
            return codec
        reasons.append(
            f"{w} bits: {max_summands} summands of |x| <= {bound:g} leave {codec.frac_bits} "
            f"fractional bits (steps of 2^-{codec.frac_bits}), coarser than {bound:g} x "
            f"2^-{precision_bits}"
        )
    raise FixedPointOverflowError(
        "no ring holds the masked sum: " + "; ".join(reasons) + ". Lower the precision, the "
        "value bound or the number of clients, or allow the 64-bit ring"
    )
