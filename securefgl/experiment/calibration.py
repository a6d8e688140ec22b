"""The ε a configuration will report, known before training, and the noise that reaches a
target ε (privacy–utility sweeps choose privacy levels as ε, not as σ).

:func:`planned_privacy` charges the run's own ledgers (:func:`~securefgl.federation.stack.
build_stack`) for ``rounds`` rounds in which every sampled client survives: what a run
without dropouts reports. :func:`noise_for_epsilon` inverts it for ``clip_noise`` by
bisection on the noise multiplier σ (ε falls as σ grows), against the run's headline
adversary; it refuses the runs whose ledger depends on what happens in them (Poisson
cohorts with distributed noise, several edge servers' stacks).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from securefgl.algorithms.registry import algorithm_class
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.federation.stack import build_stack

#: the σ range searched, and the relative precision of the returned σ
SIGMA_RANGE = (1e-3, 1e3)
TOLERANCE = 1e-4


def planned_privacy(config: ExperimentConfig) -> dict[str, Any]:
    """The headline privacy claim (``epsilon``, ``delta``, ``adversary``, …) of ``config``
    after ``config.rounds`` rounds without dropouts; empty without a DP mechanism."""
    stack = build_stack(config, config.clients_per_round, "planning")
    stack.federation_size = config.clients  # the parties are made for every client
    for _ in range(config.rounds):
        stack.account_round(config.client_fraction, config.clients_per_round, 1)
    return stack.privacy()


def _check_plannable(config: ExperimentConfig) -> None:
    """Refuse a run whose ledger :func:`planned_privacy` cannot know before it runs."""
    p = config.protocol
    if config.client_sampling == "poisson" and p.clip_noise_mode == "distributed":
        raise ConfigError(
            "a target ε cannot be calibrated under Poisson sampling with distributed noise: "
            "each round is charged at the clients that joined (σ·√(m/n)), known only as the "
            "run goes; give the noise multiplier σ instead"
        )
    several = [a for a in config.algorithms
               if algorithm_class(a, config.task).multi_server]  # fmt: skip
    if several and config.edge_servers > 1:
        raise ConfigError(
            f"a target ε cannot be calibrated for {', '.join(several)} with "
            f"{config.edge_servers} edge servers: each server's stack charges its own "
            "clients and floor; give the noise multiplier σ instead"
        )


def noise_for_epsilon(config: ExperimentConfig, epsilon: float) -> float:
    """The noise multiplier σ of ``clip_noise`` at which ``config`` reports ``epsilon``
    (to a relative ``TOLERANCE`` in σ; the reported ε is at most the target)."""
    if config.protocol.mechanism != "clip_noise":
        raise ConfigError(
            f"a target ε calibrates clip_noise's σ; the stack {config.protocol.label!r} has "
            "no clip_noise (give its mechanism's own parameter instead)"
        )
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigError(f"a target ε must be finite and > 0, got {epsilon}")
    _check_plannable(config)

    def spent(sigma: float) -> float:
        cfg = config.replace(protocol=config.protocol.replace(dp_noise=sigma))
        with warnings.catch_warnings():  # far-off σ probe the RDP orders' edges: harmless
            warnings.filterwarnings("ignore", message="Optimal order is")
            return float(planned_privacy(cfg)["epsilon"])

    low, high = SIGMA_RANGE
    if spent(high) > epsilon:
        raise ConfigError(f"ε = {epsilon} needs σ above {high:g}: no useful model remains")
    if spent(low) <= epsilon:
        return low
    while high / low > 1 + TOLERANCE:  # geometric bisection: ε(σ) falls as σ grows
        mid = math.sqrt(low * high)
        low, high = (mid, high) if spent(mid) > epsilon else (low, mid)
    return high
