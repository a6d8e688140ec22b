"""Empirical DP lower bound of the clip-and-noise mechanism, in one run (Steinke, Nasr,
Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023).

Audits :class:`protocols.dp.ClipNoiseMechanism` with a configuration's clip ``C``, noise
multiplier ``σ`` and rounds ``R`` (client-level DP-FedAvg; q = 1). ``m`` canary clients each
hold a Dirac update ``C·e_j`` (the strongest white-box gradient canary, Nasr et al.) and take
part with probability 1/2 in every round. The adversary (the server in central mode) scores
canary j by the sum of coordinate j over the rounds and guesses "in" for the top ``k₊``,
"out" for the bottom ``k₋``. With ``v`` correct of ``r`` guesses, Steinke et al.'s theorem
gives ``ε_LB``, the largest ε with ``P[Binom(r, e^ε/(1+e^ε)) ≥ v] + 2mδ·α(ε) < β``
(β = 0.05, α as in their Prop. 5.7), printed beside the accountant's ε: a lower bound above
it would reveal a bug. Deviations: canaries are injected into the mechanism, not into GNN
training; other clients' updates are known to the adversary (set to 0).

Baseline: 0 (guessing without the run certifies nothing); margin 0, since ε_LB > 0 already
holds with confidence 1 − β. The accountant's ε is a reference, not an attack metric: it
has no baseline.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

from attacks.base import SERVER, AttackResult
from protocols.base import AggregateResult
from protocols.dp import ClipNoiseMechanism, PrivacyAccountant

NAME = "dp_audit"


def _p_value(eps: float, r: int, v: int, m: int, delta: float) -> float:
    q = np.exp(eps) / (1 + np.exp(eps))
    p = float(binom.sf(v - 1, r, q))  # P[Binom(r, q) ≥ v]
    if delta > 0:
        i = np.arange(1, v + 1)
        window = binom.cdf(v - 1, r, q) - binom.cdf(v - i - 1, r, q)  # P[v-i ≤ B < v]
        p += 2 * m * delta * float(np.max(window / i))
    return p


def epsilon_lower_bound(
    r: int, v: int, m: int, delta: float = 0.0, beta: float = 0.05, hi: float = 30.0
) -> float:
    """Steinke et al.'s one-run ε lower bound for ``v`` correct of ``r`` guesses."""
    if r == 0 or _p_value(0.0, r, v, m, delta) >= beta:
        return 0.0
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _p_value(mid, r, v, m, delta) < beta else (lo, mid)
    return lo


def accountant_epsilon(
    noise_multiplier: float, rounds: int, delta: float, kind: str = "rdp"
) -> float:
    """ε of ``rounds`` full-participation Gaussian rounds (q = 1)."""
    if noise_multiplier == 0:
        return float("inf")
    acc = PrivacyAccountant(kind, delta)  # type: ignore[arg-type]
    acc.step(noise_multiplier, 1.0, steps=rounds)
    return float(acc.epsilon())


def dp_audit(
    clip: float,
    noise_multiplier: float,
    rounds: int,
    delta: float = 1e-5,
    canaries: int = 1000,
    guesses: int = 100,
    accountant: str = "rdp",
    seed: int = 0,
) -> AttackResult:
    """One-run audit of ``ClipNoiseMechanism(clip, σ)`` over ``rounds`` rounds."""
    rng = np.random.default_rng(seed)
    mech = ClipNoiseMechanism(clip, noise_multiplier, mode="central", expected_clients=1)
    included = rng.random(canaries) < 0.5
    score = np.zeros(canaries)
    # every canary's update 2C·e_j goes through the mechanism's own clipping (to C·e_j)
    idx = np.flatnonzero(included)
    dirac = np.zeros((idx.size, canaries))
    dirac[np.arange(idx.size), idx] = 2.0 * clip
    clipped = np.stack([mech.client_apply(row, 1.0, rng)[0] for row in dirac])
    canary_sum = clipped.sum(axis=0) if idx.size else np.zeros(canaries)
    for _ in range(rounds):
        total = canary_sum.copy()
        out = mech.server_apply(AggregateResult(total, 1.0, ()), rng)
        score += np.asarray(out.mean) * out.total_weight
    order = np.argsort(-score)
    k = guesses // 2
    guess_in, guess_out = order[:k], order[-k:]
    correct = int(included[guess_in].sum() + (~included[guess_out]).sum())
    eps_lb = epsilon_lower_bound(2 * k, correct, canaries, delta)
    eps_acc = accountant_epsilon(noise_multiplier, rounds, delta, accountant)
    return AttackResult(
        NAME,
        SERVER,
        {"epsilon_lower_bound": eps_lb, "accountant_epsilon": eps_acc},
        primary="epsilon_lower_bound",
        baselines={"epsilon_lower_bound": 0.0},
        margins={"epsilon_lower_bound": 0.0},
        details={
            "canaries": canaries,
            "guesses": 2 * k,
            "correct": correct,
            "rounds": rounds,
            "noise_multiplier": noise_multiplier,
            "clip": clip,
            "delta": delta,
            "max_lower_bound_for_these_guesses": epsilon_lower_bound(2 * k, 2 * k, canaries, delta),
        },
    )
