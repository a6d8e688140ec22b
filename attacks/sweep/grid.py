"""The grid of a privacy–utility sweep: algorithms × protections × privacy levels × seeds.

A *protection* is written as in ``securefgl audit``: a protocol stack (``plain``,
``secagg``, ``ckks``, ``secagg,clip_noise`` …) or an edge-DP defence (``edgerand``,
``lapgraph``; FedStruct applies it to Ā's inputs, other algorithms to each client's own
edges, :mod:`attacks.defences`). Its privacy *levels*:

* a stack with ``clip_noise``: the target ε of each level (``epsilons``; σ calibrated so
  that the run reports that ε against its headline adversary,
  :func:`securefgl.experiment.calibration.noise_for_epsilon`), or the noise multipliers σ
  themselves (``noise``);
* an edge-DP defence: its ε (``epsilons``), edge-level;
* ``ldp_gaussian``: σ (``noise``); ``ldp_laplace``: its per-release ε (``ldp_epsilons``);
* anything else (``plain``, ``secagg``, ``ckks``): one cell at ε = ∞.

Client-level and edge-level ε are different units and are never drawn on one axis.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from attacks.api import spec as attack_spec
from attacks.audit import AuditConfig, cell_config, parse_protocol
from attacks.registry import attacks_for
from protocols.registry import parse_stack
from securefgl.algorithms.registry import algorithm_class
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment.calibration import noise_for_epsilon

CLIENT_LEVEL, EDGE_LEVEL = "client-level", "edge-level"
#: base settings that change no cell's result (the grid's own seeds and algorithms are the
#: cells' keys)
NOT_IN_RESULTS = frozenset({"threads", "output_dir", "name", "seeds", "algorithms", "executor",
                            "workers", "ray_address", "party_timeout", "ray_co_host"})  # fmt: skip


@dataclass(frozen=True)
class SweepConfig:
    """What a sweep trains and attacks; ``base`` holds dataset, clients, rounds, model."""

    base: ExperimentConfig
    algorithms: list[str]
    protections: list[str]
    epsilons: list[float] = field(default_factory=list)
    noise: list[float] = field(default_factory=list)
    ldp_epsilons: list[float] = field(default_factory=list)
    attacks: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=lambda: [0])
    fedstruct_preset: bool = True  # FedStruct's paper settings (as securefgl audit)

    def __post_init__(self) -> None:
        for name in ("algorithms", "protections", "seeds"):
            if not getattr(self, name):
                raise ConfigError(f"sweep: give at least one of {name}")
        for name in ("epsilons", "noise", "ldp_epsilons"):
            bad = [v for v in getattr(self, name) if not (v > 0 and math.isfinite(v))]
            if bad:
                raise ConfigError(f"sweep: {name} must be finite and > 0, got {bad} (a "
                                  "run without DP: the protection plain, secagg or ckks)")
        if self.epsilons and self.noise:
            raise ConfigError("sweep: give clip_noise's levels as epsilons or as noise, not both")
        if self.base.protocol.stack:
            raise ConfigError("sweep: the protections give each cell's stack; the base "
                              f"configuration's protocol stack {self.base.protocol.label!r} "
                              "would be ignored: put it in protections")  # fmt: skip
        for name, key in (("algorithms", str), ("protections", str), ("seeds", str),
                          ("epsilons", _level), ("noise", _level), ("ldp_epsilons", _level)):
            keys = [key(v) for v in getattr(self, name)]
            if len(set(keys)) != len(keys):
                raise ConfigError(f"sweep: {name} repeat an entry (as cells name them): {keys}")
        used = {kind for spec in self.protections for _, kind in
                _levels(self, Protection.parse(spec))}  # refuses a protection without its levels
        consumer = {"epsilons": "epsilon", "noise": "noise", "ldp_epsilons": "ldp_epsilon"}
        for name, kind in consumer.items():
            if getattr(self, name) and kind not in used:
                raise ConfigError(f"sweep: no protection uses {name} ({getattr(self, name)}); "
                                  "drop them or add a protection that takes them")  # fmt: skip
        for name in self.attacks:
            attack_spec(name)  # refuses an unknown attack, with a suggestion
        targeted = [a for a in self.algorithms
                    if attacks_for(a, self.attacks or None, self.base.task)]
        if self.attacks and not targeted:
            raise ConfigError(
                f"sweep: none of the attacks {self.attacks} targets {self.algorithms} "
                "(securefgl audit --list-attacks names each attack's targets)"
            )
        if not cells(self):
            raise ConfigError(
                f"sweep: no cell to run: {self.algorithms} under {self.protections} (central "
                "runs only without protection, local only without a protocol stack: it sends "
                "nothing the stack could protect)"
            )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["base"] = self.base.to_dict()
        return d

    def context(self) -> dict[str, Any]:
        """What every cell's result depends on besides its own key (algorithm, protection,
        level, seed): the base configuration without the settings that do not change a
        result (threads, where results go, the executor), the attacks and the preset."""
        base = {k: v for k, v in self.base.to_dict().items() if k not in NOT_IN_RESULTS}
        return {"base": base, "attacks": sorted(self.attacks),
                "fedstruct_preset": self.fedstruct_preset}

    def fingerprint(self) -> str:
        """Names the cells' context: a resumed sweep reuses the cells of the same context
        (the grid's lists may change: cells are reused by key, new ones run)."""
        text = json.dumps(self.context(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Protection:
    """One protection of the grid (see the module docstring)."""

    spec: str
    stack: tuple[str, ...]
    edge_dp: str | None  # the edge-DP mechanism whose ε is the level

    @classmethod
    def parse(cls, spec: str) -> Protection:
        parts = [p.strip().lower() for p in spec.split(",") if p.strip()]
        edge = [p for p in parts if p.partition(":")[0] in ("edgerand", "lapgraph")]
        if any(":" in p for p in edge):
            raise ConfigError(f"protection {spec!r}: the sweep's epsilons give edge DP's ε")
        try:
            stack, _ = parse_protocol(",".join(p for p in parts if p not in edge))
            parse_stack(stack)  # refuses an unknown name or a combination that cannot stack
        except ValueError as err:
            raise ConfigError(f"protection {spec!r}: {err}") from err
        return cls(spec, tuple(stack), edge[0] if edge else None)

    @property
    def mechanism(self) -> str | None:
        return parse_stack(list(self.stack))[1]

    @property
    def unit(self) -> str | None:
        """The unit of its ε (None: no DP, ε = ∞)."""
        if self.edge_dp is not None:
            return EDGE_LEVEL
        return CLIENT_LEVEL if self.mechanism is not None else None


@dataclass(frozen=True)
class Cell:
    """One training run of the grid and the attacks on it."""

    algorithm: str
    protection: Protection
    level: float | None  # ε target, σ, or per-release ε (``level_kind``); None: ε = ∞
    level_kind: str  # "epsilon", "noise", "ldp_epsilon" or "none"
    seed: int

    @property
    def key(self) -> str:
        level = "inf" if self.level is None else _level(self.level)
        return f"{self.algorithm}|{self.protection.spec}|{self.level_kind}={level}|{self.seed}"

    def label(self) -> str:
        level = {"epsilon": "ε", "noise": "σ", "ldp_epsilon": "ε per release"}
        at = "" if self.level is None else f" {level[self.level_kind]}={self.level:g}"
        return f"{self.algorithm} · {self.protection.spec}{at} · seed {self.seed}"


def _level(value: float) -> str:
    """A privacy level as cell keys name it: exact (``1``, ``0.5``; ``repr`` when six
    significant digits would round it, so two levels never share a key)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def _levels(sweep: SweepConfig, p: Protection) -> list[tuple[float | None, str]]:
    if p.edge_dp is not None:
        if p.mechanism is not None:
            raise ConfigError(f"protection {p.spec!r}: one privacy level per protection (edge "
                              "DP or a DP mechanism)")  # fmt: skip
        if not sweep.epsilons:
            raise ConfigError(f"protection {p.spec!r} needs epsilons (its edge-level ε)")
        return [(e, "epsilon") for e in sweep.epsilons]
    if p.mechanism == "clip_noise":
        if not (sweep.epsilons or sweep.noise):
            raise ConfigError(f"protection {p.spec!r} needs epsilons (targets) or noise (σ)")
        return [(e, "epsilon") for e in sweep.epsilons] or [(s, "noise") for s in sweep.noise]
    if p.mechanism == "ldp_gaussian":
        if not sweep.noise:
            raise ConfigError(f"protection {p.spec!r} needs noise (its σ)")
        return [(s, "noise") for s in sweep.noise]
    if p.mechanism == "ldp_laplace":
        if not sweep.ldp_epsilons:
            raise ConfigError(f"protection {p.spec!r} needs ldp_epsilons (ε per release)")
        return [(e, "ldp_epsilon") for e in sweep.ldp_epsilons]
    return [(None, "none")]


def cells(sweep: SweepConfig) -> list[Cell]:
    """Every cell, seeds innermost (a killed sweep has whole protections done first);
    ``central`` only without protection, as in the audit, and a local reference (it sends
    nothing) under no protocol stack."""
    out = []
    for algo in sweep.algorithms:
        setting = algorithm_class(algo, sweep.base.task).setting
        for spec in sweep.protections:
            p = Protection.parse(spec)
            if algo == "central" and (p.stack or p.edge_dp):
                continue
            if setting == "local" and p.stack:
                continue
            for level, kind in _levels(sweep, p):
                out.extend(Cell(algo, p, level, kind, seed) for seed in sweep.seeds)
    return out


def training_config(sweep: SweepConfig, cell: Cell) -> ExperimentConfig:
    """The configuration ``cell`` trains with (FedStruct as in ``securefgl audit``)."""
    p = cell.protection
    edge = (p.edge_dp, float(cell.level)) if p.edge_dp and cell.level is not None else None
    audit = AuditConfig(base=sweep.base, fedstruct_preset=sweep.fedstruct_preset)
    cfg = cell_config(audit, cell.algorithm, list(p.stack), edge).replace(seeds=[cell.seed])
    if cell.level_kind == "noise":
        cfg = cfg.replace(protocol=cfg.protocol.replace(dp_noise=float(cell.level)))
    elif cell.level_kind == "ldp_epsilon":
        cfg = cfg.replace(protocol=cfg.protocol.replace(dp_epsilon=float(cell.level)))
    elif cell.level_kind == "epsilon" and p.edge_dp is None:
        sigma = noise_for_epsilon(cfg, float(cell.level))
        cfg = cfg.replace(protocol=cfg.protocol.replace(dp_noise=sigma))
    return cfg
