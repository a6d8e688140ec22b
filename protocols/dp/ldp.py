"""Local DP for per-user updates: clip each coordinate, add independent noise per coordinate.

For FGL recommenders in which every user uploads gradients of its own rows: FedGNN (Wu et
al., arXiv 2102.04925: ``clip(g, δ) + Laplace(0, λ)``, ε = 2δ/λ per coordinate) and FeSoG
(Liu et al., ACM TIST 2022: Laplace noise of scale λ·|mean(g)|).

Threat model: local DP, against everyone who sees the perturbed update (the user perturbs it
before it leaves the device); the unit is the user's whole update in one round.
:class:`LaplaceLDP` (L∞ clip δ; ε per update with ``per="vector"``, per coordinate with
``per="coordinate"``), :class:`GaussianLDP` (L2 clip, accounted by Opacus at sample rate 1)
and FeSoG's :class:`HeuristicLDP` (data-dependent scale: **no** guarantee, ε = None).
Deviation from both reference codes: an independent draw per coordinate, not one scalar per
tensor. Each is a :class:`protocols.dp.aggregation.UpdateMechanism`. In full:
``docs/protocols.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from protocols.base import AggregateResult
from protocols.dp.accounting import (
    Accountant,
    AccountantKind,
    PrivacyAccountant,
    PureDPAccountant,
)
from protocols.dp.clip_noise import clip_l2

Per = Literal["vector", "coordinate"]


def clip_coordinates(vector: np.ndarray, bound: float) -> np.ndarray:
    """Clip every coordinate to [−bound, bound] (L∞ clipping), as a float64 copy."""
    x = np.asarray(vector, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("cannot clip a vector with NaN or infinite entries")
    return np.clip(x, -bound, bound)


def fedgnn_epsilon(clip: float, lam: float) -> float:
    """FedGNN's budget ε = 2δ/λ for L∞ clip δ and Laplace scale λ (per coordinate)."""
    return 2.0 * clip / lam


class _LocalMechanism:
    """UpdateMechanism plumbing shared by the LDP mechanisms."""

    name: ClassVar[str] = "ldp"
    requires_server_output: ClassVar[bool] = False

    def apply(self, vector: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def client_apply(
        self, vector: np.ndarray, weight: float, rng: np.random.Generator
    ) -> tuple[np.ndarray, float]:
        """Perturb the update locally; the weight is passed through (post-processing)."""
        return self.apply(vector, rng), float(weight)

    def server_apply(self, result: AggregateResult, rng: np.random.Generator) -> AggregateResult:
        """Nothing to do at the output holder: the noise is already in every update."""
        return result

    def new_accountant(self, kind: AccountantKind, delta: float) -> Accountant:
        """Pure-DP composition (Laplace, heuristic); Gaussian LDP overrides it."""
        return PureDPAccountant()

    def account_round(
        self,
        accountant: Accountant,
        *,
        sample_rate: float,
        survivors: int,
        dim: int,
        colluding: int = 0,
    ) -> None:
        """Each client releases its ``dim``-long update once per round it takes part in
        (local DP: no amplification, no collusion to account); a round nobody took part in
        released nothing."""
        if survivors > 0:
            self.charge(accountant, dim)

    def charge(self, accountant: Accountant, dim: int) -> None:
        """One release of a ``dim``-long update."""
        raise NotImplementedError


@dataclass(frozen=True)
class LaplaceLDP(_LocalMechanism):
    """L∞ clipping to ``clip`` and i.i.d. Laplace noise per coordinate: pure ε-LDP."""

    clip: float
    epsilon: float
    per: Per = "vector"

    name: ClassVar[str] = "ldp_laplace"

    def __post_init__(self) -> None:
        if not (self.clip > 0 and math.isfinite(self.clip)):
            raise ValueError(f"clip must be finite and > 0, got {self.clip}")
        if not self.epsilon > 0:
            raise ValueError(f"epsilon must be > 0, got {self.epsilon}")
        if self.per not in ("vector", "coordinate"):
            raise ValueError(f"per must be 'vector' or 'coordinate', got {self.per!r}")

    @classmethod
    def fedgnn(
        cls, clip: float = 0.1, lam: float | None = None, epsilon: float = 1.0
    ) -> LaplaceLDP:
        """FedGNN's rule: Laplace scale λ with ε = 2δ/λ **per coordinate**.

        Give ``lam`` (ε follows) or ``epsilon`` (λ = 2δ/ε). Defaults: FedGNN ``const.py``
        CLIP = 0.1, EPS = 1.
        """
        eps = fedgnn_epsilon(clip, lam) if lam is not None else epsilon
        return cls(clip=clip, epsilon=eps, per="coordinate")

    def scale(self, dim: int) -> float:
        """Laplace scale b per coordinate for a d-dimensional update."""
        if self.per == "coordinate":
            return 2.0 * self.clip / self.epsilon
        return 2.0 * self.clip * int(dim) / self.epsilon

    def epsilon_per_release(self, dim: int) -> float:
        """ε of releasing one whole d-dimensional update."""
        return self.epsilon * (int(dim) if self.per == "coordinate" else 1)

    def apply(self, vector: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = clip_coordinates(vector, self.clip)
        return x + rng.laplace(0.0, self.scale(x.size), size=x.shape)

    def account(self, ledger: PureDPAccountant, dim: int, releases: int = 1) -> None:
        """Charge ``releases`` updates of dimension ``dim`` (basic composition)."""
        ledger.step(self.epsilon_per_release(dim), releases)

    def charge(self, accountant: Accountant, dim: int) -> None:
        assert isinstance(accountant, PureDPAccountant)
        self.account(accountant, dim)


@dataclass(frozen=True)
class GaussianLDP(_LocalMechanism):
    """L2 clipping to ``clip_norm`` C and i.i.d. N(0, (z·2C)²) per coordinate.

    (ε, δ)-LDP per round from the accountant (sample rate 1, noise multiplier z: the L2
    diameter of the clipped domain is 2C). Composition over rounds is RDP/PRV, not linear.
    """

    clip_norm: float
    noise_multiplier: float

    name: ClassVar[str] = "ldp_gaussian"

    def __post_init__(self) -> None:
        if not (self.clip_norm > 0 and math.isfinite(self.clip_norm)):
            raise ValueError(f"clip_norm must be finite and > 0, got {self.clip_norm}")
        if not self.noise_multiplier > 0:
            raise ValueError(f"noise_multiplier must be > 0, got {self.noise_multiplier}")

    @property
    def noise_std(self) -> float:
        return self.noise_multiplier * 2.0 * self.clip_norm

    def apply(self, vector: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = clip_l2(vector, self.clip_norm).reshape(np.shape(vector))
        return x + rng.normal(0.0, self.noise_std, size=x.shape)

    def account(self, accountant: PrivacyAccountant, releases: int = 1) -> None:
        """Charge ``releases`` updates: every user releases every round (q = 1)."""
        accountant.step(self.noise_multiplier, 1.0, releases)

    def new_accountant(self, kind: AccountantKind, delta: float) -> Accountant:
        return PrivacyAccountant(kind, delta)

    def charge(self, accountant: Accountant, dim: int) -> None:
        assert isinstance(accountant, PrivacyAccountant)
        self.account(accountant)

    def epsilon(
        self, delta: float, releases: int = 1, kind: Literal["rdp", "prv"] = "rdp"
    ) -> float:
        acc = PrivacyAccountant(kind, delta)
        self.account(acc, releases)
        return acc.epsilon()


@dataclass(frozen=True)
class HeuristicLDP(_LocalMechanism):
    """FeSoG's "dynamic" Laplace noise: scale s = λ·|mean(g)|, then clip to ±δ, add noise.

    Mirrors ``FeSoG/user.py::LDP`` (the mean is taken before clipping; defaults δ = 0.3,
    λ = 0.1) except that each coordinate gets its own draw. Call it per tensor to reproduce
    FeSoG's per-parameter scale. The scale is data-dependent and unbounded below, so this
    gives **no** differential-privacy guarantee: :attr:`epsilon` is ``None``.
    """

    clip: float = 0.3
    lam: float = 0.1

    name: ClassVar[str] = "ldp_heuristic"
    epsilon: ClassVar[None] = None

    def apply(self, vector: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        g = np.asarray(vector, dtype=np.float64)
        scale = self.lam * abs(float(np.mean(g))) if g.size else 0.0
        x = clip_coordinates(g, self.clip)
        if scale > 0:
            x = x + rng.laplace(0.0, scale, size=x.shape)
        return x

    def account(self, ledger: PureDPAccountant, releases: int = 1) -> None:
        """Record releases without a guarantee: the ledger's ε becomes ``None``."""
        ledger.step(None, releases)

    def charge(self, accountant: Accountant, dim: int) -> None:
        assert isinstance(accountant, PureDPAccountant)
        self.account(accountant)
