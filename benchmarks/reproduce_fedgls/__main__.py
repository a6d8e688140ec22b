"""Reproduce FedGLS's Tables 1-3 (Fu et al., "Federated Graph Learning with Graphless
Clients", TMLR): ours beside the paper.

Table 1 on Cora, CiteSeer and PubMed (Flickr and ogbn-arxiv: not available offline, listed
as not run), Table 2 (E ∈ {3, 5, 10} on CiteSeer and PubMed), Table 3 (PubMed's ratio of
graph to graphless clients), FedGLS under ``secagg`` and ``ckks`` on Cora, 5 seeds each; the
paper's set-up (``securefgl.algorithms.fedgls.settings.apply_preset``: K largest Louvain
communities, 60/20/20 per client, the paper's K, rounds, hidden 16, Adam 0.01, E = 5).
Accuracy: test accuracy averaged over the clients (the paper's "average accuracy over the
clients"; the pooled accuracy is kept beside it), of the last round's model (``acc``) and of
the round with the best client-mean validation accuracy (``acc_best_val``; the paper does
not say which it reports). ``--diagnose v1,v2`` runs FedGLS and Fed-GNNk under settings the
paper leaves open (``grid.VARIANTS``); ``--select`` runs Table 1 under each candidate of
``grid.SELECTION`` (the settings the paper leaves open, chosen per method on validation:
``fedgls_selected.json``); ``--graph-drift`` measures how far the learner moves the
graphless clients' graphs from the feature kNN (``drift``; ``fedgls_graph_drift.json``).

Run: ``SECUREFGL_DATA=/path/to/datasets python -m benchmarks.reproduce_fedgls``;
``--dry-run`` prints the plan, ``--report-only`` rebuilds the outputs from the runs file.
Outputs ``benchmarks/results/fedgls.{json,md,png}`` (+ ``fedgls_runs.json``, every seed;
``fedgls_diagnostics.json``). Resumable: every finished seed is saved at once, and cells and
seeds already in the runs file are skipped; processes may share the file (``--seed-list``).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.harness.graphs import OneGraphCache
from benchmarks.harness.results import csv_list, locked, read_json, save_seed_rows, write_json
from benchmarks.harness.system import code_version
from benchmarks.reproduce_fedgls.drift import graph_drift
from benchmarks.reproduce_fedgls.grid import (
    DATASETS,
    KEY_FIELDS,
    VARIANTS,
    Cell,
    clients_of,
    diagnostics,
    paper_value,
    plan,
    row_key,
    selection_cells,
)
from benchmarks.reproduce_fedgls.report import write_outputs
from securefgl.algorithms.fedgls.settings import apply_preset
from securefgl.config import ExperimentConfig
from securefgl.experiment.runner import load_graph, run_single

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "results"
RUNS = OUT / "fedgls_runs.json"
DRIFT = OUT / "fedgls_graph_drift.json"


def make_config(cell: Cell) -> ExperimentConfig:
    base = apply_preset(ExperimentConfig(dataset=cell.dataset, algorithms=[cell.method]))
    cfg = base.replace(
        clients=cell.clients,
        local_epochs=cell.local_epochs,
        protocol=[] if cell.protocol == "plain" else [cell.protocol],
        fedgls={"graphless_fraction": cell.graphless_fraction},
        threads=1,
        name=f"fedgls-repro|{'|'.join(str(k) for k in cell.key)}",
    )
    cfg = cfg.replace(**VARIANTS[cell.variant])
    return cfg.replace(eval_every=1)


def selected_accuracies(history: list[dict[str, Any]]) -> dict[str, float]:
    """Client-mean test accuracy (%) of the last round and of the best-validation round
    (the first round with the highest client-mean validation accuracy), and that
    validation accuracy (what a choice among settings may use)."""
    evaluated = [h for h in history if "client_mean_val" in h]
    best = max(evaluated, key=lambda h: h["client_mean_val"])  # first maximum
    return {
        "acc": round(100 * evaluated[-1]["client_mean_test"], 2),
        "acc_best_val": round(100 * best["client_mean_test"], 2),
        "best_val_round": best["round"],
        "val_acc_best": round(100 * best["client_mean_val"], 2),
    }


def new_row(cell: Cell) -> dict[str, Any]:
    paper = paper_value(cell)
    row = {k: getattr(cell, k) for k in KEY_FIELDS}
    row.update(variant=cell.variant, mean=None, std=None, seeds=0, runs=[])
    row.update(paper_mean=paper[0] if paper else None, paper_std=paper[1] if paper else None)
    return row


def summarise(row: dict[str, Any]) -> None:
    accs = [r["acc"] for r in row["runs"]]
    row["seeds"] = len(accs)
    row["mean"] = round(float(np.mean(accs)), 2) if accs else None
    row["std"] = round(float(np.std(accs)), 2) if accs else None
    best = [r["acc_best_val"] for r in row["runs"] if "acc_best_val" in r]
    row["mean_best_val"] = round(float(np.mean(best)), 2) if best else None
    row["std_best_val"] = round(float(np.std(best)), 2) if best else None
    row["seeds_best_val"] = len(best)
    pooled = [r["acc_pooled"] for r in row["runs"]]
    row["mean_pooled"] = round(float(np.mean(pooled)), 2) if pooled else None
    row["seconds_per_seed"] = round(float(np.mean([r["seconds"] for r in row["runs"]])), 1)


def save_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    save_seed_rows(path, rows, row_key, summarise)


def measure_drift(datasets: list[str], seeds: list[int]) -> None:
    """FedGLS on Table 1's cell per dataset, each seed's graph drift saved at once."""
    for ds in datasets:
        cfg = make_config(Cell(ds, clients_of(ds), 0.5, 5, "fedgls", "plain"))
        data = None
        for seed in seeds:
            if any(r["dataset"] == ds and r["seed"] == seed for r in read_json(DRIFT, [])):
                continue
            data = data if data is not None else load_graph(cfg)
            row = {"dataset": ds, **graph_drift(cfg, seed, data)}
            with locked(DRIFT.with_suffix(".lock")):
                write_json(DRIFT, [*read_json(DRIFT, []), row], indent=1, newline=True)
            logging.info("%s seed %d: %.3f of the kNN's edges kept", ds, seed, row["edges_kept"])
    write_outputs(read_json(RUNS, []), OUT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=csv_list, default=list(DATASETS))
    parser.add_argument("--tables", default="1p23", help="1, 2, 3 and p (protocol check)")
    parser.add_argument("--methods", type=csv_list, default=None, help="only these methods")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    parser.add_argument("--seed-list", type=int, nargs="+", help="exactly these seeds")
    parser.add_argument("--diagnose", type=csv_list, default=[], help=f"variants {list(VARIANTS)}")
    parser.add_argument(
        "--select", action="store_true", help="Table 1 under each open setting (SELECTION)"
    )
    parser.add_argument("--rerun", action="store_true", help="run the planned seeds again")
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--budget-hours", type=float, default=None, help="stop starting cells")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--graph-drift", action="store_true", help="FedGLS runs: the learned graphs' drift"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("securefgl").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    unknown = set(args.diagnose) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; choose from {list(VARIANTS)}")
    seeds = sorted(set(args.seed_list)) if args.seed_list else list(range(args.seeds))
    if args.graph_drift and not args.report_only:
        measure_drift(args.datasets, seeds)
        return
    rows: list[dict[str, Any]] = read_json(args.runs, [])
    by_key = {row_key(r): r for r in rows}
    cells = plan(args.datasets, args.tables) if not (args.diagnose or args.select) else []
    cells += diagnostics(args.datasets, args.diagnose)
    cells += selection_cells(args.datasets) if args.select else []
    # a run recorded without the field its mode reads is run again
    needed = "val_acc_best" if args.select else "acc_best_val"
    if args.methods:
        cells = [c for c in cells if c.method in args.methods]
    todo = []
    for cell in cells:
        runs = by_key.get(cell.key, {"runs": []})["runs"]
        done = set() if args.rerun else {r["seed"] for r in runs if needed in r}
        if missing := [s for s in seeds if s not in done]:
            todo.append((cell, missing))
    logging.info("%d cells, %d with missing seeds (%d runs)", len(cells), len(todo),
                 sum(len(m) for _, m in todo))  # fmt: skip
    for cell, missing in todo:
        logging.info("  %s seeds %s", cell.key, missing)
    if args.dry_run:
        return
    if not args.report_only:
        t_start, graphs, code = time.time(), OneGraphCache(), code_version(ROOT)
        for cell, missing in todo:
            if args.budget_hours and time.time() - t_start > args.budget_hours * 3600:
                logging.info("budget reached: stopping before %s", cell.key)
                break
            cfg = make_config(cell)
            row = by_key.get(cell.key)
            if row is None:
                row = by_key[cell.key] = new_row(cell)
                rows.append(row)
            for seed in missing:
                t0 = time.time()
                res = run_single(cfg, cell.method, seed, graphs.get(cfg), False)
                run = {
                    "seed": seed,
                    "finished": time.time(),
                    **selected_accuracies(res.history),
                    "acc_pooled": round(100 * res.final["test_acc"], 2),
                    "seconds": round(time.time() - t0, 1),
                    "code": code,
                }
                old = {r["seed"]: r for r in row["runs"]}.pop(seed, None)
                if old is not None and old["acc"] != run["acc"]:
                    logging.warning("%s seed %d: last-round accuracy %.2f, was %.2f",
                                    cell.key, seed, run["acc"], old["acc"])  # fmt: skip
                kept = [r for r in row["runs"] if r["seed"] != seed]
                row["runs"] = sorted([*kept, run], key=lambda x: x["seed"])
                summarise(row)
                save_rows(args.runs, rows)
                by_key = {row_key(r): r for r in rows}
                logging.info(
                    "%s seed %d: %.2f (%.0f s)", cell.key, seed, run["acc"], run["seconds"]
                )
    write_outputs(read_json(args.runs, []), OUT)
    logging.info("wrote %s", ", ".join(str(OUT / f"fedgls.{s}") for s in ("json", "md", "png")))


if __name__ == "__main__":
    main()
