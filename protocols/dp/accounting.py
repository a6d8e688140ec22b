"""Privacy accounting: Opacus' RDP / PRV accountants, and pure-DP composition for LDP.

One interface, :class:`Accountant` (after Opacus' ``IAccountant``: ``kind``, ``delta``,
``epsilon(delta)``, ``len``, ``state_dict``, ``report``), and two ledgers:
:class:`PrivacyAccountant`, (ε, δ) of (Poisson-subsampled) Gaussian mechanisms by Opacus
(``"rdp"``: Mironov 2017; ``"prv"``: Gopi, Lee, Wutschitz 2021) for DP-FedAvg rounds,
DP-SGD steps and Gaussian LDP; :class:`PureDPAccountant`, pure ε-DP releases (Laplace LDP,
EdgeRand, LapGraph) by basic composition or the advanced-composition bound of Kairouz, Oh,
Viswanath (ICML 2015, Thm. 3.5). A release without a guarantee makes ε ``None``. ε always
comes from the accountant over the whole history, never from adding per-round ε. Opacus is
imported lazily so that ``import protocols.dp`` stays cheap.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from typing import Any, Literal

AccountantKind = Literal["rdp", "prv"]
KINDS: tuple[str, ...] = ("rdp", "prv")


def _opacus_accountant(kind: str) -> Any:
    if kind == "rdp":
        from opacus.accountants import RDPAccountant

        return RDPAccountant()
    if kind == "prv":
        from opacus.accountants import PRVAccountant

        return PRVAccountant()
    raise ValueError(f"unknown accountant kind {kind!r}; expected one of {KINDS}")


def _check_delta(delta: float) -> float:
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    return delta


class Accountant(ABC):
    """What every privacy ledger offers: ε at a δ over everything recorded so far.

    ``kind`` names the accounting (``"rdp"``, ``"prv"``, ``"pure-dp"``); ``delta`` is the δ
    at which :meth:`report` states ε (0 for pure DP). Recording is mechanism-specific
    (``step``): a mechanism charges the ledger it asked for.
    """

    kind: str
    delta: float

    @abstractmethod
    def epsilon(self, delta: float | None = None) -> float | None:
        """ε at ``delta`` (default :attr:`delta`); ``None`` if a release had no guarantee."""

    @abstractmethod
    def __len__(self) -> int:
        """Total number of recorded releases."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (for result files and checkpoints)."""

    def report(self) -> dict[str, Any]:
        """``{"epsilon", "delta", "accountant"}`` for a result file."""
        return {"epsilon": self.epsilon(), "delta": self.delta, "accountant": self.kind}


class PrivacyAccountant(Accountant):
    """(ε, δ) spent by a sequence of Poisson-subsampled Gaussian mechanisms (Opacus).

    Each step is one release of ``sum + N(0, (σ·Δ)²)`` where Δ is the L2 sensitivity of the
    sum and σ = ``noise_multiplier``; ``sample_rate`` q is the probability that a given
    individual takes part in the step (Poisson sampling). Amplification by sampling (q < 1)
    holds only against an adversary who does not learn who took part; account with q = 1
    against one who does (e.g. the server in federated learning sees the participant list).
    """

    def __init__(self, kind: AccountantKind = "rdp", delta: float = 1e-5) -> None:
        self.kind = kind
        self.delta = _check_delta(delta)
        self._accountant = _opacus_accountant(kind)

    @property
    def history(self) -> list[tuple[float, float, int]]:
        """Opacus-format history: ``(noise_multiplier, sample_rate, steps)`` runs."""
        return list(self._accountant.history)

    def step(self, noise_multiplier: float, sample_rate: float, steps: int = 1) -> None:
        """Record ``steps`` releases with the given noise multiplier and sample rate."""
        sigma, q, steps = float(noise_multiplier), float(sample_rate), int(steps)
        if not sigma >= 0.0 or not math.isfinite(sigma):
            raise ValueError(f"noise_multiplier must be finite and >= 0, got {noise_multiplier}")
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"sample_rate must be in [0, 1], got {sample_rate}")
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        if steps == 0 or q == 0.0:
            return
        history = self._accountant.history
        if history and history[-1][0] == sigma and history[-1][1] == q:
            history[-1] = (sigma, q, history[-1][2] + steps)
        else:
            history.append((sigma, q, steps))

    def epsilon(self, delta: float | None = None) -> float:
        """ε at ``delta`` (default: the accountant's δ) for everything recorded so far."""
        delta = self.delta if delta is None else _check_delta(delta)
        history = self._accountant.history
        if not history:
            return 0.0
        if any(sigma == 0.0 for sigma, _, _ in history):
            return math.inf  # a noiseless release: no finite guarantee
        with warnings.catch_warnings():
            # PRV at q = 1 evaluates log(0) on a branch that is then discarded
            warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"opacus\.")
            return float(self._accountant.get_epsilon(delta=delta))

    def __len__(self) -> int:
        """Total number of recorded steps."""
        return sum(n for _, _, n in self._accountant.history)

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "delta": self.delta, "history": self.history}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> PrivacyAccountant:
        acc = cls(state["kind"], state["delta"])
        for sigma, q, steps in state["history"]:
            acc.step(sigma, q, steps)
        return acc

    def __repr__(self) -> str:
        return f"PrivacyAccountant(kind={self.kind!r}, delta={self.delta}, steps={len(self)})"


def noise_for_budget(
    target_epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    kind: AccountantKind = "rdp",
    epsilon_tolerance: float = 0.01,
) -> float:
    """Smallest noise multiplier σ (to ``epsilon_tolerance``) with ε(σ) ≤ ``target_epsilon``.

    Thin wrapper over :func:`opacus.accountants.utils.get_noise_multiplier` (binary search on
    the same accountant), so ``PrivacyAccountant(kind, delta)`` stepped ``steps`` times with
    the returned σ reports ε ≤ target.
    """
    from opacus.accountants.utils import get_noise_multiplier

    if target_epsilon <= 0:
        raise ValueError(f"target_epsilon must be > 0, got {target_epsilon}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    with warnings.catch_warnings():
        # the binary search visits extreme σ, where Opacus warns about the order range
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"opacus\.")
        warnings.filterwarnings("ignore", message="Optimal order is the", category=UserWarning)
        return float(
            get_noise_multiplier(
                target_epsilon=float(target_epsilon),
                target_delta=_check_delta(delta),
                sample_rate=float(sample_rate),
                steps=int(steps),
                accountant=kind,
                epsilon_tolerance=epsilon_tolerance,
            )
        )


class PureDPAccountant(Accountant):
    """Sequential composition of pure ε-DP releases (Laplace LDP, EdgeRand, LapGraph).

    ``epsilon()`` — basic composition: k releases at ε_i are (Σ ε_i, 0)-DP.
    ``epsilon_advanced(δ')`` — Kairouz–Oh–Viswanath heterogeneous bound, (ε, δ')-DP with
    ε = min(Σε_i, Σ ε_i(e^ε_i − 1)/(e^ε_i + 1) + sqrt(2 Σ ε_i² · ln(1/δ'))); it only pays off
    for many small-ε releases.
    """

    kind = "pure-dp"
    delta = 0.0

    def __init__(self) -> None:
        self._releases: list[tuple[float | None, int]] = []

    def step(self, epsilon: float | None, steps: int = 1) -> None:
        """Record ``steps`` releases, each ``epsilon``-DP (``None``: no guarantee)."""
        if epsilon is not None and (not epsilon >= 0 or math.isnan(epsilon)):
            raise ValueError(f"epsilon must be >= 0 or None, got {epsilon}")
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        if steps:
            self._releases.append((None if epsilon is None else float(epsilon), int(steps)))

    @property
    def guaranteed(self) -> bool:
        """False once a release without a DP guarantee has been recorded."""
        return all(eps is not None for eps, _ in self._releases)

    def __len__(self) -> int:
        return sum(n for _, n in self._releases)

    def epsilon(self, delta: float | None = None) -> float | None:
        """Basic composition Σ ε_i (pure DP, so at every δ); ``None`` if any release had no
        guarantee."""
        if not self.guaranteed:
            return None
        return float(sum(eps * n for eps, n in self._releases))  # type: ignore[operator]

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "releases": [list(r) for r in self._releases]}

    def epsilon_advanced(self, delta: float) -> float | None:
        """Advanced composition (KOV'15 Thm 3.5, third term): ε at total δ = ``delta``."""
        delta = _check_delta(delta)
        basic = self.epsilon()
        if basic is None or basic == 0.0 or math.isinf(basic):
            return basic
        pairs = [(eps, n) for eps, n in self._releases]
        # (e^ε - 1)/(e^ε + 1) = tanh(ε/2), overflow-free
        drift = sum(n * e * math.tanh(e / 2.0) for e, n in pairs)  # type: ignore[operator]
        spread = sum(n * e * e for e, n in pairs)  # type: ignore[operator]
        return float(min(basic, drift + math.sqrt(2.0 * spread * math.log(1.0 / delta))))

    def __repr__(self) -> str:
        return f"PureDPAccountant(releases={len(self)}, epsilon={self.epsilon()})"
