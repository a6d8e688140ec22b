"""Empirical DP lower bound of a run's clip-and-noise mechanism, in one run (Steinke, Nasr,
Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023).

Audits :class:`protocols.dp.ClipNoiseMechanism` as the run ran it: its clip ``C``, noise
multiplier ``σ``, rounds, noise mode (central: the server adds the noise every round, empty
rounds included; distributed: each participant adds a share, colluders' shares are removed)
and client sampling (fixed-size or Poisson at the run's fraction). ``m`` canary clients each
hold a Dirac update ``C·e_j`` (the strongest white-box canary, Nasr et al.) and are in the
federation with probability 1/2. The adversary is the one the run's ε is stated against:
the server knows who took part each round and scores canary j by coordinate j over the
rounds it joined; an observer of the released model scores it over every round. It guesses
"in" for the top ``r/2`` and "out" for the bottom ``r/2``; with ``v`` correct of ``r``,
Steinke et al.'s theorem gives ``ε_LB``, the largest ε with
``P[Binom(r, e^ε/(1+e^ε)) ≥ v] + 2mδ·α(ε) < β`` (β = 0.05; α as in their Prop. 5.7). ``r``
is chosen so that a perfect guesser could certify more than the run's claimed ε (100
guesses cap ε_LB at 3.47). ``ε_LB`` above the claimed ε is a violation: the claim is false.
Deviations: canaries are injected into the mechanism, not into GNN training; the other
clients' updates are known to the adversary (zero).

Baseline: 0 (guessing without the run certifies nothing); margin 0.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

from attacks.base import SERVER, AttackResult
from protocols.base import AggregateResult
from protocols.dp import ClipNoiseMechanism, PrivacyAccountant, clip_l2
from protocols.dp.rng import make_rng

NAME = "dp_audit"
MAX_GUESSES = 100_000


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


def guesses_for(epsilon: float, delta: float, margin: float = 0.5) -> int:
    """The fewest guesses (≥ 100, doubling; canaries = 2·guesses) whose perfect score
    certifies more than ``epsilon + margin``. The δ term of the bound grows with the
    canaries, so the certifiable ε peaks (about 7.5 at δ = 1e-5): past the peak, the
    guesses that certify the most."""
    best, best_cap, r = 100, -1.0, 100
    while r <= MAX_GUESSES:
        cap = epsilon_lower_bound(r, r, 2 * r, delta)
        if cap > epsilon + margin:
            return r
        if cap <= best_cap:
            break  # past the peak
        best, best_cap = r, cap
        r *= 2
    return best


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
    *,
    claimed_epsilon: float | None = None,
    mode: str = "central",
    sample_rate: float = 1.0,
    sampling: str = "fixed",
    knows_participation: bool = True,
    colluding: int = 0,
    accountant: str = "rdp",
    guesses: int | None = None,
    seed: int = 0,
) -> AttackResult:
    """One-run audit of ``ClipNoiseMechanism(clip, σ)`` over ``rounds`` rounds, as the run
    ran it (module docstring); ``claimed_epsilon``: the run's reported ε (default: the
    accountant's at q = 1)."""
    claimed = (
        accountant_epsilon(noise_multiplier, rounds, delta, accountant)
        if claimed_epsilon is None
        else float(claimed_epsilon)
    )
    r = guesses or guesses_for(min(claimed, 30.0), delta)
    m = 2 * r
    design = make_rng(seed, "dp-audit-design")  # which canaries are in: the auditor's choice
    noise = make_rng(None)  # the mechanism's noise: secret, as in the run
    included = np.flatnonzero(design.random(m) < 0.5)
    n_in = max(included.size, 1)
    expected = max(1, round(sample_rate * n_in))
    mech = ClipNoiseMechanism(clip, noise_multiplier, mode=mode, expected_clients=expected)
    score = np.zeros(m)
    for _ in range(rounds):
        if sampling == "poisson":
            joined = included[noise.random(included.size) < sample_rate]
        else:
            joined = np.sort(noise.choice(included, min(expected, included.size), replace=False))
        # each participant's update C·e_j (its Dirac 2C·e_j clipped by the mechanism) and, in
        # distributed mode, its noise share N(0, share_std²); the colluders' shares are known
        # to the adversary, so only the honest participants' shares remain
        total = np.zeros(m)
        total[joined] = clip_l2(np.array([2.0 * clip]), clip)[0]
        honest = max(joined.size - colluding, 0)
        if mode == "distributed" and honest:
            total += noise.normal(0.0, mech.share_std * np.sqrt(honest), size=m)
        if mode == "central":  # released every round, empty ones included
            out = mech.server_apply(AggregateResult(total, 1.0, ()), noise)
            total = np.asarray(out.mean) * out.total_weight
        elif joined.size == 0:
            continue  # distributed noise: nothing is released without participants
        if knows_participation:
            score[joined] += total[joined]
        else:
            score += total
    order = np.argsort(-score)
    k = r // 2
    guess_in, guess_out = order[:k], order[-k:]
    is_in = np.zeros(m, dtype=bool)
    is_in[included] = True
    correct = int(is_in[guess_in].sum() + (~is_in[guess_out]).sum())
    eps_lb = epsilon_lower_bound(2 * k, correct, m, delta)
    cap = epsilon_lower_bound(2 * k, 2 * k, m, delta)
    return AttackResult(
        NAME,
        SERVER if knows_participation else "model observers",
        {"epsilon_lower_bound": eps_lb, "claimed_epsilon": claimed},
        primary="epsilon_lower_bound",
        baselines={"epsilon_lower_bound": 0.0},
        margins={"epsilon_lower_bound": 0.0},
        details={
            "violation": bool(eps_lb > claimed),
            "canaries": m,
            "guesses": 2 * k,
            "correct": correct,
            "max_lower_bound_for_these_guesses": cap,
            "can_refute_claim": bool(cap > claimed),
            "rounds": rounds,
            "noise_multiplier": noise_multiplier,
            "clip": clip,
            "delta": delta,
            "mode": mode,
            "sampling": sampling,
            "sample_rate": sample_rate,
            "colluding": colluding,
            "adversary_knows_participation": knows_participation,
        },
    )
