"""The frontier's three figures (PNG): utility vs ε, attack success vs ε beside each
attack's naive baseline, and utility vs attack success.

ε runs on a log axis; the unprotected cells (ε = ∞) sit on a separate column to its right,
past a broken axis, never at a made-up ε. Client-level and edge-level ε get separate
panels. One colour per algorithm, one marker and line style per protection; legends sit
below the panels, outside the data.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from securefgl.extras import pyplot

MARKERS = "osD^vP*Xh<>"
STYLES = ["-", "--", ":", "-."]


def _pyplot() -> Any:
    return pyplot("the frontier's plots")


class _Look:
    """Colour per algorithm, marker and line style per protection (stable across panels)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        algos = list(dict.fromkeys(r["algorithm"] for r in rows))
        prots = list(dict.fromkeys(r["protection"] for r in rows))
        self.color = {a: f"C{i}" for i, a in enumerate(algos)}
        self.marker = {p: MARKERS[i % len(MARKERS)] for i, p in enumerate(prots)}
        self.style = {p: STYLES[i % len(STYLES)] for i, p in enumerate(prots)}


def _series(rows: list[dict[str, Any]], unit: str) -> dict[tuple[str, str], list[dict]]:
    """Rows with a finite ε of ``unit``, by (algorithm, protection), in ε order."""
    out: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r["epsilon"] is not None and r["epsilon_unit"] == unit:
            out.setdefault((r["algorithm"], r["protection"]), []).append(r)
    return {k: sorted(v, key=lambda r: r["epsilon"]) for k, v in out.items()}


def _unprotected(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["epsilon_unit"] is None]


def _break_marks(left: Any, right: Any) -> None:
    """Diagonal marks where the ε axis breaks before the ∞ column."""
    kw = {"marker": [(-1, -1.5), (1, 1.5)], "markersize": 10, "linestyle": "none",
          "color": "k", "mec": "k", "mew": 1, "clip_on": False}  # fmt: skip
    left.plot([1, 1], [0, 1], transform=left.transAxes, **kw)
    right.plot([0, 0], [0, 1], transform=right.transAxes, **kw)
    left.spines["right"].set_visible(False)
    right.spines["left"].set_visible(False)
    right.tick_params(left=False, labelleft=False)


def _panel(fig: Any, spec: Any, look: _Look, rows: list[dict[str, Any]], unit: str,
           y: str, y_std: str | None, ylabel: str, title: str) -> None:  # fmt: skip
    from matplotlib.ticker import FuncFormatter, NullFormatter

    grid = spec.subgridspec(1, 2, width_ratios=[6, 1], wspace=0.05)
    ax = fig.add_subplot(grid[0])
    inf = fig.add_subplot(grid[1], sharey=ax)
    for (algo, prot), series in _series(rows, unit).items():
        xs = [r["epsilon"] for r in series]
        ys = [r[y] for r in series]
        errs = [(r[y_std] or 0.0) if y_std else 0.0 for r in series]
        ax.errorbar(xs, ys, yerr=errs, color=look.color[algo], marker=look.marker[prot],
                    linestyle=look.style[prot], capsize=3,
                    label=f"{algo} · {prot}")  # fmt: skip
        if y == "attack_value" and series[0]["attack_baseline"] is not None:
            base = [r["attack_baseline"] for r in series]
            ax.plot(xs, base, color=look.color[algo], linestyle=":", linewidth=1, alpha=0.7)
    free = _unprotected(rows)
    for i, r in enumerate(free):
        x = (i - (len(free) - 1) / 2) * 0.12  # side by side, not on top of each other
        err = (r[y_std] or 0.0) if y_std else 0.0
        inf.errorbar([x], [r[y]], yerr=[err], color=look.color[r["algorithm"]],
                     marker=look.marker[r["protection"]], linestyle="none", capsize=3,
                     label=f"{r['algorithm']} · {r['protection']} (ε = ∞)")  # fmt: skip
        if y == "attack_value" and r["attack_baseline"] is not None:
            inf.plot([x - 0.05, x + 0.05], [r["attack_baseline"]] * 2, color="k", linewidth=1)
    ax.set_xscale("log")
    ticks = sorted({r["epsilon"] for series in _series(rows, unit).values() for r in series})
    ax.set_xticks(ticks)  # the ε values themselves, not crowded decade sub-labels
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(f"ε ({unit}, as reported; log scale)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    inf.set_xlim(-0.5, 0.5)
    inf.set_xticks([0])
    inf.set_xticklabels(["∞\n(no DP)"])
    _break_marks(ax, inf)


def _legend(fig: Any, rows: list[dict[str, Any]], extra: str = "") -> None:
    handles, labels = {}, []
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    if extra:
        from matplotlib.lines import Line2D

        handles[extra] = Line2D([], [], color="grey", linestyle=":")
        labels.append(extra)
    fig.legend([handles[lab] for lab in labels], labels, loc="lower center",
               ncol=min(3, len(labels)), fontsize=8, frameon=False)  # fmt: skip


def _units(rows: list[dict[str, Any]]) -> list[str]:
    units = list(dict.fromkeys(r["epsilon_unit"] for r in rows if r["epsilon_unit"]))
    return units or ["client-level"]


def _mark_seeded(fig: Any, rows: list[dict[str, Any]]) -> None:
    """A figure with seeded-noise cells says so above its panels."""
    if any(r.get("seeded_noise") for r in rows):
        fig.suptitle("seeded noise: NOT PRIVATE (every ε here is void)", color="firebrick",
                     fontsize=10, fontweight="bold")  # fmt: skip


def _save(fig: Any, path: Path, legend_rows: int, rows: list[dict[str, Any]]) -> Path:
    _mark_seeded(fig, rows)
    inches = 0.75 + 0.22 * legend_rows  # the axis labels and the legend below the panels
    fig.subplots_adjust(bottom=inches / fig.get_figheight(), top=1 - 0.45 / fig.get_figheight())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:  # a wide legend stays whole; readers see the old figure or the new one
        fig.savefig(tmp, dpi=120, bbox_inches="tight", pad_inches=0.15, format=path.suffix[1:])
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        _pyplot().close(fig)
    return path


def plot_utility(rows: list[dict[str, Any]], path: Path) -> Path:
    """Test accuracy vs ε, one panel per ε unit."""
    plt, look, units = _pyplot(), _Look(rows), _units(rows)
    cells = [_percent(r) for r in _first_attack(rows)]
    fig = plt.figure(figsize=(6.5 * len(units), 5.2))
    outer = fig.add_gridspec(1, len(units), wspace=0.3)
    for i, unit in enumerate(units):
        _panel(fig, outer[i], look, cells, unit, "utility", "utility_std",
               "test accuracy (%)", f"utility vs {unit} ε")  # fmt: skip
    _legend(fig, cells)
    pairs = len({(r["algorithm"], r["protection"]) for r in cells})
    return _save(fig, path, math.ceil(pairs / 3), rows)


def plot_attacks(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Each attack's success vs ε (dotted: its naive baseline), one row per attack."""
    attacks = list(dict.fromkeys(r["attack"] for r in rows if r["attack"]))
    if not attacks:
        return None
    plt, look, units = _pyplot(), _Look(rows), _units(rows)
    fig = plt.figure(figsize=(6.5 * len(units), 4.4 * len(attacks) + 1))
    outer = fig.add_gridspec(len(attacks), len(units), hspace=0.45, wspace=0.3)
    for a, attack in enumerate(attacks):
        sel = [r for r in rows if r["attack"] == attack and r["attack_value"] is not None]
        metric = next((r["metric"] for r in sel), "value")
        for u, unit in enumerate(units):
            _panel(fig, outer[a, u], look, sel, unit, "attack_value", "attack_value_std",
                   f"{attack}: {metric}", f"{attack} vs {unit} ε")  # fmt: skip
    _legend(fig, rows, extra="naive baseline (dotted; ∞ column: black tick)")
    pairs = len({(r["algorithm"], r["protection"]) for r in rows}) + 1
    return _save(fig, path, math.ceil(pairs / 3), rows)


def plot_tradeoff(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Test accuracy vs attack success, one panel per attack (dotted: each algorithm's
    naive baseline)."""
    attacks = list(dict.fromkeys(r["attack"] for r in rows if r["attack"]))
    if not attacks:
        return None
    plt, look = _pyplot(), _Look(rows)
    fig, axes = plt.subplots(1, len(attacks), figsize=(5.5 * len(attacks), 5.2), squeeze=False)
    for ax, attack in zip(axes[0], attacks, strict=True):
        sel = [r for r in rows if r["attack"] == attack and r["attack_value"] is not None]
        groups: dict[tuple[str, str], list[dict]] = {}
        for r in sel:
            groups.setdefault((r["algorithm"], r["protection"]), []).append(r)
        for (algo, prot), rs in groups.items():
            rs = sorted(rs, key=lambda r: math.inf if r["epsilon"] is None else r["epsilon"])
            label = f"{algo} · {prot}" + (" (ε = ∞)" if rs[0]["epsilon_unit"] is None else "")
            ax.plot([r["attack_value"] for r in rs], [100 * r["utility"] for r in rs],
                    color=look.color[algo], marker=look.marker[prot],
                    linestyle=look.style[prot], label=label)  # fmt: skip
            for r in rs:  # which point is which privacy level
                if r["epsilon"] is not None:
                    ax.annotate(f"ε={r['epsilon']:.3g}", (r["attack_value"], 100 * r["utility"]),
                                textcoords="offset points", xytext=(4, 3), fontsize=7,
                                color=look.color[algo])  # fmt: skip
        for algo in dict.fromkeys(r["algorithm"] for r in sel):
            base = [r["attack_baseline"] for r in sel
                    if r["algorithm"] == algo and r["attack_baseline"] is not None]  # fmt: skip
            if base:  # each algorithm's own baseline (its graph, its model's outputs)
                ax.axvline(sum(base) / len(base), color=look.color[algo], linestyle=":",
                           linewidth=1)  # fmt: skip
        metric = next((r["metric"] for r in sel), "value")
        ax.set_xlabel(f"{attack}: {metric} (right: more leakage)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"utility vs {attack}", fontsize=10)
        ax.grid(alpha=0.3)
    _legend(fig, rows, extra="naive baseline of the attack (per algorithm, its colour)")
    pairs = len({(r["algorithm"], r["protection"]) for r in rows}) + 1
    return _save(fig, path, math.ceil(pairs / 3), rows)


def _percent(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its utility (a fraction) in %, as the figures show it."""
    value, std = row["utility"], row["utility_std"]
    return {**row, "utility": None if value is None else 100 * value,
            "utility_std": None if std is None else 100 * std}  # fmt: skip


def _first_attack(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per cell group (the utility repeats across a group's attack rows)."""
    seen, out = set(), []
    for r in rows:
        key = (r["algorithm"], r["protection"], r["level_kind"], r["level"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def plot_frontier(rows: list[dict[str, Any]], folder: Path, name: str) -> list[Path]:
    """The three figures as ``<name>_utility.png``, ``<name>_attacks.png`` and
    ``<name>_tradeoff.png`` in ``folder`` (the last two only with attacks)."""
    made = [
        plot_utility(rows, folder / f"{name}_utility.png"),
        plot_attacks(rows, folder / f"{name}_attacks.png"),
        plot_tradeoff(rows, folder / f"{name}_tradeoff.png"),
    ]
    return [p for p in made if p is not None]
