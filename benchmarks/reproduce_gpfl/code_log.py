"""The one run the authors' repository logs (``benchmarks/data/gpfl_code_log.json``: NCI1,
k = 25, α = 1, seed 0) beside ours on its very split: ``<method>[authors-log]`` rows hold the
split fixed and vary only our training seeds, so the log's single number is read against our
training's spread, round by round as well as at the end. ``<method>[authors-seed0]`` rows do
the same on the code's default seed-0 split in any cell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.notes import load_data
from benchmarks.harness.results import pyplot, save_figure
from benchmarks.reproduce_gpfl.grid import (
    AUTHORS_LOG,
    AUTHORS_SEED0,
    AUTHORS_SPLIT,
    LOG_CELL,
    paper_value,
)

#: the windows of rounds where the table compares the curves (early learning, the plateau)
WINDOWS = ((1, 50), (151, 200))


def code_log() -> dict[str, Any]:
    return load_data("gpfl_code_log")


def logged_rows(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Our ``[authors-log]`` rows with results, by method."""
    return {r["method"].removesuffix(AUTHORS_LOG): r for r in rows
            if r["method"].endswith(AUTHORS_LOG) and r["mean"] is not None}  # fmt: skip


def mean_curve(row: dict[str, Any]) -> dict[int, float]:
    """Our client-mean test accuracy per round, averaged over the seeds that evaluated it."""
    per_round: dict[int, list[float]] = {}
    for run in row["runs"]:
        for rnd, acc in run.get("curve", []):
            per_round.setdefault(int(rnd), []).append(acc)
    return {r: float(np.mean(v)) for r, v in sorted(per_round.items())}


def _window_gap(ours: dict[int, float], theirs: list[float], lo: int, hi: int) -> str:
    gaps = [ours[r] - theirs[r - 1] for r in range(lo, hi + 1) if r in ours and r <= len(theirs)]
    return f"{np.mean(gaps):+.2f}" if gaps else "–"


def log_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per method: the log's best of the last 10 and last round beside our mean, spread and
    range over training seeds, and how far our mean curve runs from the log's."""
    ours, log = logged_rows(rows), code_log()["methods"]
    out = []
    for method, row in ours.items():
        theirs = log.get(method)
        if theirs is None:
            continue
        best = [r["best_last"] for r in row["runs"]]
        paper = paper_value(*LOG_CELL, method)
        curve = theirs["curve"][:: theirs["evaluations_per_round"]]  # one value per round
        windows = " | ".join(_window_gap(mean_curve(row), curve, lo, hi) for lo, hi in WINDOWS)
        gap = theirs["final_best_test_acc"] - row["mean"]
        out.append(
            f"| {method} | {theirs['final_best_test_acc']:.2f} | {row['mean']:.2f} ± "
            f"{row['std']:.2f} [{min(best):.2f}, {max(best):.2f}] ({row['seeds']} seeds) | "
            f"{gap:+.2f} | {theirs['final_test_acc']:.2f} | {row['final_mean']:.2f} | "
            f"{windows} | {'–' if paper is None else f'{paper[0]:.2f}'} |"
        )
    windows = " | ".join(f"ours − log, rounds {lo}–{hi}" for lo, hi in WINDOWS)
    head = (f"| method | the log, best of last 10 | ours, best of last 10 [min, max] | log − ours "
            f"| the log, last round | ours, last round | {windows} | paper |")  # fmt: skip
    return [head, "|---" * 9 + "|", *out] if out else []


def plot_curves(rows: list[dict[str, Any]], path: Path) -> bool:
    """Client-mean test accuracy per round: the log's run against our mean and range."""
    ours, log = logged_rows(rows), code_log()["methods"]
    methods = [m for m in ours if m in log and mean_curve(ours[m])]
    if not methods:
        return False
    plt = pyplot()
    cols = min(3, len(methods))
    n_rows = -(-len(methods) // cols)
    fig, axes = plt.subplots(n_rows, cols, figsize=(4.2 * cols, 3.2 * n_rows), squeeze=False)
    for ax, method in zip(axes.flat, methods, strict=False):
        theirs = log[method]
        step = 1 / theirs["evaluations_per_round"]
        ax.plot(np.arange(1, len(theirs["curve"]) + 1) * step, theirs["curve"], color="black",
                lw=1, label="the authors' log (1 run)")  # fmt: skip
        runs = [dict(run.get("curve", [])) for run in ours[method]["runs"]]
        rounds = sorted(set.intersection(*(set(r) for r in runs)))
        values = np.array([[r[k] for k in rounds] for r in runs])
        ax.fill_between(rounds, values.min(0), values.max(0), color="tab:blue", alpha=0.25,
                        label=f"ours, range of {len(runs)} seeds")  # fmt: skip
        ax.plot(rounds, values.mean(0), color="tab:blue", lw=1, label="ours, mean")
        ax.set_title(method)
        ax.set_xlabel("round")
        ax.set_ylabel("test accuracy (%)")
    for ax in list(axes.flat)[len(methods):]:
        ax.axis("off")
    fig.suptitle("NCI1, k = 25, α = 1, the log's split: client-mean test accuracy per round")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, bbox_to_anchor=(0.5, 0.0))
    save_figure(fig, path)
    return True


def seed0_table(rows: list[dict[str, Any]]) -> list[str]:
    """Each cell on the code's seed-0 split (training seeds varied) beside our splits, the
    code's five seeds' splits and the paper: is Table 2 one split, repeated?"""
    by_key = {(r["dataset"], r["clients"], float(r["alpha"]), r["method"]): r for r in rows
              if r["protection"] == "plain" and r["mean"] is not None}  # fmt: skip

    def value(row: dict[str, Any] | None, paper: list[float] | None) -> str:
        if row is None:
            return "–"
        gap = "" if paper is None else f" ({row['mean'] - paper[0]:+.2f})"
        return f"{row['mean']:.2f} ± {row['std']:.2f}{gap}"

    out = []
    for (d, k, a, m), row in sorted(by_key.items(), key=lambda kv: str(kv[0])):
        if not m.endswith(AUTHORS_SEED0):
            continue
        base = m.removesuffix(AUTHORS_SEED0)
        paper = paper_value(d, k, a, base)
        ref = "–" if paper is None else f"{paper[0]:.2f} ± {paper[1]:.2f}"
        cells = [by_key.get((d, k, a, base)), by_key.get((d, k, a, base + AUTHORS_SPLIT)), row]
        out.append(f"| {d} k={k} α={a:g} | {base} | "
                   + " | ".join(value(c, paper) for c in cells) + f" | {ref} |")  # fmt: skip
    head = ("| cell | method | our splits, seeds 0–4 (− paper) | the code's splits, its "
            "seeds 0, 10, 42, 111, 123 | the code's seed-0 split, training seeds 0–4 | "
            "paper |")  # fmt: skip
    return [head, "|---|---|---|---|---|---|", *out] if out else []
