"""Reproduce FedVN's Motif columns (Fu et al., AAAI 2025, main table) on GOOD-Motif generated
offline: ours beside the slides, 5 seeds, plus protected FedVN and the domain-inference
attack.

Cells: FedVN, FedAvg and self-training in plaintext, FedVN under secagg (masked s_global
sums), then FedProx, FedBN, Ditto, GCFL+ and FedStar, then the authors' code's constant
s_global, per dataset (``motif-basis``, ``motif-size``), seeds 0..4, 100 rounds, FedVN's
set-up (``--fedvn-setup``). Per run: the best client-mean test accuracy over all rounds
(the authors' code's reported number), the last round's, and the test accuracy of the round
with the best validation accuracy (our addition); FedVN runs also record the attack
(:mod:`attacks.fedvn_domain`) on their own transcript. CMNIST, ZINC and SST2 need
downloads and are listed as not run.

Run: ``SECUREFGL_DATA=... python -m benchmarks.reproduce_fedvn``; ``--dry-run`` prints the
plan, ``--report-only`` rebuilds ``benchmarks/results/fedvn.{json,md,png}`` from the runs,
``--shard i/n`` (0 <= i < n) runs every n-th (cell, seed) of the whole plan from i,
skipping those done (processes share the runs file: writes merge under a lock).
Resumable: every finished run is saved at once (``benchmarks/results/fedvn_runs.json``);
runs already there are skipped.
Other budgets keep their own runs files (``--rounds 3|20|200`` write ``fedvn_short_runs.json`` /
``fedvn_r20_runs.json`` / ``fedvn_r200_runs.json``); the report reads them all. Any other
budget needs its own ``--runs`` file, which is reported alone (give it its own ``--out``).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks.fedvn_domain import KEEP_TAGS, fedvn_domain_inference
from attacks.simulation import simulate
from benchmarks.harness.graphs import OneGraphCache
from benchmarks.harness.plugin_family import ensure_family
from benchmarks.harness.results import csv_list, parse_shard, read_json, save_seed_rows
from benchmarks.harness.system import code_version
from benchmarks.reproduce_fedvn.grid import (
    DATASETS,
    METHODS,
    PROTECTIONS,
    ROUNDS,
    VARIANTS,
    Cell,
    make_config,
    paper_value,
    row_key,
    stage_groups,
    stages,
)
from securefgl.experiment.runner import run_single

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "results"
RUNS_PATH = OUT / "fedvn_runs.json"
#: FedVN at a short budget (--rounds 3 --runs this): the attack and the protected pairing
SHORT_PATH = OUT / "fedvn_short_runs.json"
#: every method at 20 rounds (--rounds 20 --runs this): what fits when 100 rounds do not
MEDIUM_PATH = OUT / "fedvn_r20_runs.json"
#: FedVN at the authors' README's 200 rounds (--rounds 200 --runs this): a cause test
LONG_PATH = OUT / "fedvn_r200_runs.json"
#: the runs file of each budget the report reads
BUDGET_RUNS = {ROUNDS: RUNS_PATH, 3: SHORT_PATH, 20: MEDIUM_PATH, 200: LONG_PATH}


def summarise(row: dict[str, Any]) -> None:
    runs = row["runs"]
    row["seeds"] = len(runs)
    for key, name in (("best", ""), ("last", "last_"), ("val_selected", "val_")):
        vals = [r[key] for r in runs if r.get(key) is not None]
        row[f"{name}mean"] = round(float(np.mean(vals)), 2) if vals else None
        row[f"{name}std"] = round(float(np.std(vals)), 2) if vals else None
    row["seconds_per_seed"] = round(float(np.mean([r["seconds"] for r in runs])), 1)


def new_row(cell: Cell) -> dict[str, Any]:
    paper = paper_value(cell.dataset, cell.method)
    return {
        "dataset": cell.dataset, "method": cell.method, "protection": cell.protection,
        "seeds": 0, "mean": None, "std": None,
        "paper_mean": paper[0] if paper else None, "paper_std": paper[1] if paper else None,
        "metric": "best client-mean test accuracy over all rounds (%), the authors' code's",
        "runs": [],
    }  # fmt: skip


def run_cell(cell: Cell, seed: int, rounds: int, graphs: OneGraphCache) -> dict[str, Any]:
    cfg, algo = make_config(cell, rounds)
    t0, cpu0 = time.time(), time.process_time()
    attack = None
    if algo == "fedvn":  # the attack reads the run's own transcript (round-0 payloads,
        audit = simulate(cfg, algo, seed, graphs.get(cfg), payload_rounds=0,  # every sum)
                         keep_tags=frozenset(KEEP_TAGS))  # fmt: skip
        res = audit.result
        found = fedvn_domain_inference(audit)
        attack = {"value": found.value, "baseline": found.baseline(), "leaks": found.leaks(),
                  "metrics": found.metrics, "details": found.details}  # fmt: skip
    else:
        res = run_single(cfg, algo, seed, graphs.get(cfg), progress=False)
    hist = [h for h in res.history if "test_acc" in h]
    return {
        "seed": seed,
        "rounds": rounds,
        "finished": time.time(),
        "best": round(max(h["test_acc"] for h in hist) * 100, 2),
        "last": round(res.final["test_acc"] * 100, 2),
        "val_selected": round(res.final["val_selected_test_acc"] * 100, 2)
        if "val_selected_test_acc" in res.final else None,
        "val_round": res.final.get("val_selected_round"),
        "seconds": round(time.time() - t0, 1),
        "cpu_seconds": round(time.process_time() - cpu0, 1),
        "mb": round(sum(h["bytes_up"] + h["bytes_down"] + h["bytes_p2p"] for h in res.history)
                    / 1e6 + res.setup_bytes / 1e6, 1),
        "curve": [[h["round"], round(h["test_acc"] * 100, 2),
                   round(h["val_acc"] * 100, 2) if "val_acc" in h else None] for h in hist],
        "protection": res.protection,
        "model": res.model,
        "attack": attack,
        "code": code_version(ROOT),
    }  # fmt: skip


def shard_todo(
    plan: list[tuple[Cell, int]], done: dict[tuple[str, str, str], set[int]], i: int, n: int
) -> list[tuple[Cell, int]]:
    """Shard ``i`` of ``n``: every n-th (cell, seed) of the whole plan from i, less those
    done. Sharding the plan before dropping what is done keeps each shard's share fixed,
    so a shard started after another has finished runs neither repeats nor skips any."""
    return [(cell, seed) for cell, seed in plan[i::n] if seed not in done.get(cell.key, ())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=csv_list, default=list(DATASETS))
    parser.add_argument("--methods", type=csv_list,
                        default=[*METHODS, *(v for v in VARIANTS if v != "fedvn")])  # fmt: skip
    parser.add_argument("--protections", type=csv_list, default=list(PROTECTIONS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    parser.add_argument("--from-seed", type=int, default=0, help="skip seeds below this")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--shard", type=parse_shard, default=(0, 1),
                        help="i/n, 0 <= i < n: run every n-th run from i")  # fmt: skip
    parser.add_argument("--runs", type=Path, default=None,
                        help="runs file (default: the report's file of this --rounds)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=OUT / "fedvn.json")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    if args.runs is None:
        if args.rounds not in BUDGET_RUNS:
            parser.error(f"--rounds {args.rounds}: the report reads budgets "
                         f"{sorted(BUDGET_RUNS)}; give this one its own --runs file")  # fmt: skip
        args.runs = BUDGET_RUNS[args.rounds]
    budget = {path.resolve(): r for r, path in BUDGET_RUNS.items()}.get(args.runs.resolve())
    if budget is not None and budget != args.rounds:
        parser.error(f"{args.runs.name} holds {budget}-round runs, not --rounds {args.rounds}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("securefgl").setLevel(logging.WARNING)
    torch.set_num_threads(1)  # 2 shared cores; small graphs
    ensure_family("fedvn", "securefgl.algorithms.fedvn:FAMILY")  # before re-installation
    known = set(METHODS) | set(VARIANTS)
    if set(args.methods) - known or set(args.protections) - set(PROTECTIONS):
        parser.error(f"methods from {sorted(known)}, protections from {list(PROTECTIONS)}")
    rows = read_json(args.runs, [])
    other = sorted({run["rounds"] for row in rows for run in row["runs"]
                    if run.get("rounds", args.rounds) != args.rounds})  # fmt: skip
    if other:
        parser.error(f"{args.runs} holds runs of {other} rounds, not --rounds {args.rounds}: "
                     "give this budget its own --runs file")  # fmt: skip
    by_key = {row_key(r): r for r in rows}
    plan = [(cell, seed)
            for group in stage_groups(stages(args.datasets, args.methods, args.protections))
            for seed in range(args.from_seed, args.seeds)  # seed-major: seeds early for all
            for cell in group]  # fmt: skip
    i, n = args.shard
    done = {key: {r["seed"] for r in row["runs"]} for key, row in by_key.items()}
    todo = shard_todo(plan, done, i, n)
    logging.info("%d runs to do in this shard", len(todo))
    if args.dry_run:
        for cell, seed in todo:
            logging.info("  %s seed %d", cell.key, seed)
        return
    if not args.report_only:
        graphs = OneGraphCache()
        for cell, seed in todo:
            run = run_cell(cell, seed, args.rounds, graphs)
            rows = read_json(args.runs, [])  # another shard may have saved meanwhile
            by_key = {row_key(r): r for r in rows}
            row = by_key.get(cell.key) or new_row(cell)
            if cell.key not in by_key:
                rows.append(row)
            row["runs"] = sorted([*[r for r in row["runs"] if r["seed"] != seed], run],
                                 key=lambda x: x["seed"])  # fmt: skip
            summarise(row)
            save_seed_rows(args.runs, rows, row_key, summarise)
            logging.info("%s seed %d: best %.2f, last %.2f, val-selected %s (%.0f s)", cell.key,
                         seed, run["best"], run["last"], run["val_selected"],
                         run["seconds"])  # fmt: skip
    from benchmarks.reproduce_fedvn.report import write_report

    budgets = (SHORT_PATH, MEDIUM_PATH, LONG_PATH)
    if args.runs.resolve() in (RUNS_PATH, *budgets):  # one of the report's files: all of them
        write_report(read_json(RUNS_PATH, []), args.out, *(read_json(p, []) for p in budgets))
    else:  # a scratch runs file: a report of its rows alone
        write_report(read_json(args.runs, []), args.out)
    logging.info("wrote %s, .md and .png", args.out)


if __name__ == "__main__":
    main()
