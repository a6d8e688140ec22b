"""DP-FedAvg: per-client L2 clipping + Gaussian noise on the sum of updates.

McMahan, Ramage, Talwar, Zhang, ICLR 2018 (DP-FedAvg); the clip-then-noise-the-sum form of
Andrew et al., NeurIPS 2021; distributed noise under secure aggregation after Kairouz, Liu,
Steinke, ICML 2021 (continuous Gaussian shares here, not discrete).

Client-level (ε, δ) DP of the released aggregate; sensitivity ``S = w_max·C``.
``mode="central"``: the server adds ``N(0, σ²S²)``, which protects from whoever sees its
output, not from the server. ``mode="distributed"``: each of the ``n`` expected clients adds
``N(0, σ²S²/n)``, so under ``secagg`` / ``ckks`` the server sees only the noised sum;
assumes honest clients, and dropouts or colluding clients weaken it (both accounted). Under
DP client weights are uniform or fixed and capped, and the sum is divided by a fixed public
denominator (``denominator="participants"`` is charged 2S). Against a server that chooses
the cohort (malicious mode) charge the fewest shares the clients enforce in any sum
(:func:`enforced_noise_multiplier`), not the driver's survivor count. Deviations: a fixed
clip norm; floating-point noise from numpy's PCG64. In full: ``docs/protocols.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from protocols.base import AggregateResult
from protocols.dp.accounting import Accountant, AccountantKind, PrivacyAccountant
from protocols.dp.rows import clip_rows

#: noise-share standard deviations covered by :meth:`ClipNoiseMechanism.entry_bound`
TAIL_SIGMAS = 10.0

Mode = Literal["central", "distributed"]
Weighting = Literal["uniform", "fixed"]
Denominator = Literal["expected", "participants"]


def clip_l2(vector: np.ndarray, clip_norm: float) -> np.ndarray:
    """``vector · min(1, C / ‖vector‖₂)`` (float64 copy; non-finite input is rejected); its
    norm and entries are at most C exactly (:func:`~protocols.dp.rows.clip_rows`)."""
    x = np.asarray(vector, dtype=np.float64).reshape(1, -1)
    if not np.all(np.isfinite(x)):
        raise ValueError("cannot clip a vector with NaN or infinite entries")
    return clip_rows(x, clip_norm)[0]


def enforced_noise_multiplier(
    noise_multiplier: float, min_summands: int, expected_clients: int, colluding: int = 0
) -> float:
    """σ_eff that distributed noise keeps when each sum holds at least ``min_summands`` shares.

    Each client adds ``N(0, σ²S²/n)`` (n = ``expected_clients``), so a sum of m honest
    shares carries ``σ²S²·m/n``; ``colluding`` shares are known to the adversary and do not
    count: ``σ·√(max(m − c, 0)/n)``. With m the minimum a client enforces (e.g.
    :meth:`protocols.secagg.SecAggregation.min_summands`), this holds against a server that
    chooses the cohort, whatever the driver counted.
    """
    sigma = float(noise_multiplier)
    m, n, c = int(min_summands), int(expected_clients), int(colluding)
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ValueError(f"noise_multiplier must be finite and >= 0, got {noise_multiplier}")
    if n < 1 or m < 0 or c < 0:
        raise ValueError(f"need expected_clients >= 1, min_summands, colluding >= 0: {n, m, c}")
    return sigma * math.sqrt(max(m - c, 0) / n)


@dataclass(frozen=True)
class ClipNoiseMechanism:
    """Per-client clipping to ``clip_norm`` and Gaussian noise of std ``noise_multiplier·S``.

    Use it through :class:`protocols.dp.aggregation.DPAggregation` with any transport, or
    call :meth:`client_apply` / :meth:`server_apply` yourself around an aggregation.
    """

    clip_norm: float
    noise_multiplier: float
    mode: Mode = "central"
    expected_clients: int | None = None
    weighting: Weighting = "uniform"
    max_weight: float = 1.0
    denominator: Denominator = "expected"
    expected_weight: float | None = None

    name: ClassVar[str] = "clip_noise"

    def __post_init__(self) -> None:
        if not (self.clip_norm > 0 and math.isfinite(self.clip_norm)):
            raise ValueError(f"clip_norm must be finite and > 0, got {self.clip_norm}")
        if not (self.noise_multiplier >= 0 and math.isfinite(self.noise_multiplier)):
            raise ValueError(f"noise_multiplier must be finite, >= 0: {self.noise_multiplier}")
        if self.mode not in ("central", "distributed"):
            raise ValueError(f"mode must be 'central' or 'distributed', got {self.mode!r}")
        if self.weighting not in ("uniform", "fixed"):
            raise ValueError(f"weighting must be 'uniform' or 'fixed', got {self.weighting!r}")
        if self.denominator not in ("expected", "participants"):
            raise ValueError(
                f"denominator must be 'expected' or 'participants': {self.denominator!r}"
            )
        if not (self.max_weight > 0 and math.isfinite(self.max_weight)):
            raise ValueError(f"max_weight must be finite and > 0, got {self.max_weight}")
        if self.expected_clients is not None and self.expected_clients < 1:
            raise ValueError(f"expected_clients must be >= 1, got {self.expected_clients}")
        if self.mode == "distributed" and self.expected_clients is None:
            raise ValueError("distributed noise needs expected_clients (the noise is split n ways)")
        if self.denominator == "expected" and self._fixed_denominator() is None:
            raise ValueError(
                "denominator='expected' needs expected_weight (or expected_clients with "
                "uniform weights); use denominator='participants' to divide by the realised "
                "total weight"
            )
        if self.expected_weight is not None and not self.expected_weight > 0:
            raise ValueError(f"expected_weight must be > 0, got {self.expected_weight}")

    # -- sizes -------------------------------------------------------------------------
    @property
    def sensitivity(self) -> float:
        """L2 sensitivity S of the weighted sum under adding/removing one client."""
        return (self.max_weight if self.weighting == "fixed" else 1.0) * self.clip_norm

    @property
    def noise_std(self) -> float:
        """Std of the Gaussian noise the full sum carries (σ·S)."""
        return self.noise_multiplier * self.sensitivity

    @property
    def share_std(self) -> float:
        """Std of one client's noise share in distributed mode (σ·S/√n)."""
        if self.mode != "distributed":
            return 0.0
        assert self.expected_clients is not None
        return self.noise_std / math.sqrt(self.expected_clients)

    @property
    def max_client_weight(self) -> float:
        """The largest weight a client aggregates with (1, or ``max_weight``)."""
        return self.max_weight if self.weighting == "fixed" else 1.0

    def entry_bound(self, tail_sigmas: float = TAIL_SIGMAS) -> float:
        """A bound on every entry ``|w·v_i|`` of what :meth:`client_apply` hands the
        transport: ``w_max·C`` (the clip bounds each coordinate), plus ``tail_sigmas``
        standard deviations of the noise share in distributed mode (exceeded with
        probability below 2e-23 per entry at 10σ; a transport that checks the bound then
        refuses the round rather than wrap)."""
        bound = self.max_client_weight * self.clip_norm
        if self.mode == "distributed" and self.noise_multiplier > 0:
            bound += tail_sigmas * self.share_std
        return bound

    @property
    def requires_server_output(self) -> bool:
        """Central noise is added by the output holder, which must be the server."""
        return self.mode == "central"

    def _fixed_denominator(self) -> float | None:
        if self.expected_weight is not None:
            return float(self.expected_weight)
        if self.weighting == "uniform" and self.expected_clients is not None:
            return float(self.expected_clients)
        return None

    # -- the transform -------------------------------------------------------------------
    def client_weight(self, weight: float) -> float:
        """The weight the client uses under DP (1, or ``min(weight, max_weight)``)."""
        if self.weighting == "uniform":
            return 1.0
        weight = float(weight)
        if not (weight > 0 and math.isfinite(weight)):
            raise ValueError(f"fixed weights must be finite and > 0, got {weight}")
        return min(weight, self.max_weight)

    def client_apply(
        self, vector: np.ndarray, weight: float, rng: np.random.Generator
    ) -> tuple[np.ndarray, float]:
        """Clip (and, in distributed mode, add this client's noise share).

        Returns ``(v, w)`` such that the protocol's ``w·v`` equals
        ``w·clip(x) + N(0, σ²S²/n)`` (distributed) or ``w·clip(x)`` (central).
        """
        x = clip_l2(vector, self.clip_norm)
        w = self.client_weight(weight)
        if self.mode == "distributed" and self.noise_multiplier > 0:
            x += rng.normal(0.0, self.share_std, size=x.shape) / w
        return x, w

    def server_apply(self, result: AggregateResult, rng: np.random.Generator) -> AggregateResult:
        """Add central noise to the sum (central mode) and divide by the chosen denominator.

        Must be called once per round on the output holder's result: each call draws
        fresh noise, and averaging several calls would average the noise away.
        """
        total = np.asarray(result.mean, dtype=np.float64) * float(result.total_weight)
        if self.mode == "central" and self.noise_multiplier > 0:
            total = total + rng.normal(0.0, self.noise_std, size=total.shape)
        if self.denominator == "expected":
            denom = self._fixed_denominator()
            assert denom is not None
        else:
            denom = float(result.total_weight)
        return AggregateResult(total / denom, denom, result.participants)

    # -- accounting ----------------------------------------------------------------------
    def effective_noise_multiplier(
        self, n_survivors: int | None = None, colluding: int = 0
    ) -> float:
        """Noise multiplier of one round relative to the accounted sensitivity.

        Distributed mode: ``σ·√((m − t)/n)`` for ``m`` surviving clients (default ``n``) and
        ``t`` colluding clients whose shares the adversary knows. ``denominator=
        "participants"`` halves it (replace-one sensitivity 2S).
        """
        sigma = self.noise_multiplier
        if self.mode == "distributed":
            assert self.expected_clients is not None
            m = self.expected_clients if n_survivors is None else int(n_survivors)
            sigma = enforced_noise_multiplier(sigma, m, self.expected_clients, colluding)
        # central mode: the server draws the noise; colluding clients cannot remove it
        if self.denominator == "participants":
            sigma /= 2.0
        return sigma

    def new_accountant(self, kind: AccountantKind, delta: float) -> PrivacyAccountant:
        return PrivacyAccountant(kind, delta)

    def account_round(
        self,
        accountant: Accountant,
        *,
        sample_rate: float,
        survivors: int,
        dim: int,
        colluding: int = 0,
    ) -> None:
        assert isinstance(accountant, PrivacyAccountant)
        self.account(accountant, sample_rate, n_survivors=survivors, colluding=colluding)

    def account(
        self,
        accountant: PrivacyAccountant,
        sample_rate: float,
        n_survivors: int | None = None,
        colluding: int = 0,
    ) -> float:
        """Record one round in ``accountant``; returns the noise multiplier it charged.

        ``sample_rate`` is the per-round client sampling probability q. Use q < 1 only for
        an adversary that does not learn which clients took part (an observer of the
        released model); the server, which sees the participant list, gets q = 1.
        """
        if self.mode == "distributed" and n_survivors == 0:
            return float("inf")  # nobody took part: no update and no noise were released
        if self.denominator == "participants" and sample_rate < 1:
            raise ValueError(
                "denominator = 'participants' is accounted as replace-one (sensitivity 2S) "
                "at q = 1; subsampling's add/remove bound, with the count released, does not "
                "cover it: use denominator = 'expected' with q < 1"
            )
        sigma = self.effective_noise_multiplier(n_survivors, colluding)
        accountant.step(sigma, sample_rate)
        return sigma
