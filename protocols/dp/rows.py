"""Row-level local DP for a released matrix: one row per individual (e.g. a node's soft
prediction), perturbed by its owner before it leaves the device.

* :class:`RowGaussian`: clip every row to L2 norm ``C``, add i.i.d. ``N(0, (σ·2C)²)`` per
  entry (the Gaussian mechanism; ``2C`` is the L2 diameter of the clipped ball, so
  replacing one row is covered). (ε, δ) per release from the RDP / PRV accountant, composed
  over releases (Mironov 2017).
* :class:`RandomizedResponse`: k-ary randomised response on each row's top class
  (Warner 1965; Kairouz, Oh, Viswanath 2016): the true class with probability
  ``e^ε / (e^ε + k − 1)``, otherwise one of the other ``k − 1`` uniformly; released as a
  one-hot row. Pure ε-DP per row and release, composed by :class:`PureDPAccountant`.

Threat model: local DP against everyone who sees the released matrix, per row (replace one
row's value). Rows are released with their position, so a row that is withheld (e.g. a
random subset of rows) gives no sampling amplification against that receiver: it sees
which rows are present. Anything else a row's owner derives from several individuals (a GNN
output depends on a node's neighbours) is covered only by group privacy. Noise from
numpy's PCG64 (:mod:`protocols.dp.rng`). In full: ``docs/protocols.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from protocols.dp.accounting import Accountant, AccountantKind, PrivacyAccountant, PureDPAccountant


def clip_rows(matrix: np.ndarray, clip_norm: float) -> np.ndarray:
    """Each row scaled to L2 norm at most ``clip_norm`` C (a float64 copy).

    Every clipped row's norm and entries are at most C: the float product ``C·x/‖x‖`` can
    land a few ULPs above C, above the sensitivity the accountant charges and the value
    bound a transport derives from C, so clipped rows are scaled to C·(1 − 2⁻⁴⁰) (ways of
    summing the norm differ by ULPs) and their entries clamped to C."""
    x = np.array(matrix, dtype=np.float64, copy=True)
    if x.ndim != 2:
        raise ValueError(f"expected a matrix, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("cannot clip rows with NaN or infinite entries")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x *= np.where(norms > clip_norm, clip_norm * (1 - 2.0**-40) / np.maximum(norms, 1e-300), 1)
    np.clip(x, -clip_norm, clip_norm, out=x)
    over = np.linalg.norm(x, axis=1) > clip_norm
    while np.any(over):
        x[over] *= np.nextafter(1.0, 0.0)
        over = np.linalg.norm(x, axis=1) > clip_norm
    return x


@dataclass(frozen=True)
class RowGaussian:
    """L2 row clipping to ``clip_norm`` C and Gaussian noise of std ``noise_multiplier·2C``."""

    clip_norm: float
    noise_multiplier: float

    name: ClassVar[str] = "row_gaussian"

    def __post_init__(self) -> None:
        if not (self.clip_norm > 0 and math.isfinite(self.clip_norm)):
            raise ValueError(f"clip_norm must be finite and > 0, got {self.clip_norm}")
        if not (self.noise_multiplier > 0 and math.isfinite(self.noise_multiplier)):
            raise ValueError(f"noise_multiplier must be finite and > 0: {self.noise_multiplier}")

    @property
    def noise_std(self) -> float:
        return self.noise_multiplier * 2.0 * self.clip_norm

    def apply(self, matrix: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = clip_rows(matrix, self.clip_norm)
        return x + rng.normal(0.0, self.noise_std, size=x.shape)

    def new_accountant(self, kind: AccountantKind, delta: float) -> Accountant:
        return PrivacyAccountant(kind, delta)

    def charge(self, accountant: Accountant, releases: int = 1) -> None:
        """``releases`` releases of every row (no amplification: see the module doc)."""
        assert isinstance(accountant, PrivacyAccountant)
        accountant.step(self.noise_multiplier, 1.0, releases)


@dataclass(frozen=True)
class RandomizedResponse:
    """k-ary randomised response on each row's argmax, released one-hot."""

    epsilon: float

    name: ClassVar[str] = "randomized_response"

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"epsilon must be finite and > 0, got {self.epsilon}")

    def keep_probability(self, classes: int) -> float:
        """P[the released class is the true one] = e^ε / (e^ε + k − 1)."""
        return 1.0 / (1.0 + (classes - 1) * math.exp(-self.epsilon))

    def respond(self, labels: np.ndarray, classes: int, rng: np.random.Generator) -> np.ndarray:
        """Perturbed class of each entry of ``labels`` (integers in ``[0, classes)``)."""
        y = np.asarray(labels, dtype=np.int64)
        if classes < 2:
            return y.copy()
        keep = rng.random(y.shape) < self.keep_probability(classes)
        other = (y + rng.integers(1, classes, size=y.shape)) % classes  # uniform over the rest
        return np.where(keep, y, other)

    def apply(self, matrix: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(matrix, dtype=np.float64)
        classes = x.shape[1]
        out = np.zeros_like(x)
        out[np.arange(len(x)), self.respond(x.argmax(axis=1), classes, rng)] = 1.0
        return out

    def new_accountant(self, kind: AccountantKind, delta: float) -> Accountant:
        return PureDPAccountant()

    def charge(self, accountant: Accountant, releases: int = 1) -> None:
        assert isinstance(accountant, PureDPAccountant)
        accountant.step(self.epsilon, releases)


ROW_MECHANISMS: dict[str, type] = {"gaussian": RowGaussian, "rr": RandomizedResponse}
