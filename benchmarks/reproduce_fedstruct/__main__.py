"""Reproduce FedStruct's Tables 2 and 6 (Aliakbari et al., ICLR 2025): ours vs the paper.

Methods: FedStruct with DEG, FED* (FedStar), H2V (pruned, p = 30) and H2V-F (unpruned) NSFs,
FedGCN-2hop (optionally -1hop), FedAvg (= FedSGD GNN), local and central; datasets Cora,
CiteSeer, Chameleon, Amazon Photo, PubMed; random partition with K ∈ {5, 10, 20} and
Louvain / K-means with K = 10; split 10/10/80; N seeds. FedStruct(H2V) also runs with
every round's aggregation under CKKS (``--aggregations plain,ckks``). FedStruct uses the
paper's Table 5 presets with Ā built by Algorithm 3 over the channel; the baselines are the
2-layer GCNs of ``python -m benchmarks.baselines``. The paper's numbers are in
``benchmarks/data/fedstruct_paper.json``, the report's prose in
``benchmarks/notes/fedstruct.md``.

Run: ``SECUREFGL_DATA=/path/to/datasets python -m benchmarks.reproduce_fedstruct
--datasets Cora --partitions random --seeds 3``; ``--dry-run`` prints the plan and the time
estimate, ``--report-only`` rebuilds the Markdown and PNG from the JSON. Outputs
``benchmarks/results/fedstruct.{json,md,png}``. Resumable: every finished seed is saved at
once; cells and seeds already in the JSON are skipped. Processes may share the JSON (writes
merge under a lock): ``--seed-list`` splits one cell's seeds between them.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.harness.fedstruct_paper import SERVER_ABAR_METHODS, paper_value
from benchmarks.harness.graphs import OneGraphCache
from benchmarks.harness.results import csv_list, read_json, save_seed_rows
from benchmarks.harness.system import code_version
from benchmarks.reproduce_fedstruct.grid import (
    AGGREGATIONS,
    DATASETS,
    FEDSTRUCT_NSF,
    LABELS,
    MAX_DENSE_ABAR,
    METHODS,
    OPTIONAL_METHODS,
    PARTITIONS,
    RANDOM_CLIENTS,
    Cell,
    plan,
    row_key,
)
from benchmarks.reproduce_fedstruct.report import write_markdown, write_plot
from securefgl.algorithms.fedstruct.settings import apply_preset
from securefgl.config import ExperimentConfig
from securefgl.data.datasets import resolve_name
from securefgl.experiment.runner import run_single

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "results"
JSON_PATH = OUT / "fedstruct.json"


def make_config(cell: Cell, args: argparse.Namespace) -> tuple[ExperimentConfig, str]:
    """(config, algorithm name) of a cell."""
    base = ExperimentConfig(
        dataset=cell.dataset,
        clients=cell.clients or 10,
        partition=cell.partition or "random",
        cross_edges="known",
        train_fraction=0.1,
        val_fraction=0.1,
        test_fraction=0.8,
        model="gcn",
        hidden=64,
        layers=2,
        dropout=0.5,
        lr=0.01,
        weight_decay=5e-4,
        rounds=args.baseline_rounds,
        local_epochs=1,
        client_lr=1.0,
        threads=1,
        protocol=["ckks"] if cell.aggregation == "ckks" else [],
        # the paper's pre-training in the clear (Algorithm 3, FedGCN's sums), whatever the
        # training rounds' transport: the CKKS cells encrypt the rounds only
        fedstruct={"sum_mode": "plain"},
        fedgcn={"sum_mode": "plain"},
        name=f"fedstruct-repro|{cell.dataset}|{cell.partition}|{cell.clients}|{cell.method}",
    )
    if cell.method in FEDSTRUCT_NSF:
        nsf, prune = FEDSTRUCT_NSF[cell.method]
        section = {"nsf": nsf, "prune": prune, "abar": "federated"}
        cfg = apply_preset(base.replace(fedstruct=section))
        return cfg.replace(eval_every=cfg.rounds), "fedstruct"
    if cell.method in SERVER_ABAR_METHODS:
        nsf, prune = FEDSTRUCT_NSF[SERVER_ABAR_METHODS[cell.method]]
        cfg = apply_preset(base.replace(fedstruct={"nsf": nsf, "prune": prune, "abar": "oracle"}))
        return cfg.replace(eval_every=cfg.rounds), "fedstruct"
    if cell.method.startswith("fedgcn"):
        cfg = base.replace(rounds=args.fedgcn_rounds)
        return cfg.replace(eval_every=cfg.rounds), cell.method
    return base.replace(eval_every=base.rounds), cell.method


def load_rows(path: Path) -> list[dict[str, Any]]:
    return read_json(path, [])


def save_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    save_seed_rows(path, rows, row_key, summarise)


def summarise(row: dict[str, Any]) -> None:
    accs = [r["acc"] for r in row["runs"]]
    row["seeds"] = len(accs)
    row["mean"] = round(float(np.mean(accs)), 2) if accs else None
    row["std"] = round(float(np.std(accs)), 2) if accs else None
    row["seconds_per_seed"] = round(float(np.mean([r["seconds"] for r in row["runs"]])), 1)


def new_row(cell: Cell) -> dict[str, Any]:
    paper = paper_value(cell.dataset, cell.partition, cell.clients, cell.method)
    if cell.aggregation != "plain":
        paper = None  # the paper has no encrypted runs: compare with our plaintext row
    return {
        "dataset": cell.dataset,
        "partition": cell.partition,
        "clients": cell.clients,
        "method": cell.method,
        "aggregation": cell.aggregation,
        "mean": None,
        "std": None,
        "seeds": 0,
        "paper_mean": paper[0] if paper else None,
        "paper_std": paper[1] if paper else None,
        "runs": [],
    }


# seconds per seed on Cora K = 10 (2 shared cores, loaded): the unit costs of the model
_UNIT = {
    "central": 10,
    "local": 30,
    "fedavg": 40,
    "fedgcn": 50,
    "fedgcn-1hop": 35,
    "fedstruct-deg": 12,
    "fedstruct-fedstar": 12,
    "fedstruct-h2v": 35,
    "fedstruct-h2v-f": 45,
}
_CKKS_FACTOR = 15.0  # CKKS aggregation of θ ‖ S vs plaintext (first measured runs)
_CORA = (2708, 1433)
_SHAPES = {
    "Cora": (2708, 1433),
    "CiteSeer": (3327, 3703),
    "chameleon": (2277, 2325),
    "Photo": (7650, 745),
    "PubMed": (19717, 500),
}


def estimate_seconds(cell: Cell, rows: list[dict[str, Any]]) -> float:
    """Per-seed estimate: a measured cell of the same dataset/method/aggregation if any,
    else the unit cost scaled by the graph's size (n·(d + 256)) and rounds."""
    measured = [
        r["seconds_per_seed"]
        for r in rows
        if r["dataset"] == cell.dataset
        and r["method"] == cell.method
        and r["aggregation"] == cell.aggregation
        and r.get("seconds_per_seed")
    ]
    if measured:
        return float(np.mean(measured))
    n, d = _SHAPES.get(cell.dataset, _CORA)
    if cell.aggregation == "ckks" and cell.method in FEDSTRUCT_NSF:
        # CKKS cost ∝ the encrypted vector (θ ‖ S, S = n × 256) × rounds: scale a measured cell
        from securefgl.algorithms.fedstruct.settings import preset_for

        for r in rows:
            if r["aggregation"] == "ckks" and r["method"] == cell.method and r["seeds"]:
                n0, _ = _SHAPES.get(r["dataset"], _CORA)
                epochs = preset_for(cell.dataset).epochs / preset_for(r["dataset"]).epochs
                return float(r["seconds_per_seed"]) * n / n0 * epochs
    scale = n * (d + 256) / (_CORA[0] * (_CORA[1] + 256))
    if cell.method in FEDSTRUCT_NSF:
        from securefgl.algorithms.fedstruct.settings import preset_for

        scale *= preset_for(cell.dataset).epochs / 40
    secs = _UNIT.get(cell.method, 40) * scale
    return secs * (_CKKS_FACTOR if cell.aggregation == "ckks" else 1.0)


def feasible(cell: Cell) -> str | None:
    """Why a cell cannot run on this machine (None if it can)."""
    n, _ = _SHAPES.get(cell.dataset, _CORA)
    if cell.method == "fedstruct-h2v-f" and n * n > MAX_DENSE_ABAR:
        return f"unpruned Ā is dense n² = {n * n:.1e} entries: does not fit in memory here"
    return None


def cell_name(cell: Cell) -> str:
    """A cell as the report names it, e.g. "PubMed, random K = 10, FedStruct (H2V)-F, plain"."""
    where = "" if cell.partition is None else f", {cell.partition} K = {cell.clients}"
    return f"{cell.dataset}{where}, {LABELS.get(cell.method, cell.method)}, {cell.aggregation}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=csv_list, default=list(DATASETS))
    parser.add_argument("--partitions", type=csv_list, default=list(PARTITIONS))
    parser.add_argument(
        "--clients", type=lambda s: [int(k) for k in csv_list(s)], default=[5, 10, 20]
    )
    parser.add_argument("--methods", type=csv_list, default=list(METHODS))
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1")
    parser.add_argument(
        "--seed-list",
        type=int,
        nargs="+",
        help="exactly these seeds instead of 0..N-1 (e.g. to split a cell across processes)",
    )
    parser.add_argument("--aggregations", type=csv_list, default=list(AGGREGATIONS))
    parser.add_argument(
        "--ckks-settings",
        type=lambda v: [(p.split(":")[0], int(p.split(":")[1])) for p in csv_list(v)],
        default=[("random", 10)],
        help="partition:K settings where CKKS cells run (default random:10)",
    )
    parser.add_argument("--baseline-rounds", type=int, default=200)
    parser.add_argument("--fedgcn-rounds", type=int, default=100)
    parser.add_argument("--out", type=Path, default=JSON_PATH)
    parser.add_argument("--budget-hours", type=float, default=None, help="stop starting cells")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and estimate")
    parser.add_argument("--report-only", action="store_true", help="rebuild md/png from json")
    args, defaults = parser.parse_args(), parser.parse_args([])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("securefgl").setLevel(logging.WARNING)
    logging.getLogger("securefgl.experiment.runner").setLevel(logging.INFO)  # long-run progress
    torch.set_num_threads(1)  # 2 shared cores; small graphs
    unknown = set(args.methods) - set(METHODS) - set(OPTIONAL_METHODS)
    if unknown or not set(args.aggregations) <= set(AGGREGATIONS):
        parser.error(f"unknown methods {sorted(unknown)} or aggregations {args.aggregations}")
    canonical = {resolve_name(d): d for d in DATASETS}
    datasets = [canonical.get(resolve_name(d), d) for d in args.datasets]
    rows = load_rows(args.out)
    by_key = {row_key(r): r for r in rows}
    meta: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs "
        f"(shared), torch threads 1",
        "settings": f"baseline rounds {args.baseline_rounds}, FedGCN rounds {args.fedgcn_rounds}, "
        "FedStruct rounds = Table 5 epochs.",
        "skipped": [],
    }
    cells = plan(
        datasets,
        args.partitions,
        args.clients,
        args.methods,
        args.aggregations,
        args.ckks_settings,
    )
    seeds = sorted(set(args.seed_list)) if args.seed_list else list(range(args.seeds))
    if seeds and seeds[0] < 0:
        raise SystemExit(f"--seed-list: seeds are non-negative, got {seeds[0]}")
    todo: list[tuple[Cell, list[int]]] = []
    for cell in cells:
        if (why := feasible(cell)) is not None:
            meta["skipped"].append(f"{cell_name(cell)}: {why}")
            continue
        rounds = make_config(cell, args)[0].rounds
        legacy = make_config(cell, defaults)[0].rounds  # runs saved before rounds were: defaults
        done = {r["seed"] for r in by_key.get(cell.key, {"runs": []})["runs"]
                if r.get("rounds", legacy) == rounds}  # fmt: skip
        missing = [s for s in seeds if s not in done]
        if missing:
            todo.append((cell, missing))
    total = sum(estimate_seconds(c, rows) * len(m) for c, m in todo)
    logging.info(
        "%d cells in the grid, %d with missing seeds (%d runs): estimated %.1f h on this "
        "machine (per-seed costs from measured cells where available)",
        len(cells), len(todo), sum(len(m) for _, m in todo), total / 3600,
    )  # fmt: skip
    for cell, missing in todo:
        logging.info(
            "  %-60s seeds %s  ~%.0f s",
            str(cell.key), missing, estimate_seconds(cell, rows) * len(missing),
        )  # fmt: skip
    if args.dry_run:
        return
    if not args.report_only:
        t_start, graphs, code = time.time(), OneGraphCache(), code_version(ROOT)
        for cell, missing in todo:
            if args.budget_hours and time.time() - t_start > args.budget_hours * 3600:
                logging.info("budget reached: stopping before %s", cell.key)
                break
            cfg, algo = make_config(cell, args)
            row = by_key.get(cell.key)
            if row is None:
                row = by_key[cell.key] = new_row(cell)
                rows.append(row)
            for seed in missing:
                t0 = time.time()
                res = run_single(cfg, algo, seed, graphs.get(cfg), progress=False)
                run = {
                    "seed": seed,
                    "finished": time.time(),
                    "acc": round(res.final["test_acc"] * 100, 2),
                    "seconds": round(time.time() - t0, 1),
                    "setup_mb": round(res.setup_bytes / 1e6, 2),
                    "rounds": cfg.rounds,
                    "code": code,
                }
                kept = [r for r in row["runs"] if r["seed"] != seed]  # one budget per row
                row["runs"] = sorted([*kept, run], key=lambda x: x["seed"])
                summarise(row)
                save_rows(args.out, rows)
                by_key = {row_key(r): r for r in rows}
                logging.info(
                    "%s seed %d: %.2f (%.0f s)", cell.key, seed, run["acc"], run["seconds"]
                )
    full = plan(DATASETS, PARTITIONS, RANDOM_CLIENTS, METHODS, AGGREGATIONS, [("random", 10)])
    have = {row_key(r): r["seeds"] for r in rows}
    runnable = [c for c in full if feasible(c) is None]
    meta["skipped"] = [f"{cell_name(c)}: {feasible(c)}" for c in full if feasible(c) is not None]
    started = sum(1 for c in runnable if have.get(c.key))
    complete = sum(1 for c in runnable if have.get(c.key, 0) >= 10)
    meta["coverage"] = (
        f"Coverage: {started} of {len(runnable)} runnable cells of the full grid have results, "
        f"{complete} with all 10 seeds (`--dry-run` lists what remains and estimates its time)."
    )
    write_markdown(rows, args.out.with_suffix(".md"), meta)
    write_plot(rows, args.out.with_suffix(".png"))
    logging.info("wrote %s, .md, .png", args.out)


if __name__ == "__main__":
    main()
