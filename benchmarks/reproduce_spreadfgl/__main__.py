"""Reproduce SpreadFGL's Table II (Zhong et al.) and FedSage+'s numbers (survey seed 001),
with bytes per round per party and the privacy–utility curve of the H protections.

Settings (``benchmarks/reproduce_spreadfgl/grid.py``): ``table2`` (Cora, CiteSeer, Coauthor CS;
M ∈ {6, 9, 12, 15}; LocalFGL, FedAvg-fusion, FedSage+, FedGL, SpreadFGL with 3 edge
servers), ``survey`` (FedSage / FedSage+ in their paper's setting), ``privacy`` (FedGL on
Cora M = 9 with each H protection, attacked by :mod:`attacks.h_inference` and
:mod:`attacks.generated_features`), ``bytes`` (patch encodings), and the tested causes
of the gaps to the paper (``partition``, ``table1-cut``, ``normfeat``, ``normfeat-scaled``,
``mean-ce``, ``tl20``, ``best-round``, ``f1-clients``, ``patcher``, ``hparams``: see the
grid). WikiCS is listed as not run (not available
offline).

Run: ``SECUREFGL_DATA=/path python -m benchmarks.reproduce_spreadfgl --settings table2
--datasets Cora --seeds 5``; ``--dry-run`` lists what remains; ``--report-only`` rebuilds
``benchmarks/results/spreadfgl.{md,png}`` from the JSON. Resumable: every finished seed is
saved at once (merged under a lock, so processes may share the file); seeds already in the
JSON are skipped.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks.generated_features import generated_feature_inference
from attacks.h_inference import h_label_inference, h_link_inference, h_membership
from attacks.simulation import simulate
from benchmarks.harness.graphs import OneGraphCache
from benchmarks.harness.results import csv_list, read_json, save_seed_rows
from benchmarks.harness.system import code_version
from benchmarks.reproduce_spreadfgl.grid import (
    CLIENTS,
    DATASETS,
    METHODS,
    READS,
    REDUCTION_METHODS,
    SURVEY_METHODS,
    VALIDATED,
    Cell,
    make_config,
    paper_value,
    plan,
    round_accuracies,
    row_key,
)
from benchmarks.reproduce_spreadfgl.report import write_markdown, write_plot
from securefgl.algorithms.common.edge.server import SERVER_MODEL_TAG
from securefgl.algorithms.fedsage.clients import ANSWER_TAG, QUERY_TAG
from securefgl.algorithms.spreadfgl.client import H_TAG
from securefgl.algorithms.spreadfgl.patch import PATCH_TAG
from securefgl.experiment.runner import run_single
from securefgl.federation import Transcript

ROOT = Path(__file__).resolve().parents[2]
JSON_PATH = ROOT / "benchmarks" / "results" / "spreadfgl.json"
ATTACKS = {
    "h_link_auc": h_link_inference,
    "h_label_accuracy": h_label_inference,
    "h_membership_auc": h_membership,
    "generated_label_accuracy": generated_feature_inference,
}


def traffic(entries: list, rounds: int) -> dict[str, float]:
    """kB per round per party (clients: up / down and the H / patch parts; servers: to
    other servers), per upload / download, and the set-up MB."""
    clients = {p for e in entries for p in (e.sender, e.receiver) if p.startswith("client")}
    servers = {p for e in entries for p in (e.sender, e.receiver) if p.startswith("edge")}
    total: dict[str, float] = dict.fromkeys(("up", "down", "h", "patch", "s2s", "setup"), 0.0)
    uploads = downloads = 0
    for e in entries:
        if e.round < 0:
            total["setup"] += e.nbytes
            continue
        if e.tag == H_TAG:
            total["h"] += e.nbytes
            uploads += 1
        elif e.tag == PATCH_TAG:
            total["patch"] += e.nbytes
            downloads += 1
        if e.tag == SERVER_MODEL_TAG:
            total["s2s"] += e.nbytes
        elif e.sender in clients:
            total["up"] += e.nbytes
        elif e.receiver in clients:
            total["down"] += e.nbytes
    per_client = max(len(clients), 1) * rounds * 1e3  # bytes → kB per client per round
    return {
        "client_up_kb": round(total["up"] / per_client, 2),
        "client_down_kb": round(total["down"] / per_client, 2),
        "h_kb": round(total["h"] / per_client, 2),
        "patch_kb": round(total["patch"] / per_client, 2),
        "h_per_upload_kb": round(total["h"] / max(uploads, 1) / 1e3, 2),
        "patch_per_download_kb": round(total["patch"] / max(downloads, 1) / 1e3, 2),
        "server_p2p_kb": round(total["s2s"] / max(len(servers), 1) / rounds / 1e3, 2),
        "setup_mb": round(total["setup"] / 1e6, 2),
    }


def measure(cell: Cell, cfg: Any, data: Any, seed: int, code: str | None) -> dict[str, Any]:
    t0 = time.time()
    out: dict[str, Any] = {"seed": seed, "code": code, "finished": time.time()}
    if cell.setting == "privacy":
        run = simulate(cfg, cell.method, seed, data, keep_tags=frozenset({H_TAG, PATCH_TAG}))
        result, entries = run.result, run.transcript.entries
        for name, attack in ATTACKS.items():
            res = attack(run)
            out[name] = None if res.value is None else round(float(res.value), 4)
            out[name + "_baseline"] = res.baseline()
        del run
    else:
        transcript = Transcript(store_payloads=False)
        result = run_single(cfg, cell.method, seed, data, progress=False, transcript=transcript)
        entries = transcript.entries
    out.update({
        "acc": round(100 * result.final["test_acc"], 2),
        "f1": round(100 * result.final["test_f1"], 2),
        "f1_clients": round(100 * result.final["client_mean_test_f1"], 2),
        "f1_clients_true": round(100 * result.final["client_mean_test_true_f1"], 2),
        "val_acc": round(100 * result.final["val_acc"], 2),
        "seconds": round(time.time() - t0, 1),
        "bytes": traffic(entries, cfg.rounds),
        "bytes_units": "kB",  # runs without it stored bytes / 1e3 instead of kB per round
        "h_epsilon": result.privacy.get("h_epsilon"),
        "cut_edges": result.partition.get("cut_edges"),
        "num_edges": result.partition.get("num_edges"),
        "cross_messages": sum(1 for e in entries if e.tag in (QUERY_TAG, ANSWER_TAG)),
    })  # fmt: skip
    out.update(round_accuracies(result.history))
    return out


def summarise(row: dict[str, Any]) -> None:
    runs = row["runs"]
    for key in ("acc", "f1"):
        values = np.array([r[key] for r in runs])
        row[key] = round(float(values.mean()), 2)
        row["std" if key == "acc" else "f1_std"] = round(float(values.std()), 2)
    for key in ("f1_clients", "f1_clients_true", "val_round_acc", "best_round_acc"):
        # runs before them (or evaluated only at the end) have only the final ACC and F1
        if all(key in r for r in runs):
            row[key] = round(float(np.mean([r[key] for r in runs])), 2)
    row["seeds"] = len(runs)
    row["seconds_per_seed"] = round(float(np.mean([r["seconds"] for r in runs])), 1)
    row["bytes"] = {k: round(float(np.mean([r["bytes"][k] for r in runs])), 2)
                    for k in runs[0]["bytes"]}  # fmt: skip
    eps = [r["h_epsilon"] for r in runs if r.get("h_epsilon") is not None]
    row["h_epsilon"] = round(float(np.mean(eps)), 3) if eps else None
    for name in ATTACKS:
        vals = [r[name] for r in runs if r.get(name) is not None]
        if vals:
            row[name] = round(float(np.mean(vals)), 4)
            base = [r[name + "_baseline"] for r in runs if r.get(name + "_baseline") is not None]
            row[name + "_baseline"] = round(float(np.mean(base)), 4) if base else None
    cut = [r["cut_edges"] / r["num_edges"] for r in runs if r.get("num_edges")]
    row["cut_fraction"] = round(float(np.mean(cut)), 4) if cut else None


def new_row(cell: Cell) -> dict[str, Any]:
    acc, f1, std = paper_value(cell)
    return {
        "setting": cell.setting, "dataset": cell.dataset, "clients": cell.clients,
        "edge_servers": cell.edge_servers, "method": cell.method, "protection": cell.protection,
        "acc": None, "f1": None, "std": None, "seeds": 0, "paper_acc": acc, "paper_f1": f1,
        "paper_std": std, "runs": [],
    }  # fmt: skip


def save_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    save_seed_rows(path, rows, row_key, summarise)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--settings", type=csv_list, default=["table2", "survey", "privacy", "bytes"]
    )
    parser.add_argument("--datasets", type=csv_list, default=list(DATASETS))
    parser.add_argument(
        "--clients", type=lambda s: [int(k) for k in csv_list(s)], default=list(CLIENTS)
    )
    parser.add_argument(  # Table II's methods and the survey's (which filter their cells)
        "--methods", type=csv_list, default=list(dict.fromkeys([*METHODS, *SURVEY_METHODS]))
    )
    parser.add_argument("--variants", type=csv_list, default=None,
                        help="narrow the patcher and hparams settings' variants (default: all)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    parser.add_argument("--out", type=Path, default=JSON_PATH)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("securefgl").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    rows = read_json(args.out, [])
    by_key = {row_key(r): r for r in rows}
    try:
        cells = plan(args.settings, args.datasets, args.clients, args.methods, args.variants)
    except ValueError as err:
        parser.error(str(err))
    todo = []
    for cell in cells:
        runs = by_key.get(cell.key, {"runs": []})["runs"]
        # runs without what their setting reads are redone (``READS``; validation accuracy
        # for the settings that enter a choice on validation)
        chosen = cell.setting in VALIDATED and (
            cell.setting != "table2" or cell.method in REDUCTION_METHODS)  # fmt: skip
        needed = READS.get(cell.setting, "val_acc" if chosen else None)
        done = {r["seed"] for r in runs if needed is None or needed in r}
        missing = [s for s in range(args.seeds) if s not in done]
        if missing:
            todo.append((cell, missing))
    logging.info("%d cells, %d with missing seeds (%d runs)", len(cells), len(todo),
                 sum(len(m) for _, m in todo))  # fmt: skip
    if args.dry_run:
        for cell, missing in todo:
            logging.info("  %s seeds %s", cell.key, missing)
        return
    if not args.report_only:
        graphs = OneGraphCache()
        code = code_version(ROOT)
        for cell, missing in todo:
            data = graphs.get(make_config(cell, 1))
            cfg = make_config(cell, int(data.num_features))
            row = by_key.get(cell.key)
            if row is None:
                row = by_key[cell.key] = new_row(cell)
                rows.append(row)
            for seed in missing:
                run = measure(cell, cfg, data, seed, code)
                kept = [r for r in row["runs"] if r["seed"] != seed]
                row["runs"] = sorted([*kept, run], key=lambda x: x["seed"])
                summarise(row)
                save_rows(args.out, rows)
                by_key = {row_key(r): r for r in rows}
                logging.info("%s seed %d: acc %.2f f1 %.2f (%.0f s)", cell.key, seed,
                             run["acc"], run["f1"], run["seconds"])  # fmt: skip
    rows = read_json(args.out, [])
    for row in rows:  # from the runs themselves: a grid process of older code may have
        if row["runs"]:  # merged a cell without a statistic that newer code adds
            summarise(row)
    save_rows(args.out, rows)
    write_markdown(rows, args.out.with_suffix(".md"))
    write_plot(rows, args.out.with_suffix(".png"))
    logging.info("wrote %s, .md, .png", args.out)


if __name__ == "__main__":
    main()
