"""Cost of FedStruct's federated Ā (Algorithm 3) per hop-sum mode vs the central computation.

For every (dataset, K clients, L_s hops), random partition, this builds Ā^[i] for all
clients through the channel with plain / masked / ckks hop sums (rows or union support,
unpruned and receiver-pruned) and times ``securefgl.algorithms.fedstruct.central_abar`` beside it; a
cost model skips cells over the time or memory budget. Methodology:
``benchmarks/notes/adjacency.md``. Datasets are read by ``securefgl.data.load_dataset``
(``$SECUREFGL_DATA``).

    python -m benchmarks.adjacency_construction            # default grid (~30 min)
    python -m benchmarks.adjacency_construction --quick    # Cora, K 5/10, L_s 1/3
    python -m benchmarks.adjacency_construction --report-only   # re-render .md/.png

Writes ``<out>.json`` (one row per cell: ``dataset, clients, hops, mode, seconds, bytes,
central_seconds, pruned, support, ratio, skipped`` and diagnostics), ``<out>.md`` and
``<out>.png`` (default ``<out>`` = ``benchmarks/results/adjacency``). Every finished cell is
also saved to ``<out>.partial.json`` (removed at the end); after an interruption, the same
command with ``--resume`` re-runs only the cells not in it (and those its budget stopped).
"""

from __future__ import annotations

import argparse
import gc
import logging
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from benchmarks.adjacency_construction.cells import (
    DATASETS,
    VARIANTS,
    cell_key,
    label,
    merge_rows,
    receiver_masks_only,
)
from benchmarks.adjacency_construction.model import (
    CENTRAL_REPEAT,
    FEDERATED_REPEAT_BELOW_S,
    Estimate,
    Guarded,
    OverBudgetError,
    Structure,
    central_estimate,
    estimate,
    pruned_fill,
    row_fill,
)
from benchmarks.adjacency_construction.report import findings, plot, write_markdown
from benchmarks.harness.metering import MeteredRun
from benchmarks.harness.results import PartialFile, read_json, write_json
from benchmarks.harness.system import GIB, loadavg, peak_rss_bytes, reset_peak_rss, steady_allocator
from benchmarks.harness.timing import best_wall_cpu
from securefgl.algorithms.fedstruct.abar_build import HopSum, build_abar
from securefgl.algorithms.fedstruct.abar_central import central_abar, normalized_adjacency
from securefgl.algorithms.fedstruct.abar_client import AdjacencyClient, AdjacencyRelay
from securefgl.algorithms.fedstruct.abar_secure import hop_sum_for
from securefgl.data import (
    build_client_views,
    csbm,
    load_dataset,
    opaque_id_permutation,
    partition_graph,
    random_split,
)

ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger("adjacency_bench")


def load(name: str, seed: int) -> Any:
    if name == "csbm100k":
        d = csbm(num_nodes=100_000, num_classes=5, num_features=8, avg_degree=8.0, seed=seed)
        d.name = "csbm100k"
    else:
        d = load_dataset(name)
    d.train_mask, d.val_mask, d.test_mask = random_split(d.num_nodes, seed=seed)
    return d


def federated_build(views: list, hops: int, hop_sum: HopSum, pruned: bool, p: float) -> tuple:
    """(wall seconds, CPU seconds, parallel CPU critical path, report, clients)."""
    clients = {f"client-{v.client_id}": AdjacencyClient(v) for v in views}
    run = MeteredRun({**clients, "server": AdjacencyRelay("server", list(clients))})
    t, c = time.perf_counter(), time.process_time()
    report = build_abar(
        clients,
        run.channel,
        run.executor,
        hops,
        prune="receiver" if pruned else None,
        p=p,
        hop_sum=hop_sum,
    )
    cpu = time.process_time() - c
    overlap = run.executor.overlap_seconds + run.channel.overlap_seconds
    return time.perf_counter() - t, cpu, cpu - overlap, report, clients


def max_abs_err(clients: dict, ref: sp.csr_matrix, perm_inv: np.ndarray) -> float:
    err = 0.0
    for c in clients.values():
        if c.num_nodes:
            mine = ref[perm_inv[c.row_ids]][:, perm_inv]  # global ids -> the client's opaque
            err = max(err, float(abs(c.abar - mine).max()))
    return err


@dataclass
class World:
    """One dataset: graph, fill-in profile, central timings (and refs for the error)."""

    name: str
    n: int
    edge_index: np.ndarray
    fill: list[float]
    fill_pruned: list[float] | None  # pruned_fill at --p (None if the central chain is skipped)
    central: dict[tuple[int, bool], tuple[float | None, float | None, str | None, Any]]
    central_by_rule: dict[int, dict[str, float]]  # pruned: CPU s per tie rule (min is used)
    perm_inv: np.ndarray
    data: Any


def prepare_world(name: str, args: argparse.Namespace, mem_limit: float) -> World:
    d = load(name, args.seed)
    n = d.num_nodes
    ei = np.asarray(d.edge_index)
    a_hat = normalized_adjacency(ei, n)
    deg = a_hat.nnz / n
    fill = row_fill(a_hat, max(args.hops), 256, args.seed)
    log.info("%s: n=%d, mean row fill of Â^ℓ: %s", name, n, [round(f) for f in fill])
    central: dict[tuple[int, bool], tuple[float | None, float | None, str | None, Any]] = {}
    by_rule: dict[int, dict[str, float]] = {}
    for hops in args.hops:
        for pruned in (False, True):
            p = args.p if pruned else None
            est_s, est_mem = central_estimate(n, fill, hops, p, deg)
            if est_mem > mem_limit or est_s > args.cell_budget:
                why = f"central estimate {est_s:.0f}s / {est_mem / GIB:.1f} GiB over limits"
                central[hops, pruned] = (None, None, why, None)
                log.info("%s central L_s=%d pruned=%s skipped: %s", name, hops, pruned, why)
                continue
            repeat = CENTRAL_REPEAT if est_s < 0.5 else 3 if est_s < 2 else 1

            def job(h: int = hops, q: float | None = p) -> sp.csr_matrix:
                return central_abar(ei, n, h, prune=q)

            secs, cpu, abar = best_wall_cpu(job, repeat)
            if pruned:  # the reference is the faster tie rule (an Ā of the paper either way)
                paper = best_wall_cpu(
                    lambda h=hops: central_abar(ei, n, h, prune=args.p, ties="paper"), repeat
                )
                by_rule[hops] = {"row_column_order": cpu, "paper_argsort": paper[1]}
                secs, cpu = min(secs, paper[0]), min(cpu, paper[1])
            keep = abar if not pruned and abar.nnz * 12 < 800e6 else None  # for max |error|
            central[hops, pruned] = (secs, cpu, None, keep)
            log.info(
                "%s central L_s=%d pruned=%s: %.3fs nnz %d", name, hops, pruned, secs, abar.nnz
            )
            del abar
    perm_inv = np.argsort(opaque_id_permutation(n, args.seed))
    fill_pruned = None
    if any(central[h, True][0] is not None for h in args.hops):
        fill_pruned = pruned_fill(a_hat, max(args.hops), args.p)
        log.info(
            "%s: pruned chain, mean row width before pruning: %s",
            name,
            [round(f) for f in fill_pruned],
        )
    return World(name, n, ei, fill, fill_pruned, central, by_rule, perm_inv, d)


def run(
    args: argparse.Namespace,
    done: dict[tuple, dict] | None = None,
    checkpoint: Callable[[list[dict]], None] | None = None,
) -> list[dict]:
    """All cells: estimate each, then run them cheapest tier first (so a spent total budget
    skips the expensive tail, not whole datasets); rows come back in grid order. Cells in
    ``done`` (by :func:`cell_key`, from an interrupted run) are taken as measured;
    ``checkpoint`` gets the rows measured so far after every cell."""
    done = done or {}
    start = time.perf_counter()
    mem_limit = args.mem_limit_gib * GIB
    worlds = {name: prepare_world(name, args, mem_limit) for name in args.datasets}
    cells: list[tuple[dict, Estimate, Any]] = []
    variants = [(*v, None, None, True) for v in VARIANTS] + [
        ("masked", "union", True, t, None, True) for t in args.collusion_thresholds
    ]
    if args.ring32:  # the same masked-union cells in Z_2^32
        variants += [("masked", "union", pruned, None, 32, True) for pruned in (True, False)]
        variants += [("masked", "union", True, t, 32, True) for t in args.collusion_thresholds]
    if args.receiver_masks_only:  # masked-union (pruned) without pairwise masks
        rings = [None, 32] if args.ring32 else [None]
        variants += [("masked", "union", True, None, bits, False) for bits in rings]
    for name, w in worlds.items():
        for K in args.clients:
            part = partition_graph(w.data, K, "random", seed=args.seed)
            assignment = np.asarray(part.assignment)
            views = build_client_views(w.data, part, cross_edges="known", seed=args.seed)
            st = Structure.of(w.edge_index, assignment, K)
            for hops in args.hops:
                for mode, support, pruned, t, bits, pair_masks in variants:
                    if mode not in args.modes or (support and support not in args.supports):
                        continue
                    if pruned not in args.pruning:
                        continue
                    c_secs, c_cpu, c_why, _ = w.central[hops, pruned]
                    row: dict[str, Any] = {
                        "dataset": name,
                        "clients": K,
                        "hops": hops,
                        "mode": mode,
                        "seconds": None,
                        "bytes": None,
                        "central_seconds": c_secs,
                        "pruned": pruned,
                        "support": support,
                        "collusion_threshold": t,
                        "ring_bits": bits,
                        "pair_masks": pair_masks,
                        "ratio": None,
                        "skipped": None,
                        "p": args.p if pruned else None,
                        "num_nodes": w.n,
                        "central_skipped": c_why,
                        "central_unpruned_seconds": w.central[hops, False][0],
                        "central_cpu_seconds": c_cpu,
                        "central_cpu_by_tie_rule": w.central_by_rule.get(hops) if pruned else None,
                    }
                    est = estimate(
                        st, w.fill, hops, mode, support, args.p if pruned else None, w.fill_pruned
                    )
                    row.update(
                        est_seconds=round(est.seconds, 3),
                        est_bytes=int(est.bytes),
                        est_peak_gib=round(est.peak_bytes / GIB, 3),
                    )
                    if support == "rows" and pruned and name not in args.rows_pruned_datasets:
                        row["skipped"] = (
                            "trimmed: rows support encodes the same dense |R_i|·n values with or "
                            "without pruning (same cost as the unpruned rows cell); run on "
                            f"{', '.join(args.rows_pruned_datasets)} only"
                        )
                    elif est.peak_bytes > mem_limit:
                        row["skipped"] = (
                            f"estimated peak memory {est.peak_bytes / GIB:.1f} GiB > "
                            f"{args.mem_limit_gib} GiB"
                            + (" (dense |R_i|·n per sender)" if support == "rows" else "")
                        )
                    elif est.seconds > args.cell_budget:
                        row["skipped"] = (
                            f"estimated {est.seconds:.0f}s > cell budget {args.cell_budget:.0f}s"
                        )
                    cells.append((row, est, views))
    order = sorted(
        range(len(cells)),
        key=lambda j: (0 if cells[j][1].seconds <= 5 else 1 if cells[j][1].seconds <= 30 else 2, j),
    )
    measured: list[dict] = []
    for j in order:
        row, est, views = cells[j]
        if row["skipped"]:
            log.info("skip %s: %s", label(row), row["skipped"])
            continue
        if cell_key(row) in done:
            row.update(done[cell_key(row)])
            log.info("resumed %s from the interrupted run", label(row))
            continue
        left = args.total_budget - (time.perf_counter() - start)
        if est.seconds > left:
            row["skipped"] = f"estimated {est.seconds:.0f}s > remaining total budget {left:.0f}s"
            log.info("skip %s: %s", label(row), row["skipped"])
            continue
        run_cell(row, est, views, worlds[row["dataset"]], args, min(args.cell_budget, left))
        measured.append(row)
        if checkpoint is not None:
            checkpoint([*done.values(), *measured])
    return [row for row, _, _ in cells]


def run_cell(
    row: dict, est: Estimate, views: list, w: World, args: argparse.Namespace, budget: float
) -> None:
    mode, support, pruned, hops = row["mode"], row["support"], row["pruned"], row["hops"]
    K = row["clients"]

    def fresh_hop_sum() -> HopSum:  # new keys per repeat
        if mode == "plain":
            return hop_sum_for("plain")
        t, bits = row.get("collusion_threshold"), row.get("ring_bits")
        options: dict[str, Any] = {} if t is None else {"collusion_threshold": t}
        if bits is not None:
            options["word_bits"] = bits
        if receiver_masks_only(row):
            options["pair_masks"] = False
        return hop_sum_for(mode, f"bench/{w.name}/{K}/{hops}", support=support, **options)

    repeat = 3 if est.seconds < FEDERATED_REPEAT_BELOW_S else 1  # best of 3, like central
    gc.collect()
    reset_peak_rss()
    secs = cpu = par_cpu = math.inf
    for _ in range(repeat):
        guard = Guarded(fresh_hop_sum(), budget, est.per_hop, 1.5 * args.mem_limit_gib * GIB)
        try:
            s, c, pc, report, clients = federated_build(views, hops, guard, pruned, args.p)
        except OverBudgetError as err:
            row["skipped"] = str(err)
            row["partial_hop_seconds"] = [round(t, 3) for _, t in guard.done]
            log.info("skip %s: %s", label(row), row["skipped"])
            gc.collect()
            return
        secs, cpu, par_cpu = min(secs, s), min(cpu, c), min(par_cpu, pc)
    row["repeats"] = repeat
    peak = peak_rss_bytes()
    notes = [h.notes for h in report.hops[1:]]
    c_secs, c_cpu = row["central_seconds"], row["central_cpu_seconds"]
    ref = w.central[hops, False][3]
    row.update(
        seconds=round(secs, 4),
        cpu_seconds=round(cpu, 4),
        parallel_cpu_seconds=round(par_cpu, 4),
        bytes=report.bytes,
        wall_ratio=round(secs / c_secs, 2) if c_secs else None,
        ratio=round(cpu / c_cpu, 2) if c_cpu else None,
        parallel_ratio=round(par_cpu / c_cpu, 2) if c_cpu else None,
        channel_overlap=True,  # the serialisation is attributed to the parties
        messages=report.messages,
        abar_nnz=report.abar_nnz,
        setup_bytes=sum(x.get("setup_bytes", 0) for x in notes),
        single_sender_receivers=sum(x.get("single_sender_receivers", 0) for x in notes),
        hop_seconds=[round(h.seconds, 3) for h in report.hops],
        peak_rss_gib=round((peak or 0) / GIB, 2),
        loadavg=loadavg(),
        measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        max_abs_err=(
            max_abs_err(clients, ref, w.perm_inv) if ref is not None and not pruned else None
        ),
    )
    log.info(
        "%s: %.2fs (est %.1fs), %.1f MB (est %.1f), peak %.1f GiB (est %.1f), ratio %s, load %s",
        label(row), secs, est.seconds, report.bytes / 1e6, est.bytes / 1e6, peak / GIB,
        est.peak_bytes / GIB, row["ratio"], row["loadavg"],
    )  # fmt: skip
    del clients, report
    gc.collect()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--clients", nargs="+", type=int, default=[10, 5, 20])
    ap.add_argument("--hops", nargs="+", type=int, default=[1, 3, 10])
    ap.add_argument("--modes", nargs="+", default=["plain", "masked", "ckks"])
    ap.add_argument("--supports", nargs="+", default=["rows", "union"])
    ap.add_argument(
        "--pruning", nargs="+", choices=["none", "receiver"], default=["none", "receiver"]
    )
    ap.add_argument("--p", type=float, default=30)
    ap.add_argument(
        "--collusion-thresholds",
        nargs="*",
        type=int,
        default=[],
        help="extra masked-union (pruned) cells whose masks tolerate t colluding senders",
    )
    ap.add_argument(
        "--ring32",
        action="store_true",
        help="extra masked-union cells (pruned, unpruned, and -tN) with masks in Z_2^32",
    )
    ap.add_argument(
        "--receiver-masks-only",
        action="store_true",
        help="extra masked-union (pruned) cells without pairwise masks (-rx; with --ring32 "
        "also in Z_2^32): the trust of the ckks sum",
    )
    ap.add_argument("--cell-budget", type=float, default=120, help="seconds per cell")
    ap.add_argument("--total-budget", type=float, default=1500, help="seconds for all cells")
    ap.add_argument("--mem-limit-gib", type=float, default=6.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--rows-pruned-datasets",
        nargs="+",
        default=["cora"],
        help="datasets on which the rows-support + receiver-pruned cells run (same cost as rows)",
    )
    ap.add_argument("--quick", action="store_true", help="Cora, K 5/10, L_s 1/3, 30 s cells")
    ap.add_argument(
        "--merge", action="store_true", help="replace only these cells in the existing JSON"
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="take the cells an interrupted run measured (<out>.partial.json, written after "
        "every cell) instead of re-running them",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "adjacency"))
    ap.add_argument(
        "--report-only", action="store_true", help="rewrite .md/.png from an existing .json"
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    headline_k = 10 if 10 in args.clients else args.clients[0]
    if args.report_only:
        rows = read_json(out.with_suffix(".json"))
        old = (
            out.with_suffix(".md").read_text().splitlines()
            if out.with_suffix(".md").exists()
            else []
        )
        header = next((line for line in old if line.startswith("Generated by")), "")
        meta = {"header": header, "findings": findings(rows, headline_k)}
        write_markdown(rows, out.with_suffix(".md"), meta, headline_k)
        plot(rows, out.with_suffix(".png"), headline_k)
        return
    if args.quick:
        args.datasets, args.clients, args.hops = ["cora"], [10, 5], [1, 3]
        args.cell_budget, args.total_budget = 30, 300
    args.pruning = [p == "receiver" for p in args.pruning]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("securefgl").setLevel(logging.ERROR)  # per-hop info / warnings
    steady = steady_allocator()
    log.info("allocator: %s", "steady (glibc mallopt)" if steady else "default")
    t0, load0 = time.perf_counter(), loadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = PartialFile(out.with_suffix(".partial.json"))
    done = {}
    if args.resume and partial.path.exists():
        # a cell stopped by its budget is tried again (this run's budget may be another)
        done = {cell_key(r): r for r in partial.load() if "partial_hop_seconds" not in r}
        log.info("resuming: %d cells measured by the interrupted run (%s)", len(done), partial.path)
    rows = run(args, done, partial.save)  # atomic: a kill leaves the last full list
    if args.merge and out.with_suffix(".json").exists():
        rows = merge_rows(read_json(out.with_suffix(".json")), rows)
    write_json(out.with_suffix(".json"), rows, indent=1, newline=True)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    wall = time.perf_counter() - t0
    meta = {
        "header": (
            f"Generated by `python -m benchmarks.adjacency_construction` "
            f"({' '.join(sys.argv[1:]) or 'defaults'}); {machine}, load average at start "
            f"{load0}, {wall:.0f} s total, allocator "
            f"{'steady (glibc mallopt, `steady_allocator`)' if steady else 'default'}."
            + (
                " With --merge: that run replaced only its own cells; the other rows are "
                "from earlier runs (a row's `measured_at` in the JSON dates it, where set)."
                if args.merge
                else ""
            )
        ),
        "findings": findings(rows, headline_k),
    }
    write_markdown(rows, out.with_suffix(".md"), meta, headline_k)
    plot(rows, out.with_suffix(".png"), headline_k)
    partial.remove()
    log.info("wrote %s.{json,md,png} in %.0fs", out, wall)


if __name__ == "__main__":
    main()
