"""Empirical checks that every DP mechanism's public output keeps to the ε it claims.

For each mechanism a distinguisher sees its public output on one of two neighbouring
inputs (one client's update present or absent, one edge present or absent, two extreme
local values) and thresholds a scalar statistic. Following Jagielski, Ullman and Oprea
(NeurIPS 2020) and Nasr et al. (S&P 2021), the threshold is chosen on one half of the
trials and evaluated on the other, with Clopper–Pearson bounds, which gives an empirical
lower bound ``ε_LB = ln((1 − δ − FNR⁺) / FPR⁺)`` that exceeds the true ε with probability at
most ``alpha`` (per tail). A check *holds* when ``ε_LB ≤ ε_claimed`` and the measured
advantage ``TPR − FPR`` stays below what (ε, δ)-DP allows, ``(e^ε − 1 + 2δ)/(e^ε + 1)``
(plus the confidence slack). The claimed ε comes from the same accountant a run reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.stats import beta as beta_dist

from protocols.base import AggregateResult
from protocols.dp import ClipNoiseMechanism, GaussianLDP, LaplaceLDP, PrivacyAccountant
from protocols.dp.graph_dp import edge_rand, lap_graph
from protocols.dp.rng import make_rng

Sampler = Callable[[bool, int, np.random.Generator], np.ndarray]  # (neighbour?, n, rng) -> stat


@dataclass(frozen=True)
class MechanismCheck:
    """One mechanism, its claimed (ε, δ) and a distinguisher's statistic on neighbours."""

    name: str
    epsilon: float
    delta: float
    sample: Sampler  # the statistic for n releases on D0 (False) or D1 (True)
    trials: int = 20_000


def _upper(k: int, n: int, alpha: float) -> float:
    """Clopper–Pearson upper bound of a proportion k/n."""
    return 1.0 if k >= n else float(beta_dist.ppf(1.0 - alpha, k + 1, n - k))


def _lower(k: int, n: int, alpha: float) -> float:
    return 0.0 if k <= 0 else float(beta_dist.ppf(alpha, k, n - k + 1))


def _rates(s0: np.ndarray, s1: np.ndarray, t: float) -> tuple[int, int]:
    """(false positives on D0, true positives on D1) of "D1 iff statistic > t"."""
    return int(np.count_nonzero(s0 > t)), int(np.count_nonzero(s1 > t))


def _epsilon_lb(fp: int, tp: int, n: int, delta: float, alpha: float) -> float:
    fpr_hi, tpr_lo = _upper(fp, n, alpha), _lower(tp, n, alpha)
    if tpr_lo - delta <= 0:
        return 0.0
    return max(0.0, math.log((tpr_lo - delta) / fpr_hi))


def run_check(check: MechanismCheck, seed: int = 0, alpha: float = 1e-3) -> dict[str, object]:
    """The distinguishing experiment; a row of ``benchmarks/results/robustness.json``."""
    rng = make_rng(seed, "dp-check", check.name)
    n = check.trials
    s0, s1 = check.sample(False, n, rng), check.sample(True, n, rng)
    half = n // 2
    # threshold chosen on the first half (both orientations: "D1 iff large" or "iff small")
    best, best_sign, best_t = -1.0, 1.0, 0.0
    for sign in (1.0, -1.0):
        a0, a1 = sign * s0[:half], sign * s1[:half]
        for t in np.unique(np.quantile(np.concatenate([a0, a1]), np.linspace(0.01, 0.99, 99))):
            fp, tp = _rates(a0, a1, t)
            score = _epsilon_lb(fp, tp, half, check.delta, 0.5)  # point estimate
            if score > best:
                best, best_sign, best_t = score, sign, float(t)
    fp, tp = _rates(best_sign * s0[half:], best_sign * s1[half:], best_t)
    m = n - half
    eps_lb = _epsilon_lb(fp, tp, m, check.delta, alpha)
    advantage = (tp - fp) / m
    e = math.exp(min(check.epsilon, 700.0))
    bound = (e - 1 + 2 * check.delta) / (e + 1)
    slack = _upper(fp, m, alpha) - fp / m + tp / m - _lower(tp, m, alpha)
    return {
        "mechanism": check.name,
        "epsilon_claimed": check.epsilon,
        "delta": check.delta,
        "epsilon_lower_bound": eps_lb,
        "distinguisher_advantage": advantage,
        "bound": bound,
        "holds": bool(eps_lb <= check.epsilon and advantage <= bound + slack),
        "trials": n,
    }


def _gaussian_epsilon(sigma: float, q: float, delta: float, steps: int = 1) -> float:
    acc = PrivacyAccountant("rdp", delta)
    acc.step(sigma, q, steps)
    return acc.epsilon()


def clip_noise_check(
    sigma: float = 2.0, clients: int = 5, colluding: int = 0, mode: str = "central",
    noise_scale: float = 1.0, delta: float = 1e-5,
) -> MechanismCheck:  # fmt: skip
    """DP-FedAvg (clip + Gaussian), one round: the target client's update (clipped to C)
    present or absent, the others 0; distributed noise: the adversary subtracts the
    colluders' shares. ``noise_scale < 1`` weakens the noise (a control that must fail)."""
    mech = ClipNoiseMechanism(1.0, sigma * noise_scale, mode=mode, expected_clients=clients)
    claimed = ClipNoiseMechanism(1.0, sigma, mode=mode, expected_clients=clients)
    eps = _gaussian_epsilon(claimed.effective_noise_multiplier(clients, colluding), 1.0, delta)

    def sample(present: bool, n: int, rng: np.random.Generator) -> np.ndarray:
        out = np.empty(n)
        honest = clients - colluding
        for i in range(n):
            total = 0.0
            for c in range(honest):  # the colluders' shares are known and removed
                update = np.array([3.0 if present and c == 0 else 0.0])  # clipped to 1
                total += mech.client_apply(update, 1.0, rng)[0][0]
            if mode == "central":
                total = mech.server_apply(AggregateResult(np.array([total]), 1.0, ()), rng)
                total = float(np.asarray(total.mean)[0] * total.total_weight)
            out[i] = total
        return out

    return MechanismCheck(f"clip_noise ({mode}, {colluding} colluding)", eps, delta, sample, 4000)


def poisson_check(
    sigma: float = 1.0, q: float = 0.2, delta: float = 1e-5, amplify: bool = True
) -> MechanismCheck:
    """Central Gaussian noise with Poisson sampling, seen by a model observer (who does
    not know who took part): the claimed ε is amplified by q (or not: ``amplify=False``)."""
    eps = _gaussian_epsilon(sigma, q if amplify else 1.0, delta)

    def sample(present: bool, n: int, rng: np.random.Generator) -> np.ndarray:
        joined = rng.random(n) < q
        return (present & joined).astype(float) + rng.normal(0.0, sigma, n)

    return MechanismCheck(f"clip_noise central, Poisson q={q}", eps, delta, sample, 40_000)


def laplace_ldp_check(mech: LaplaceLDP, name: str = "ldp_laplace") -> MechanismCheck:
    """Laplace LDP on a one-coordinate update: the two extreme clipped values."""

    def sample(present: bool, n: int, rng: np.random.Generator) -> np.ndarray:
        x = np.array([mech.clip if present else -mech.clip])
        return np.array([mech.apply(x, rng)[0] for _ in range(n)])

    return MechanismCheck(name, mech.epsilon_per_release(1), 0.0, sample)


def gaussian_ldp_check(multiplier: float = 1.0, delta: float = 1e-5) -> MechanismCheck:
    mech = GaussianLDP(clip_norm=1.0, noise_multiplier=multiplier)

    def sample(present: bool, n: int, rng: np.random.Generator) -> np.ndarray:
        x = np.array([1.0 if present else -1.0])
        return np.array([mech.apply(x, rng)[0] for _ in range(n)])

    return MechanismCheck("ldp_gaussian", mech.epsilon(delta), delta, sample)


def edge_check(mechanism: str = "edgerand", epsilon: float = 1.0, nodes: int = 6) -> MechanismCheck:
    """EdgeRand / LapGraph: one edge (0, 1) present or absent in a small graph; the
    statistic is that pair's output bit."""
    base = np.zeros((nodes, nodes))
    base[2, 3] = base[3, 2] = base[3, 4] = base[4, 3] = 1.0

    def sample(present: bool, n: int, rng: np.random.Generator) -> np.ndarray:
        adj = base.copy()
        if present:
            adj[0, 1] = adj[1, 0] = 1.0
        block = sp.csr_matrix(adj)
        if mechanism == "edgerand":
            outs = [edge_rand(block, epsilon, preserve_sparsity=True, rng=rng) for _ in range(n)]
        else:
            outs = [lap_graph(block, epsilon, rng=rng) for _ in range(n)]
        return np.array([float(o[0, 1]) for o in outs])

    return MechanismCheck(mechanism, epsilon, 0.0, sample, 8000)


def checks() -> list[MechanismCheck]:
    """Every mechanism a run can claim an ε for, at representative settings."""
    return [
        clip_noise_check(mode="central"),
        clip_noise_check(mode="distributed"),
        clip_noise_check(mode="distributed", colluding=2),
        poisson_check(),
        laplace_ldp_check(LaplaceLDP(clip=0.5, epsilon=1.0)),
        laplace_ldp_check(
            LaplaceLDP.fedgnn(clip=0.1, lam=0.1), "FedGNN LDP (ε = 2δ/λ per coordinate)"
        ),
        gaussian_ldp_check(),
        edge_check("edgerand"),
        edge_check("lapgraph"),
    ]


def dp_rows(seed: int = 0) -> list[dict[str, object]]:
    """The rows of ``benchmarks/results/robustness.json`` for the DP checks."""
    return [run_check(check, seed) for check in checks()]
