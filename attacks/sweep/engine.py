"""Run a sweep's cells, each trained once and attacked on its own transcript and models,
resumably.

Every finished cell is appended as one JSON line to ``cells.jsonl`` in the sweep's folder
and synced before the next cell starts; a sweep started again on the same folder skips
the cells it finds there (a line cut short by a kill is dropped and its cell redone).
``sweep.json`` holds the grid; a folder holding another grid is refused unless the
caller restarts it. Progress: one bar over the grid (cells done, ETA) beside each run's
own bar on a terminal; elsewhere one line per finished cell.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from attacks.api import attack_run, keep_tags
from attacks.audit import guarantees
from attacks.defences import edge_dp_hook
from attacks.registry import attacks_for
from attacks.simulation import AuditRun
from attacks.sweep.grid import Cell, SweepConfig, cells, training_config
from protocols.dp.rng import NOISE_SEEDED
from securefgl.experiment.provenance import git_state
from securefgl.experiment.results import write_atomic
from securefgl.experiment.runner import load_graph, run_single
from securefgl.federation.progress import PROGRESS_LOGGER
from securefgl.federation.transcript import Transcript

log = logging.getLogger(__name__)
progress_log = logging.getLogger(PROGRESS_LOGGER)

CELLS, GRID = "cells.jsonl", "sweep.json"


def done_cells(folder: Path) -> dict[str, dict[str, Any]]:
    """The finished cells recorded in ``folder``: a last line cut short is dropped, and a
    line that does not parse is skipped (its cell is redone)."""
    path = folder / CELLS
    if not path.exists():
        return {}
    content = path.read_bytes()
    whole = content.rfind(b"\n") + 1
    if whole < len(content):
        os.truncate(path, whole)
    out = {}
    for number, line in enumerate(content[:whole].decode(errors="replace").splitlines(), 1):
        try:
            record = json.loads(line) if line else None
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict) and "cell" in record:
            out[record["cell"]] = record
        elif line:
            log.warning("%s line %d is not a whole cell record: its cell is redone", path,
                        number)  # fmt: skip
    return out


def _append(path: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line and sync it; a write that cannot finish raises (a
    fragment left behind ends without a newline: :func:`done_cells` drops it)."""
    data = memoryview((json.dumps(record, default=str) + "\n").encode())
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _claim(folder: Path, sweep: SweepConfig, restart: bool) -> None:
    """Bind ``folder`` to this grid's context (:meth:`SweepConfig.context`), refusing a
    folder whose cells were run in another context unless ``restart``; the grid's lists
    (algorithms, protections, levels, seeds) may change between runs."""
    folder.mkdir(parents=True, exist_ok=True)
    grid = folder / GRID
    mine = {"fingerprint": sweep.fingerprint(), "context": sweep.context(),
            "sweep": sweep.to_dict()}  # fmt: skip
    if grid.exists() and not restart:
        try:
            theirs = json.loads(grid.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{grid} is not readable JSON ({err}): it names the grid of "
                             f"the {len(done_cells(folder))} cells in {folder}; restore it, "
                             "or --restart to discard them") from None  # fmt: skip
        if theirs.get("fingerprint") != mine["fingerprint"]:
            changed = _changed(theirs.get("context", {}), json.loads(json.dumps(
                mine["context"], default=str)))  # fmt: skip
            raise ValueError(
                f"{folder} holds {len(done_cells(folder))} cells run with other settings "
                f"({', '.join(changed) or 'an older sweep format'}): give another --name, "
                "or --restart to discard them"
            )
        write_atomic(grid, json.dumps(mine, indent=1, default=str) + "\n")  # the lists now
        return
    (folder / CELLS).unlink(missing_ok=True)
    for old in folder.glob("frontier*"):  # an earlier grid's report must not outlive it
        old.unlink()
    write_atomic(grid, json.dumps(mine, indent=1, default=str) + "\n")


def _changed(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """The keys whose values differ, nested keys dotted (``base.rounds``)."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _changed(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out


def run_cell(sweep: SweepConfig, cell: Cell, data: Any, progress: bool) -> dict[str, Any]:
    """Train ``cell`` once and run every requested attack that targets its algorithm."""
    cfg = training_config(sweep, cell)
    specs = attacks_for(cell.algorithm, sweep.attacks or None, sweep.base.task)
    names = [s.name for s in specs]
    p = cell.protection
    hook = (
        edge_dp_hook(p.edge_dp, float(cell.level),
                     noise_seed=cell.seed if cfg.protocol.seeded_noise else None)
        if p.edge_dp and cell.level is not None and cell.algorithm not in ("central", "fedstruct")
        else None
    )  # fmt: skip
    transcript = Transcript(store_payloads=True, payload_rounds=0, keep_tags=keep_tags(names))
    t0 = time.perf_counter()
    run = run_single(cfg, cell.algorithm, cell.seed, data, progress, keep_state=True,
                     views_hook=hook, transcript=transcript)  # fmt: skip
    edge = (p.edge_dp, float(cell.level)) if p.edge_dp and cell.level is not None else None
    claims = guarantees(cell.algorithm, list(p.stack), edge, AuditRun(cfg, run))
    claim = _claim_in_unit(claims, p.unit)
    attacks = []
    for name in names:
        result = attack_run(cfg, run, name)
        attacks.append({
            "attack": name, "adversary": result.adversary, "metric": result.primary,
            "value": result.value, "baseline": result.baseline(),
            "reason": result.reason,
        })  # fmt: skip
    return {
        "cell": cell.key, "algorithm": cell.algorithm, "protection": p.spec,
        "level": cell.level, "level_kind": cell.level_kind, "seed": cell.seed,
        "unit": p.unit, "dp_noise": cfg.protocol.dp_noise if p.mechanism in SIGMA else None,
        "utility": float(run.final["test_acc"]), "guarantees": claims,
        "epsilon": (claim or {}).get("epsilon"), "noise": run.privacy.get("noise"),
        "adversary_of_epsilon": (claim or {}).get("adversary"),
        "epsilon_covers": (claim or {}).get("covers"),
        "epsilon_assumes": (claim or {}).get("assumes"),
        "attacks": attacks, "seconds": round(time.perf_counter() - t0, 2),
    }  # fmt: skip


#: the mechanisms whose level is a noise multiplier σ (ldp_laplace's is its ε)
SIGMA = ("clip_noise", "ldp_gaussian")


def _claim_in_unit(claims: list[dict[str, Any]], unit: str | None) -> dict[str, Any] | None:
    """The run's reported claim in the protection's unit (None: ε = ∞, no DP)."""
    if unit is None:
        return None
    for g in claims:
        if str(g.get("unit", "")).startswith(unit):
            return {"epsilon": float(g["epsilon"]), "adversary": g.get("adversary"),
                    "covers": g.get("covers"), "assumes": g.get("assumes")}
    return None


def run_sweep(
    sweep: SweepConfig,
    folder: str | Path,
    progress: bool = True,
    restart: bool = False,
    on_cell: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every cell of ``sweep`` not yet in ``folder``; returns all cell records in grid
    order. ``on_cell(index, record)`` runs after each new cell is saved. One sweep at a
    time per folder: a second is refused while the first runs."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with _exclusive(folder):
        return _run(sweep, folder, progress, restart, on_cell)


@contextlib.contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s lock for the sweep (released when the process ends, even killed)."""
    with open(folder / ".lock", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"another sweep is running in {folder}: wait for it, or give "
                             "another name") from None  # fmt: skip
        yield


def _run(
    sweep: SweepConfig,
    folder: Path,
    progress: bool,
    restart: bool,
    on_cell: Callable[[int, dict[str, Any]], None] | None,
) -> list[dict[str, Any]]:
    grid = cells(sweep)
    for cell in grid:  # every level calibrates before any training (a bad one fails now)
        training_config(sweep, cell)
    _claim(folder, sweep, restart)
    done = done_cells(folder)
    todo = [c for c in grid if c.key not in done]
    code = git_state()
    older = sorted({str(r.get("code")) for k, r in done.items() if r.get("code") != code
                    and k in {c.key for c in grid}})  # fmt: skip
    if older:
        log.warning("%s: reused cells ran at code %s, this run is at %s: --restart to rerun "
                    "them all at one version", folder, ", ".join(older), code)  # fmt: skip
    torch.set_num_threads(sweep.base.threads)
    data = load_graph(sweep.base) if todo else None
    terminal = progress and sys.stderr.isatty()
    bar = tqdm(total=len(grid), initial=len(grid) - len(todo), desc="sweep", unit="cell",
               disable=not terminal)  # fmt: skip
    for i, cell in enumerate(todo):
        bar.set_postfix_str(cell.label())
        record = {**run_cell(sweep, cell, data, progress=terminal), "code": code}
        _append(folder / CELLS, record)
        done[cell.key] = record
        bar.update(1)
        if progress and not terminal:
            progress_log.info(_line(len(done), len(grid), record))
        if on_cell is not None:
            on_cell(i, record)
    bar.close()
    return [done[c.key] for c in grid]


def _line(n: int, total: int, r: dict[str, Any]) -> str:
    eps = "ε=∞" if r["epsilon"] is None else f"ε={r['epsilon']:.3g} ({r['unit']}"
    if r["epsilon"] is not None:
        vs = f", vs {r['adversary_of_epsilon']}" if r.get("adversary_of_epsilon") else ""
        void = ", seeded noise: NOT PRIVATE" if r.get("noise") == NOISE_SEEDED else ""
        eps += f"{vs}{void})"
    hits = ", ".join(
        f"{a['attack']} {a['metric']} {a['value']:.3f}" for a in r["attacks"]
        if a["value"] is not None
    )  # fmt: skip
    acc = f"accuracy {100 * r['utility']:.1f} %"
    return (f"[{n}/{total}] {r['algorithm']} · {r['protection']} · seed {r['seed']}: {eps}, "
            f"{acc}{', ' + hits if hits else ''} ({r['seconds']:.0f} s)")
