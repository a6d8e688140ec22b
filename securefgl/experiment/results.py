"""Saving results: one JSON file (config, per-run histories, summary) and a Markdown table."""

from __future__ import annotations

import json
import time
from pathlib import Path

from securefgl.experiment.runner import ExperimentResult


def default_name(result: ExperimentResult) -> str:
    cfg = result.config
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{cfg.dataset.lower()}-{cfg.partition}-K{cfg.clients}-{stamp}"


def markdown_table(result: ExperimentResult) -> str:
    cfg = result.config
    lines = [
        f"# {cfg.dataset} · {cfg.partition} partition · {cfg.clients} clients · "
        f"protocol {'+'.join(cfg.protocol) or 'plain'}",
        "",
        f"{cfg.rounds} rounds × {cfg.local_epochs} local epoch(s), "
        f"split {'/'.join(f'{f:g}' for f in cfg.split)}, seeds {cfg.seeds}. "
        "Accuracy and macro-F1 in % (mean ± std over seeds), last-round model. MB and "
        "seconds include the set-up (e.g. FedStruct's Ā build).",
        "",
        "| algorithm | model | federated | test acc | test macro-F1 | val acc | ε (δ) "
        "| MB exchanged | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result.summary():
        lines.append(
            f"| {row['algorithm']} | {row.get('model', '')} "
            f"| {'yes' if row['federated'] else 'no (upper bound)'} "
            f"| {row['test_acc']:.2f} ± {row['test_acc_std']:.2f} "
            f"| {row['test_f1']:.2f} ± {row['test_f1_std']:.2f} "
            f"| {row['val_acc']:.2f} ± {row['val_acc_std']:.2f} | {format_epsilon(row)} "
            f"| {row['bytes'] / 1e6:.2f} | {row['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def format_epsilon(row: dict) -> str:
    """``"3.21 (1e-05) vs server"``; ``"–"`` for a run without differential privacy;
    ``NOT PRIVATE`` when the noise was seeded from the public seed."""
    if row.get("private") is False:
        return "NOT PRIVATE (seeded noise)"
    if row.get("epsilon") is None:
        return "–"
    against = f" vs {row['adversary']}" if row.get("adversary") else ""
    return f"{row['epsilon']:.2f} ({row['delta']:g}){against}"


def save_result(result: ExperimentResult, output_dir: str | Path | None = None) -> Path:
    """Write ``result.json`` and ``result.md`` into ``<output_dir>/<name>/``; returns it."""
    cfg = result.config
    folder = Path(output_dir or cfg.output_dir) / (cfg.name or default_name(result))
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        "config": cfg.to_dict(),
        "summary": result.summary(),
        "runs": [r.to_dict() for r in result.runs],
    }
    (folder / "result.json").write_text(json.dumps(payload, indent=2))
    (folder / "result.md").write_text(markdown_table(result))
    for run in result.runs:
        if run.transcript is not None:
            run.transcript.save(folder / f"transcript-{run.algorithm}-seed{run.seed}")
    return folder
