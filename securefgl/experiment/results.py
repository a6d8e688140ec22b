"""Saving results: one JSON file (config, per-run histories, summary) and a Markdown table,
each written atomically (a temporary file in the same folder, then ``os.replace``), so a
folder never holds half a ``result.json``."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from securefgl.config import ConfigError, ExperimentConfig, check_run_name
from securefgl.experiment.runner import ExperimentResult


def default_name(result: ExperimentResult) -> str:
    cfg = result.config
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{cfg.dataset.lower()}-{cfg.partition}-K{cfg.clients}-{stamp}"


def markdown_table(result: ExperimentResult) -> str:
    cfg = result.config
    graph = cfg.task == "graph"
    split = f"Dirichlet α = {cfg.graph.dirichlet:g} label skew" if graph else (
        f"{cfg.partition} partition")  # fmt: skip
    last = f"best of last {cfg.graph.best_of_last}"
    third = last if graph else "val acc"
    lines = [
        f"# {cfg.dataset} · {split} · {cfg.clients} clients · "
        f"protocol {cfg.protocol.label}",
        "",
        f"{cfg.rounds} rounds × {cfg.local_epochs} local epoch(s), "
        + (f"fold {cfg.graph.test_fold} of {cfg.graph.folds} per client tested, "
         if graph else f"split {'/'.join(f'{f:g}' for f in cfg.split)}, ")
        + f"seeds {cfg.seeds}. Accuracy and macro-F1 in % (mean ± std over seeds), "
        + ("mean over clients of local test accuracy, last round; the "
           f"{last} rounds beside it. " if graph else "last-round model. ")
        + "MB and seconds include the set-up (e.g. FedStruct's Ā build).",
        "",
        f"| algorithm | model | federated | test acc | test macro-F1 | {third} | ε (δ) "
        "| MB exchanged | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result.summary():
        lines.append(
            f"| {row['algorithm']} | {row.get('model', '')} "
            f"| {'yes' if row['federated'] else 'no (upper bound)'} "
            f"| {row['test_acc']:.2f} ± {row['test_acc_std']:.2f} "
            f"| {row['test_f1']:.2f} ± {row['test_f1_std']:.2f} "
            f"| {_mean_std(row, 'best_last_test_acc' if graph else 'val_acc')} "
            f"| {format_epsilon(row)} "
            f"| {row['bytes'] / 1e6:.2f} | {row['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def _mean_std(row: dict, key: str) -> str:
    return f"{row[key]:.2f} ± {row[key + '_std']:.2f}" if key in row else "–"


def format_epsilon(row: dict) -> str:
    """``"3.21 (1e-05) vs server"``; ``"–"`` for a run without differential privacy;
    ``NOT PRIVATE`` when the noise was seeded from the public seed."""
    if row.get("private") is False:
        return "NOT PRIVATE (seeded noise)"
    if row.get("epsilon") is None:
        return "–"
    against = f" vs {row['adversary']}" if row.get("adversary") else ""
    return f"{row['epsilon']:.2f} ({row['delta']:g}){against}"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in its folder and ``os.replace``:
    readers (and an interrupted run) see the old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def check_output_dir(output_dir: str | Path) -> None:
    """Refuse (:class:`ConfigError`) an output folder that cannot be created or written:
    the nearest existing ancestor must be a writable folder."""
    path = Path(output_dir).expanduser()
    existing = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        raise ConfigError(f"output_dir {output_dir}: {existing} exists and is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"output_dir {output_dir}: {existing} is not writable")


def save_result(result: ExperimentResult, output_dir: str | Path | None = None) -> Path:
    """Write ``result.json`` and ``result.md`` atomically into ``<output_dir>/<name>/``;
    returns the folder."""
    cfg = result.config
    check_run_name(cfg.name)
    folder = Path(output_dir or cfg.output_dir) / (cfg.name or default_name(result))
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        "config": cfg.to_dict(),
        "summary": result.summary(),
        "runs": [r.to_dict() for r in result.runs],
    }
    write_atomic(folder / "result.json", json.dumps(payload, indent=2))
    write_atomic(folder / "result.md", markdown_table(result))
    for run in result.runs:
        if run.transcript is not None:
            run.transcript.save(folder / f"transcript-{run.algorithm}-seed{run.seed}")
    return folder


def save_rows(config: ExperimentConfig, rows: list[dict[str, Any]]) -> Path:
    """Write a row-per-run task's results (e.g. ``securefgl recommend``) as ``result.json``
    (config and rows) into ``<output_dir>/<name>/``; returns the folder."""
    check_run_name(config.name)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = Path(config.output_dir) / (config.name or f"{config.dataset.lower()}-{stamp}")
    folder.mkdir(parents=True, exist_ok=True)
    payload = {"config": config.to_dict(), "runs": rows}
    write_atomic(folder / "result.json", json.dumps(payload, indent=2, default=str))
    return folder
