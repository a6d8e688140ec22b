"""Saving results into ``<output_dir>/<name>/``: ``result.json`` (the configuration, the
summary, per-run histories, the units and the run's provenance) and ``result.md``, each
written atomically (a temporary file in the same folder, then ``os.replace``), so a folder
never holds half a ``result.json``. Every command saves through here (``securefgl run``,
``recommend``, and ``audit`` through :func:`save_payload`)."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from securefgl.config import ConfigError, ExperimentConfig, check_run_name
from securefgl.data.good_motif import MOTIF_DATASETS
from securefgl.experiment.provenance import RECOMMENDATION_UNITS, UNITS, provenance
from securefgl.experiment.report import markdown_table, recommendation_markdown
from securefgl.experiment.runner import ExperimentResult

log = logging.getLogger(__name__)

__all__ = [
    "check_output_dir",
    "default_name",
    "markdown_table",
    "result_folder",
    "save_payload",
    "save_result",
    "save_rows",
    "write_atomic",
]


def default_name(result: ExperimentResult) -> str:
    """``<dataset>-<how clients got their data>-K<clients>-<time>`` (the node task's
    partition; the graph task's domains or Dirichlet label skew)."""
    cfg = result.config
    stamp = time.strftime("%Y%m%d-%H%M%S")
    split = cfg.partition
    if cfg.task == "graph":
        split = "domains" if cfg.dataset.lower() in MOTIF_DATASETS else (
            f"dirichlet{cfg.graph.dirichlet:g}")  # fmt: skip
    return f"{cfg.dataset.lower()}-{split}-K{cfg.clients}-{stamp}"


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


def result_folder(config: ExperimentConfig, default: str) -> Path:
    """``<output_dir>/<name>/`` of a run (``default`` when the configuration names none),
    created."""
    check_run_name(config.name)
    folder = Path(config.output_dir) / (config.name or default)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def strict_json(value: Any) -> Any:
    """``value`` as standard JSON can hold it: NaN as null, ±∞ as ``"inf"`` / ``"-inf"``
    (``float()`` reads both back), tuples as lists; anything else not JSON as its ``str``."""
    if isinstance(value, float | np.floating):
        x = float(value)
        return x if math.isfinite(x) else (None if math.isnan(x) else ("inf" if x > 0 else "-inf"))
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    return str(value)


def dumps_strict(value: Any, indent: int | None = None) -> str:
    """``value`` as standard JSON text (:func:`strict_json`: no NaN or ∞ literals)."""
    return json.dumps(strict_json(value), indent=indent, allow_nan=False)


def save_payload(folder: Path, payload: dict[str, Any], markdown: str) -> Path:
    """``result.json`` (``payload``, :func:`strict_json`) and ``result.md`` (``markdown``)
    into ``folder``."""
    text = dumps_strict(payload, indent=2)
    write_atomic(folder / "result.json", text)
    write_atomic(folder / "result.md", markdown)
    return folder


def save_result(result: ExperimentResult, output_dir: str | Path | None = None) -> Path:
    """Write ``result.json`` and ``result.md`` atomically into ``<output_dir>/<name>/``;
    returns the folder."""
    cfg = result.config
    if output_dir is not None:
        cfg = cfg.replace(output_dir=str(output_dir))
    folder = result_folder(cfg, default_name(result))
    payload = {
        "config": cfg.to_dict(),
        "units": UNITS,
        "summary": result.summary(),
        "runs": [r.to_dict() for r in result.runs],
        "provenance": provenance(result.config),
    }
    if (folder / "result.json").exists():
        log.warning("%s: replacing the result saved there before", folder)
    save_payload(folder, payload, markdown_table(result))
    kept = {f"transcript-{r.algorithm}-seed{r.seed}": r.transcript for r in result.runs}
    for stale in folder.glob("transcript-*"):  # an earlier result's, not this one's
        if stale.is_dir() and kept.get(stale.name) is None:
            shutil.rmtree(stale)
    for name, transcript in kept.items():
        if transcript is not None:
            transcript.save(folder / name)
    return folder


def save_rows(config: ExperimentConfig, rows: list[dict[str, Any]]) -> Path:
    """Write a row-per-run task's results (``securefgl recommend``) as ``result.json``
    (configuration, units, rows, provenance) and ``result.md`` into
    ``<output_dir>/<name>/``; returns the folder."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = result_folder(config, f"{config.dataset.lower()}-{stamp}")
    payload = {"config": config.to_dict(), "units": RECOMMENDATION_UNITS, "runs": rows,
               "provenance": provenance(config)}  # fmt: skip
    return save_payload(folder, payload, recommendation_markdown(config, rows))
