"""The leakage audit: algorithm × protocol stack × attack on one dataset / partition.

Each (algorithm, protocol) cell is trained once (:func:`attacks.simulation.simulate`,
payloads stored), then every requested attack that targets the algorithm runs on its
adversary's view (:mod:`attacks.registry`). A protocol is a stack as in
``securefgl run --protocol`` (``plain``, ``secagg``, ``ckks``, ``clip_noise``,
``secagg,clip_noise`` …) optionally with a client-side edge-DP defence on each client's
own graph (``edgerand:1``, ``lapgraph:4``; :mod:`attacks.defences`). Each attack yields
one row per metric (the headline first, ``primary: true``) with its naive ``baseline``,
``advantage = value − baseline`` and ``leaks`` (advantage above the stated ``margin``;
:mod:`attacks.naive`), the cell's test accuracy and ε with what that ε ``covers``; an
attack that does not apply yields ``value: null`` and a ``reason``.

Outputs (:func:`save_audit`), in ``<output_dir>/<name>/`` as for ``securefgl run``:
``result.json`` (settings, units, the rows and the provenance), ``result.md`` (headline
rows) and ``result.png`` (accuracy vs attack value per attack; accuracy vs ε).
"""

from __future__ import annotations

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
from protocols.dp.rng import NOISE_SEEDED
from protocols.registry import parse_stack, secure_sum_for_stack
from securefgl.algorithms.fedstruct.settings import EDGE_DP_MECHANISMS as EDGE_DP
from securefgl.algorithms.fedstruct.settings import apply_preset
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment.report import claim_assumptions
from securefgl.experiment.runner import load_graph
from securefgl.extras import pyplot

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

    def __post_init__(self) -> None:
        if self.base.protocol.stack:
            raise ConfigError("audit: the protocols give each cell's stack; the base "
                              f"configuration's protocol stack {self.base.protocol.label!r} "
                              "would be ignored: put it in protocols")  # fmt: skip
        if self.central_rounds is not None and self.central_rounds < 1:
            raise ConfigError(f"audit: central_rounds must be ≥ 1, got {self.central_rounds}")


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
    internal and cross blocks: :mod:`securefgl.algorithms.fedstruct.edge_dp`)."""
    cfg = audit.base.replace(protocol=list(stack), algorithms=[algorithm], eval_every=10**9)
    if algorithm == "central" and audit.central_rounds is not None:
        cfg = cfg.replace(rounds=audit.central_rounds)
    if algorithm in ("fedstruct", "fedgcn"):
        cfg = cfg.replace(cross_edges="known")
    if algorithm == "fedstruct":
        nsf = cfg.fedstruct.nsf or "hop2vec"
        cfg = cfg.replace(fedstruct={"nsf": nsf, "sum_mode": secure_sum_for_stack(stack)})
        if edge_dp is not None:
            cfg = cfg.replace(fedstruct={"edge_dp": edge_dp[0], "edge_epsilon": edge_dp[1]})
        if audit.fedstruct_preset:
            cfg = apply_preset(cfg)
    return cfg


def guarantees(
    algorithm: str, stack: list[str], edge_dp: tuple[str, float] | None, run: Any
) -> list[dict[str, Any]]:
    """Each ε of a cell with its unit and what it ``covers`` (the edge-DP defence first):
    every claim of the run's ``privacy.guarantees`` (the stack's headline ledger, SpreadFGL's
    H uploads, GPFL's property LDP, ...)."""
    out = []
    if edge_dp is not None:
        mech, eps = edge_dp
        covers = (
            "Ā and structural NSFs (edge-level, internal + cross blocks); not the "
            "feature branch (true internal edges), features, labels"
            if algorithm == "fedstruct"
            else "each client's internal edges as trained on and served (edge-level); "
            "not cross-client edges, features, labels"
        )
        out.append({"epsilon": eps, "unit": f"edge-level ({mech})", "covers": covers,
                    "adversary": "everyone"})  # the edges are randomised before any use
    privacy = run.result.privacy
    mech = parse_stack(stack)[1]
    stack_claimed = False
    for g in privacy.get("guarantees", []):
        unit = str(g.get("unit") or "")
        if g.get("epsilon") is None or (edge_dp is not None and unit.startswith("edge-level")):
            continue  # the defence's own claim, above
        against = f"; against the {g['adversary']}" if g.get("adversary") else ""
        if unit.startswith("client-level"):
            if stack_claimed or mech is None:
                continue  # the headline ledger only
            stack_claimed = True
            covers = (
                f"released model updates (client-level, clip_noise{against})"
                if mech == "clip_noise"
                else f"each client's uploaded update (client-level local DP, {mech}{against})"
            )
            assumes = claim_assumptions(g)
            out.append({"epsilon": g["epsilon"], "unit": "client-level (accountant)",
                        "covers": covers, "adversary": g.get("adversary"),
                        "assumes": assumes or None})  # fmt: skip
        elif privacy.get("h_epsilon") is not None and g["epsilon"] == privacy["h_epsilon"]:
            covers = (f"each node's released H row (local DP, {privacy.get('h_mechanism')}, over "
                      f"{privacy.get('h_uploads')} uploads; against the "
                      f"{privacy.get('h_adversary')}); not the model updates")  # fmt: skip
            out.append({"epsilon": g["epsilon"], "unit": "node-row (H uploads)",
                        "covers": covers})  # fmt: skip
        else:
            covers = str(g.get("covers") or f"{unit}{against}")
            out.append({"epsilon": g["epsilon"], "unit": unit, "covers": covers,
                        "adversary": g.get("adversary")})  # fmt: skip
    if privacy.get("noise") == NOISE_SEEDED:  # seeded noise: every claim is void
        for g in out:
            g["covers"] += " — seeded noise: NOT PRIVATE"
    return out


def _rows(
    result: AttackResult,
    metric: str,
    dataset: str,
    algorithm: str,
    protocol: str,
    seed: int,
    run: Any,
) -> list[dict[str, Any]]:
    first = run.guarantees[0] if run.guarantees else {}
    base = {
        "dataset": dataset,
        "algorithm": algorithm,
        "protocol": protocol,
        "seed": seed,
        "attack": result.attack,
        "adversary": result.adversary,
        "accuracy": run.accuracy,
        "epsilon": first.get("epsilon"),
        "epsilon_unit": first.get("unit"),
        "covers": first.get("covers"),
        "guarantees": list(run.guarantees),
    }
    if not result.applicable:
        primary = result.primary or metric
        none = dict.fromkeys(("baseline", "advantage", "margin", "leaks"))
        return [
            {**base, "metric": primary, "value": None, **none, "primary": True,
             "reason": result.reason}
        ]  # fmt: skip
    keys = [result.primary] + [k for k in result.metrics if k != result.primary]
    return [
        {
            **base,
            "metric": k,
            "value": _finite(result.metrics[k]),
            "baseline": _finite(result.baseline(k)),
            "advantage": _finite(result.advantage(k)),
            "margin": _finite(result.margin(k)),
            "leaks": result.leaks(k),
            "primary": k == result.primary,
            "details": result.details if k == result.primary else {},
            # a measured lower bound above the run's own claimed ε: the claim is false
            "violation": bool(result.details.get("violation")) if k == result.primary else False,
        }
        for k in keys
    ]


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


@dataclass
class _RunInfo:
    accuracy: float
    guarantees: list[dict[str, Any]]


def run_audit(audit: AuditConfig, progress: bool = True) -> list[dict[str, Any]]:
    """Every cell of the grid; returns the result rows."""
    torch.set_num_threads(audit.base.threads)
    data = load_graph(audit.base)
    cells = [
        (seed, algo, proto)
        for seed in audit.seeds
        for algo in audit.algorithms
        for proto in audit.protocols
        if attacks_for(algo, audit.attacks, audit.base.task)
        and not (algo == "central" and proto != "plain")
    ]
    if not cells:
        raise ValueError(
            f"audit: no cell to run: none of the attacks {audit.attacks or 'all'} targets "
            f"{audit.algorithms} under {audit.protocols} (central runs only plain; "
            "securefgl audit --list-attacks names each attack's targets)"
        )
    rows: list[dict[str, Any]] = []
    bar = tqdm(cells, desc="audit", disable=None if progress else True)
    for seed, algo, proto in bar:
        bar.set_postfix_str(f"{algo} · {proto}")
        stack, edge_dp = parse_protocol(proto)
        cfg = cell_config(audit, algo, stack, edge_dp)
        hook = (
            edge_dp_hook(*edge_dp, noise_seed=seed if cfg.protocol.seeded_noise else None)
            if edge_dp and algo not in ("central", "fedstruct")
            else None
        )
        t0 = time.perf_counter()
        specs = attacks_for(algo, audit.attacks, audit.base.task)
        keep = frozenset(tag for spec in specs for tag in spec.keep_tags)
        run = simulate(cfg, algo, seed, data, progress=False, views_hook=hook, keep_tags=keep)
        world = make_world(cfg, seed, data)
        info = _RunInfo(run.accuracy, guarantees(algo, stack, edge_dp, run))
        log.info("%s %s: acc %.4f (%.1fs)", algo, proto, run.accuracy, time.perf_counter() - t0)
        cell = Cell(run, world, tuple(stack), edge_dp)
        for spec in specs:
            t1 = time.perf_counter()
            result = spec.call(cell)
            result.details["seconds"] = round(time.perf_counter() - t1, 2)
            rows.extend(_rows(result, spec.metric, audit.base.dataset, algo, proto, seed, info))
        del run, world, cell
    return rows


# ------------------------------------------------------------------------------- outputs


def epsilon_cells(row: dict[str, Any]) -> tuple[str, str]:
    """The ε cell ("1 (edge)"; several joined by "; ") and its "covers" cell."""
    gs = row.get("guarantees") or (
        [] if row.get("epsilon") is None
        else [{"epsilon": row["epsilon"], "unit": row.get("epsilon_unit") or "",
               "covers": row.get("covers")}]
    )  # fmt: skip
    eps = "; ".join(
        f"{g['epsilon']:.3g}" + (" (edge)" if str(g.get("unit", "")).startswith("edge") else "")
        for g in gs
    )
    covers = "; ".join(
        str(g.get("covers") or "not stated")
        + (f" (assumes: {g['assumes']})" if g.get("assumes") else "")
        for g in gs
    )
    return eps or "–", covers or "–"


def _num(x: float | None, sign: bool = False) -> str:
    return "–" if x is None else (f"{x:+.3f}" if sign else f"{x:.3f}")


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Headline rows as a Markdown table: value beside its naive baseline, the advantage
    and the leak verdict; ε beside what it covers (N/A rows show their reason)."""
    head = (
        "| dataset | algorithm | protocol | attack | adversary | metric | value | baseline | "
        "advantage | leaks | accuracy | ε | ε covers |"
    )
    lines = [head, "|" + "---|" * 13]
    notes = []
    for r in rows:
        if not r.get("primary", True):
            continue
        if r["value"] is None and r.get("reason"):
            notes.append(r["reason"])
            value = f"n/a [{len(notes)}]"
        else:
            value = "undefined" if r["value"] is None else f"{r['value']:.3f}"
        if r.get("violation"):
            value += " **⚠ above the claimed ε**"
        leaks = {True: "yes", False: "no"}.get(r.get("leaks"), "–")  # type: ignore[arg-type]
        eps, covers = epsilon_cells(r)
        lines.append(
            f"| {r['dataset']} | {r['algorithm']} | {r['protocol']} | {r['attack']} | "
            f"{r['adversary']} | {r['metric']} | {value} | {_num(r.get('baseline'))} | "
            f"{_num(r.get('advantage'), sign=True)} | {leaks} | {100 * r['accuracy']:.1f} | "
            f"{eps} | {covers} |"
        )
    if notes:
        lines += ["", "Not applicable:", ""]
        lines += [f"{i}. {n}" for i, n in enumerate(notes, 1)]
    bad = violations(rows)
    if bad:
        lines = [
            f"**⚠ {len(bad)} DP claim(s) do not hold: the one-run audit's lower bound exceeds "
            "the ε the run reports** ("
            + "; ".join(f"{r['algorithm']} · {r['protocol']}: ε_LB {r['value']:.2f}" for r in bad)
            + ")",
            "",
            *lines,
        ]
    return "\n".join(lines) + "\n"


def violations(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows whose measured lower bound refutes the run's own claimed ε."""
    return [r for r in rows if r.get("violation")]


def plot_audit(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Accuracy vs attack value (one panel per attack) and accuracy vs ε (one panel per ε
    unit and adversary: never one scale for two). In every panel a cell's colour is its
    algorithm, its marker its protection and its fill its dataset, named in one legend."""
    plt = pyplot("the audit plot")
    head = [r for r in rows if r.get("primary", True) and r["value"] is not None]
    attacks = sorted({r["attack"] for r in head})
    if not attacks:
        return None
    dp = {(r["dataset"], r["algorithm"], r["protocol"]): r for r in rows
          if r["epsilon"] is not None and r.get("primary", True)}  # fmt: skip
    scales = list(dict.fromkeys(_scale(r) for r in dp.values()))
    look = _Look(rows)
    panels = len(attacks) + len(scales)
    cols = min(3, panels)
    nrows = math.ceil(panels / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 4 * nrows + 0.8), squeeze=False)
    for ax, attack in zip(axes.flat, attacks, strict=False):
        sel = [r for r in head if r["attack"] == attack]
        for r in sel:
            look.scatter(ax, 100 * r["accuracy"], r["value"], r)
        ax.set_title(f"{attack} ({sel[0]['metric']})", fontsize=9)
        ax.set_xlabel("test accuracy (%)")
        ax.set_ylabel(sel[0]["metric"])
    for ax, scale in zip(list(axes.flat)[len(attacks):], scales, strict=False):
        for r in (r for r in dp.values() if _scale(r) == scale):
            look.scatter(ax, r["epsilon"], 100 * r["accuracy"], r)
        ax.set_xscale("log")
        ax.set_title(f"accuracy vs ε ({scale})", fontsize=9)
        ax.set_xlabel("ε")
        ax.set_ylabel("test accuracy (%)")
    for extra in list(axes.flat)[panels:]:
        extra.axis("off")
    handles = look.handles(plt)
    fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), fontsize=7,
               frameon=False)  # fmt: skip
    fig.tight_layout(rect=(0, 0.06 + 0.025 * math.ceil(len(handles) / 4), 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _scale(row: dict[str, Any]) -> str:
    """An ε's unit and the adversary it is stated against."""
    first = (row.get("guarantees") or [{}])[0]
    against = f", vs {first['adversary']}" if first.get("adversary") else ""
    return f"{row.get('epsilon_unit')}{against}"


class _Look:
    """Colour per algorithm, marker per protection (the sweep's figures' convention), fill
    per dataset (tinted or hollow), the same in every panel; the first protections draw
    larger, so that cells with equal results (plain and secagg) nest visibly."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        def order(key: str) -> list[str]:
            return list(dict.fromkeys(str(r[key]) for r in rows))

        self.color = {a: f"C{i % 10}" for i, a in enumerate(order("algorithm"))}
        self.marker = {p: "osD^vPX*<>"[i % 10] for i, p in enumerate(order("protocol"))}
        self.filled = {d: i == 0 for i, d in enumerate(order("dataset"))}

    def scatter(self, ax: Any, x: float, y: float, r: dict[str, Any]) -> None:
        from matplotlib.colors import to_rgba  # the plots extra, loaded with pyplot

        color = self.color[str(r["algorithm"])]
        face = to_rgba(color, 0.25) if self.filled[str(r["dataset"])] else "none"
        rank = list(self.marker).index(str(r["protocol"]))
        ax.scatter(x, y, marker=self.marker[str(r["protocol"])], facecolors=[face],
                   edgecolors=color, linewidths=1.5, zorder=3,
                   s=20 * 2 ** min(len(self.marker) - 1 - rank, 4))  # fmt: skip

    def handles(self, plt: Any) -> list[Any]:
        line = plt.Line2D
        out = [line([], [], marker="s", linestyle="none", color=c, label=a)
               for a, c in self.color.items()]  # fmt: skip
        out += [line([], [], marker=m, linestyle="none", color="k", label=f"protection {p}")
                for p, m in self.marker.items()]  # fmt: skip
        if len(self.filled) > 1:
            out += [line([], [], marker="o", linestyle="none", color="k",
                         markerfacecolor="k" if f else "none", label=f"dataset {d}")
                    for d, f in self.filled.items()]  # fmt: skip
        return out


#: the units of an audit's result.json
UNITS = {
    "accuracy": "fraction in [0, 1] (the cell's test accuracy; tables show %)",
    "value": "the attack's metric (AUC, accuracy, ... in [0, 1]; see metric)",
    "epsilon": "(ε, δ)-DP of each claim in guarantees, in the claim's unit",
}


def save_audit(
    rows: list[dict[str, Any]],
    folder: str | Path,
    settings: dict[str, Any] | None = None,
    config: ExperimentConfig | None = None,
) -> dict[str, Path]:
    """Write ``result.json`` (settings, units, rows and provenance), ``result.md`` and
    ``result.png`` into ``folder`` (a run's ``<output_dir>/<name>/``, as ``securefgl run``);
    ``config``: the base experiment, for the provenance."""
    from securefgl.experiment.provenance import provenance
    from securefgl.experiment.results import save_payload

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    payload = {"settings": settings or {}, "units": UNITS, "rows": rows,
               "provenance": provenance(config)}  # fmt: skip
    save_payload(folder, payload, markdown_table(rows))
    out = {"json": folder / "result.json", "md": folder / "result.md"}
    png = plot_audit(rows, folder / "result.png")
    if png is not None:
        out["png"] = png
    return out


def audit_settings(audit: AuditConfig) -> dict[str, Any]:
    d = asdict(audit)
    d["base"] = audit.base.to_dict()
    d["attack_targets"] = {k: list(v.targets) for k, v in ATTACKS.items()}
    return d
