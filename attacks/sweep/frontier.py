"""A sweep's frontier: its cells averaged over seeds, one row per (algorithm, protection,
privacy level, attack), as JSON and a Markdown table.

A row: ``algorithm``, ``protection``, ``epsilon`` (the ε the runs reported, mean over
seeds; ``null`` for ε = ∞, no DP), ``epsilon_unit`` (``client-level`` or ``edge-level``,
and the adversary: ``client-level, vs server``), ``epsilon_covers`` and
``epsilon_assumes`` (what the ε covers and rests on),
``level`` / ``level_kind`` (the sweep's target ε, σ or per-release ε), ``dp_noise``,
``seeds``, ``utility`` / ``utility_std`` (test accuracy as a fraction in [0, 1], as in
result.json; mean and sample std over seeds; tables and figures show %), ``attack``,
``metric``, ``adversary``, ``attack_value`` / ``attack_value_std`` and
``attack_baseline`` (the attack's naive baseline, mean over seeds). An attack that did not
apply has ``attack_value`` null and its ``reason``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from protocols.dp.rng import NOISE_SEEDED


def _mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return None, None
    return float(np.mean(xs)), (float(np.std(xs, ddof=1)) if len(xs) > 1 else None)


def _seeded(record: dict[str, Any]) -> bool:
    """Whether a cell's DP noise was seeded (not private); cells recorded before the run's
    ``noise`` label carry ``private`` instead."""
    if "noise" in record:
        return record["noise"] == NOISE_SEEDED
    return record.get("private") is False


def _scale(record: dict[str, Any]) -> str | None:
    """The ε's unit and the adversary it is stated against (``client-level, vs server``):
    claims against different adversaries are never read on one scale."""
    unit, against = record["unit"], record.get("adversary_of_epsilon")
    return f"{unit}, vs {against}" if unit and against else unit


def frontier_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The frontier of a sweep's cell records (:func:`attacks.sweep.engine.run_sweep`)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        key = (r["algorithm"], r["protection"], r["level_kind"], r["level"])
        groups.setdefault(key, []).append(r)
    rows = []
    for (algorithm, protection, kind, level), runs in groups.items():
        utility, utility_std = _mean_std([r["utility"] for r in runs])
        epsilon, _ = _mean_std([r["epsilon"] for r in runs])
        noise, _ = _mean_std([r["dp_noise"] for r in runs])
        base = {
            "algorithm": algorithm, "protection": protection,
            "epsilon": epsilon, "epsilon_unit": _scale(runs[0]),
            "epsilon_covers": runs[0].get("epsilon_covers"),
            "epsilon_assumes": runs[0].get("epsilon_assumes"),
            "level": level, "level_kind": kind, "dp_noise": noise,
            "seeds": sorted(r["seed"] for r in runs),
            "utility": utility, "utility_std": utility_std,
            "seeded_noise": any(_seeded(r) for r in runs),
        }  # fmt: skip
        names = list(dict.fromkeys(a["attack"] for r in runs for a in r["attacks"]))
        if not names:
            rows.append({**base, **dict.fromkeys(("attack", "metric", "adversary",
                         "attack_value", "attack_value_std", "attack_baseline"))})  # fmt: skip
        for name in names:
            hits = [a for r in runs for a in r["attacks"] if a["attack"] == name]
            value, value_std = _mean_std([a["value"] for a in hits])
            baseline, _ = _mean_std([a["baseline"] for a in hits])
            row = {**base, "attack": name, "metric": hits[0]["metric"],
                   "adversary": hits[0]["adversary"], "attack_value": value,
                   "attack_value_std": value_std, "attack_baseline": baseline}  # fmt: skip
            if value is None:
                row["reason"] = next((a["reason"] for a in hits if a.get("reason")), None)
            rows.append(row)
    return rows


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _eps(row: dict[str, Any]) -> str:
    if row["epsilon"] is None:
        return "∞ (no DP)" if row["epsilon_unit"] is None else "not reported"
    return f"{row['epsilon']:.3g} ({row['epsilon_unit']})"


def markdown(rows: list[dict[str, Any]], title: str = "Privacy–utility frontier") -> str:
    """The frontier as a Markdown table (ε = ∞ first within a protection)."""
    lines = [
        f"# {title}", "",
        "Accuracy: test accuracy in %, mean ± sample std over the seeds. ε: what the runs "
        "reported (mean over seeds), in its unit and against its adversary; ε of different "
        "units or adversaries are not comparable. Attack values beside their naive baseline "
        "(what the adversary guesses without the attack).", "",
        "| algorithm | protection | ε | σ | seeds | accuracy (%) | attack | metric | value "
        "| baseline |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip

    def order(r: dict[str, Any]) -> tuple:
        return (r["algorithm"], r["protection"], -(r["epsilon"] or math.inf), r["attack"] or "")

    for r in sorted(rows, key=order):
        acc = _num(None if r["utility"] is None else 100 * r["utility"], 1) + (
            "" if r["utility_std"] is None else f" ± {100 * r['utility_std']:.1f}"
        )
        value = _num(r["attack_value"]) + (
            "" if r["attack_value_std"] is None else f" ± {r['attack_value_std']:.3f}"
        )
        if r.get("reason"):
            value = f"n/a: {r['reason']}"
        noise = "–" if r["dp_noise"] is None else f"{r['dp_noise']:.3g}"
        note = " (seeded noise: NOT PRIVATE)" if r["seeded_noise"] else ""
        lines.append(
            f"| {r['algorithm']} | {r['protection']}{note} | {_eps(r)} | {noise} | "
            f"{len(r['seeds'])} | {acc} | {r['attack'] or '–'} | {r['metric'] or '–'} | "
            f"{value} | {_num(r['attack_baseline'])} |"
        )
    return "\n".join(lines) + "\n"
