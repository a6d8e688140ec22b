"""The leakage audit: algorithm × protocol stack × attack on one dataset / partition.

Each (algorithm, protocol) cell is trained once (:func:`attacks.simulation.simulate`,
payloads stored), then every requested attack that targets the algorithm runs on its
adversary's view (:mod:`attacks.registry`). A protocol is a stack as in
``securefgl run --protocol`` (``plain``, ``secagg``, ``ckks``, ``clip_noise``,
``secagg,clip_noise`` …) optionally with a client-side edge-DP defence on each client's
own graph (``edgerand:1``, ``lapgraph:4``; :mod:`attacks.defences`). Each attack yields
one row per metric (the headline first, ``primary: true``) with the cell's test accuracy
and ε; an attack that does not apply yields ``value: null`` and a ``reason``.

Outputs (:func:`save_audit`): ``<name>.json`` (the rows), ``<name>_meta.json`` (settings),
``<name>.md`` (headline rows) and ``<name>.png`` (accuracy vs attack value per attack;
accuracy vs ε).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from attacks.base import AttackResult
from attacks.defences import edge_dp_hook
from attacks.registry import ATTACKS, Cell, attacks_for
from attacks.simulation import make_world, simulate
from protocols.registry import parse_stack, secure_sum_for_stack
from securefgl.config import ExperimentConfig
from securefgl.experiment.runner import load_graph
from securefgl.fedstruct.settings import EDGE_DP_MECHANISMS as EDGE_DP
from securefgl.fedstruct.settings import apply_preset

log = logging.getLogger(__name__)

DEFAULT_PROTOCOLS = ["plain", "secagg", "ckks", "clip_noise", "secagg,clip_noise", "edgerand:1"]


@dataclass
class AuditConfig:
    """The grid. ``base`` holds dataset, partition, clients, model and DP settings."""

    base: ExperimentConfig = field(default_factory=ExperimentConfig)
    algorithms: list[str] = field(default_factory=lambda: ["central", "fedavg"])
    protocols: list[str] = field(default_factory=lambda: list(DEFAULT_PROTOCOLS))
    attacks: list[str] = field(default_factory=list)  # [] = every attack
    seeds: list[int] = field(default_factory=lambda: [0])
    central_rounds: int | None = None  # default: base.rounds
    fedstruct_preset: bool = True  # FedStruct: Table 5 lr / decay / dropout / rounds, H2V


def parse_protocol(spec: str) -> tuple[list[str], tuple[str, float] | None]:
    """``"secagg,edgerand:1"`` → (``["secagg"]``, ``("edgerand", 1.0)``)."""
    stack, edge_dp = [], None
    for part in (p.strip().lower() for p in spec.split(",") if p.strip()):
        name, _, eps = part.partition(":")
        if name in EDGE_DP:
            if edge_dp is not None or not eps:
                raise ValueError(
                    f"protocol {spec!r}: one edge-DP entry with its ε, e.g. edgerand:1"
                )
            edge_dp = (name, float(eps))
        elif name != "plain":
            stack.append(part)
    parse_stack(stack)  # validates
    return stack, edge_dp


def cell_config(
    audit: AuditConfig,
    algorithm: str,
    stack: list[str],
    edge_dp: tuple[str, float] | None = None,
) -> ExperimentConfig:
    """The training configuration of one cell (FedStruct takes ``edge_dp`` on Ā's inputs,
    internal and cross blocks: :mod:`securefgl.fedstruct.edge_dp`)."""
    cfg = audit.base.replace(protocol=list(stack), algorithms=[algorithm], eval_every=10**9)
    if algorithm == "central" and audit.central_rounds:
        cfg = cfg.replace(rounds=audit.central_rounds)
    if algorithm in ("fedstruct", "fedgcn"):
        cfg = cfg.replace(cross_edges="known")
    if algorithm == "fedstruct":
        nsf = cfg.fedstruct.nsf or "hop2vec"
        cfg = cfg.replace(fedstruct={"nsf": nsf, "abar_sum": secure_sum_for_stack(stack)})
        if edge_dp is not None:
            cfg = cfg.replace(fedstruct={"edge_dp": edge_dp[0], "edge_epsilon": edge_dp[1]})
        if audit.fedstruct_preset:
            cfg = apply_preset(cfg)
    return cfg


def _rows(
    result: AttackResult,
    metric: str,
    dataset: str,
    algorithm: str,
    protocol: str,
    seed: int,
    run: Any,
) -> list[dict[str, Any]]:
    base = {
        "dataset": dataset,
        "algorithm": algorithm,
        "protocol": protocol,
        "seed": seed,
        "attack": result.attack,
        "adversary": result.adversary,
        "accuracy": run.accuracy,
        "epsilon": run.epsilon,
        "epsilon_unit": run.epsilon_unit,
    }
    if not result.applicable:
        primary = result.primary or metric
        return [
            {**base, "metric": primary, "value": None, "primary": True, "reason": result.reason}
        ]
    keys = [result.primary] + [k for k in result.metrics if k != result.primary]
    return [
        {
            **base,
            "metric": k,
            "value": _finite(result.metrics[k]),
            "primary": k == result.primary,
            "details": result.details if k == result.primary else {},
        }
        for k in keys
    ]


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


@dataclass
class _RunInfo:
    accuracy: float
    epsilon: float | None
    epsilon_unit: str | None


def run_audit(audit: AuditConfig, progress: bool = True) -> list[dict[str, Any]]:
    """Every cell of the grid; returns the result rows."""
    torch.set_num_threads(audit.base.threads)
    data = load_graph(audit.base)
    cells = [
        (seed, algo, proto)
        for seed in audit.seeds
        for algo in audit.algorithms
        for proto in audit.protocols
        if attacks_for(algo, audit.attacks) and not (algo == "central" and proto != "plain")
    ]
    rows: list[dict[str, Any]] = []
    bar = tqdm(cells, desc="audit", disable=None if progress else True)
    for seed, algo, proto in bar:
        bar.set_postfix_str(f"{algo} · {proto}")
        stack, edge_dp = parse_protocol(proto)
        cfg = cell_config(audit, algo, stack, edge_dp)
        hook = (
            edge_dp_hook(*edge_dp, seed=seed)
            if edge_dp and algo not in ("central", "fedstruct")
            else None
        )
        t0 = time.perf_counter()
        run = simulate(cfg, algo, seed, data, progress=False, views_hook=hook)
        world = make_world(cfg, seed, data)
        eps, unit = run.epsilon, ("client-level (accountant)" if run.epsilon else None)
        if edge_dp is not None:
            scope = "internal + cross blocks of Ā" if algo == "fedstruct" else "internal edges"
            eps, unit = edge_dp[1], f"edge-level ({edge_dp[0]}, {scope})"
        info = _RunInfo(run.accuracy, eps, unit)
        log.info("%s %s: acc %.4f (%.1fs)", algo, proto, run.accuracy, time.perf_counter() - t0)
        cell = Cell(run, world, tuple(stack), edge_dp)
        for spec in attacks_for(algo, audit.attacks):
            t1 = time.perf_counter()
            result = spec.call(cell)
            result.details["seconds"] = round(time.perf_counter() - t1, 2)
            rows.extend(_rows(result, spec.metric, audit.base.dataset, algo, proto, seed, info))
        del run, world, cell
    return rows


# ------------------------------------------------------------------------------- outputs


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Headline rows as a Markdown table (N/A rows show their reason)."""
    head = "| dataset | algorithm | protocol | attack | adversary | metric | value | accuracy | ε |"
    lines = [head, "|" + "---|" * 9]
    notes = []
    for r in rows:
        if not r.get("primary", True):
            continue
        if r["value"] is None and r.get("reason"):
            notes.append(r["reason"])
            value = f"n/a [{len(notes)}]"
        else:
            value = "undefined" if r["value"] is None else f"{r['value']:.3f}"
        eps = "–" if r["epsilon"] is None else f"{r['epsilon']:.3g}"
        if r["epsilon"] is not None and str(r.get("epsilon_unit", "")).startswith("edge"):
            eps += " (edge)"
        lines.append(
            f"| {r['dataset']} | {r['algorithm']} | {r['protocol']} | {r['attack']} | "
            f"{r['adversary']} | {r['metric']} | {value} | {100 * r['accuracy']:.1f} | {eps} |"
        )
    if notes:
        lines += ["", "Not applicable:", ""]
        lines += [f"{i}. {n}" for i, n in enumerate(notes, 1)]
    return "\n".join(lines) + "\n"


def plot_audit(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Accuracy vs attack value (one panel per attack) and accuracy vs ε."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    head = [r for r in rows if r.get("primary", True) and r["value"] is not None]
    attacks = sorted({r["attack"] for r in head})
    if not attacks:
        return None
    colors = {ds: f"C{i}" for i, ds in enumerate(dict.fromkeys(r["dataset"] for r in rows))}
    panels = len(attacks) + 1
    cols = min(3, panels)
    nrows = math.ceil(panels / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 4 * nrows), squeeze=False)
    for ax, attack in zip(axes.flat, attacks, strict=False):
        sel = [r for r in head if r["attack"] == attack]
        for r in sel:
            marker = {"central": "s", "fedavg": "o", "fedstruct": "^", "fedgcn": "D"}.get(
                r["algorithm"], "x"
            )
            ax.scatter(100 * r["accuracy"], r["value"], marker=marker, c=colors[r["dataset"]])
            ax.annotate(
                f"{r['dataset']}/{r['algorithm']}/{r['protocol']}",
                (100 * r["accuracy"], r["value"]),
                fontsize=6,
            )
        ax.set_title(f"{attack} ({sel[0]['metric']})", fontsize=9)
        ax.set_xlabel("test accuracy (%)")
        ax.set_ylabel(sel[0]["metric"])
    ax = axes.flat[len(attacks)]
    dp = {
        (r["dataset"], r["algorithm"], r["protocol"]): r
        for r in rows
        if r["epsilon"] is not None and r.get("primary", True)
    }
    for (ds, algo, proto), r in dp.items():
        ax.scatter(r["epsilon"], 100 * r["accuracy"], c=colors[ds])
        ax.annotate(f"{ds}/{algo}/{proto}", (r["epsilon"], 100 * r["accuracy"]), fontsize=6)
    if dp:
        ax.set_xscale("log")
    ax.set_title("accuracy vs ε (client-level accountant / edge-level ε)", fontsize=9)
    ax.set_xlabel("ε")
    ax.set_ylabel("test accuracy (%)")
    for extra in list(axes.flat)[panels:]:
        extra.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def save_audit(
    rows: list[dict[str, Any]],
    folder: str | Path,
    name: str = "audit",
    settings: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write ``<name>.json`` (the rows, a list), ``<name>_meta.json`` (settings),
    ``<name>.md`` and ``<name>.png`` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = {
        "json": folder / f"{name}.json",
        "meta": folder / f"{name}_meta.json",
        "md": folder / f"{name}.md",
    }
    out["json"].write_text(json.dumps(rows, indent=1, default=str) + "\n")
    out["meta"].write_text(json.dumps(settings or {}, indent=1, default=str) + "\n")
    out["md"].write_text(markdown_table(rows))
    png = plot_audit(rows, folder / f"{name}.png")
    if png is not None:
        out["png"] = png
    return out


def audit_settings(audit: AuditConfig) -> dict[str, Any]:
    d = asdict(audit)
    d["base"] = audit.base.to_dict()
    d["attack_targets"] = {k: list(v.targets) for k, v in ATTACKS.items()}
    return d
