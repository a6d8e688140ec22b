"""Attack the runs you trained: ``attacks.run(result, "link_stealing")``.

Train with :func:`securefgl.experiment.run_experiment` and ``keep_state=True`` (plus
``keep_tags=attacks.keep_tags(names)`` for attacks that read a message family in every
round); each run then keeps its final models, its client views, its transcript and the
ground truth that scores an attack. :func:`run` runs one attack of :data:`attacks.registry.
ATTACKS` on every run it targets, on that adversary's view of the run itself: no second
training. Attacks on a pre-training protocol (FedStruct's Ā, FedGCN's neighbour sums) run
that protocol again on the run's own client views, in the run's secure-sum mode.
"""

from __future__ import annotations

from collections.abc import Iterable

from attacks.base import AttackResult, not_applicable
from attacks.registry import ATTACKS, AttackSpec, Cell
from attacks.simulation import AuditRun
from securefgl.algorithms.fedstruct.settings import FedStructSettings
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.config.fields import did_you_mean
from securefgl.experiment.runner import ExperimentResult, RunResult


def spec(name: str) -> AttackSpec:
    """The attack ``name`` (``ConfigError`` with a suggestion when it is unknown)."""
    if not isinstance(name, str):
        raise ConfigError(f"an attack is named by a string, got {name!r}")
    if name not in ATTACKS:
        raise ConfigError(f"unknown attack {name!r}{did_you_mean(name, ATTACKS)}; "
                          f"choose from {sorted(ATTACKS)}")  # fmt: skip
    return ATTACKS[name]


def keep_tags(names: Iterable[str]) -> frozenset[str]:
    """The message tags whose payloads the attacks ``names`` read in every round."""
    return frozenset(tag for name in names for tag in spec(name).keep_tags)


def edge_dp_of(config: ExperimentConfig, algorithm: str) -> tuple[str, float] | None:
    """FedStruct's edge DP (mechanism, ε) as the run applied it; None elsewhere."""
    if algorithm != "fedstruct":
        return None
    s = config.section(FedStructSettings)
    return None if s.edge_dp is None or s.edge_epsilon is None else (s.edge_dp, s.edge_epsilon)


def attack_run(config: ExperimentConfig, run: RunResult, name: str) -> AttackResult:
    """Attack ``name`` on one run trained under ``config`` (kept state: see the module)."""
    chosen = spec(name)
    if run.algorithm not in chosen.targets:
        return not_applicable(name, "–", f"{name} does not target {run.algorithm}")
    if run.state is None or run.transcript is None:
        raise ValueError(
            "the run kept no state to attack: train it with "
            "run_experiment(config, keep_state=True)"
        )
    missing = set(chosen.keep_tags) - set(run.transcript.keep_tags)
    if missing:
        raise ValueError(
            f"{name} reads every round's {sorted(missing)} messages: train with "
            f"run_experiment(config, keep_state=True, keep_tags=attacks.keep_tags([{name!r}]))"
        )
    audited = AuditRun(config, run)
    cell = Cell(audited, audited.world, tuple(config.protocol.stack),
                edge_dp_of(config, run.algorithm))  # fmt: skip
    result = chosen.call(cell)
    result.details.update(algorithm=run.algorithm, seed=run.seed)
    return result


def run(result: ExperimentResult, name: str) -> list[AttackResult]:
    """Attack ``name`` on every run of ``result`` it targets (in the runs' order);
    ``ConfigError`` naming its targets when it targets none of them."""
    chosen = spec(name)
    targeted = [r for r in result.runs if r.algorithm in chosen.targets]
    if not targeted:
        ran = sorted({r.algorithm for r in result.runs})
        raise ConfigError(f"{name} targets {', '.join(sorted(chosen.targets))}, not {ran}")
    return [attack_run(result.config, r, name) for r in targeted]
