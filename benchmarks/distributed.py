"""Local vs Ray executor: wall time, peak memory and whether the result is the same.

Each (workload, executor) runs in a fresh child process (clean peak memory); the Ray rows
start a local Ray with ``--workers`` CPUs and count the driver's peak RSS plus every
worker's. "Same result": the Ray run's final accuracy and total bytes on the channel equal
the local run's. The empty-round row is Ray's own per-round cost: FedAvg's calls with no
training (every client asked for its training weight once per round, as many batches as a
FedAvg + SecAgg round issues).

Run on an otherwise idle machine (2 cores here; Ray's workers run at a lower priority than
other jobs): ``SECUREFGL_DATA=... python -m benchmarks.distributed``. Writes
``benchmarks/results/distributed.{json,md}``; rows ``{"workload", "executor", "workers",
"clients", "wall_seconds", "peak_rss_gib", "rounds", "same_result_as_local"}``.
Resumable: rows already in the JSON are kept (``--fresh`` to redo).

Ray rows also say what crossed the driver (:class:`~securefgl.federation.ray_executor.
RayExecutor`'s counters): ``driver_read_payload_bytes`` (payloads brought into the driver:
kept transcripts, driver code reading one; a receiving actor always fetches from the
sender's, so no payload is relayed by the driver), ``driver_put_bytes`` (payloads the driver
itself sent), ``driver_call_bytes`` / ``driver_result_bytes`` (encoded call arguments and
results), ``driver_payload_bytes`` (read + put: every payload byte that was in the driver)
and ``ray_startup_seconds`` (starting Ray and its worker processes, with the modules of
the parties' builders imported as the driver has them before its clock starts, not
building the parties; ``ray_import_seconds``: of which the slowest worker's imports).
Every row has ``wall_s_excluding_setup``: its wall time less Ray's start-up (the local
executor has none). ``--driver-bytes`` runs the Ray cells again and merges only these
byte counts (deterministic) into the rows, keeping their timings.

``--pairs N`` runs N back-to-back pairs of each workload (local on one thread, Ray on
``--workers``; the order alternates from pair to pair) and appends them to
``distributed_pairs.json``; the report gives each pair's Ray / local ratio (start-up
excluded) and the ratio of the medians, which the ≤ 1.2× target is read on: a single pair
on 2 shared cores moves by ±10 %.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.notes import section
from benchmarks.harness.results import read_json, write_json, write_text
from benchmarks.harness.system import machine_info

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
NOTES = "distributed"
GIB = 1 << 30
DRIVER_FIELDS = {"driver_read_payload_bytes": "driver_fetched_bytes",
                 "driver_put_bytes": "driver_put_bytes",
                 "driver_call_bytes": "driver_call_bytes",
                 "driver_result_bytes": "driver_result_bytes"}  # fmt: skip


def driver_traffic(executors: list[Any], wall: float) -> dict[str, Any]:
    """What crossed the driver, summed over a run's Ray executors, and the wall time without
    Ray's start-up (the local executor: no driver fields, the whole wall time)."""
    ray = [ex for ex in executors if hasattr(ex, "driver_fetched_bytes")]
    if not ray:
        return {"wall_s_excluding_setup": round(wall, 2)}
    out = {row: sum(int(getattr(ex, attr)) for ex in ray) for row, attr in DRIVER_FIELDS.items()}
    startup = sum(ex.startup_seconds for ex in ray)
    return {
        **out,
        "driver_payload_bytes": out["driver_read_payload_bytes"] + out["driver_put_bytes"],
        "ray_startup_seconds": round(startup, 2),
        "ray_import_seconds": round(sum(ex.import_seconds for ex in ray), 2),
        "wall_s_excluding_setup": round(wall - startup, 2),
    }


#: name -> (algorithm, experiment settings); every run: one seed, random partition
WORKLOADS: dict[str, tuple[str, dict[str, Any]]] = {
    "cora-fedavg-secagg": ("fedavg", {"dataset": "Cora", "clients": 10, "rounds": 50,
                                      "protocol": ["secagg"]}),
    "pubmed-fedavg-secagg": ("fedavg", {"dataset": "PubMed", "clients": 10, "rounds": 50,
                                        "protocol": ["secagg"]}),
    # FedStruct's masked Ā build (Algorithm 3, L_s = 10 hops of secure sums) and one round
    "cora-fedstruct-abar": ("fedstruct", {"dataset": "Cora", "clients": 10, "rounds": 1,
                            "protocol": ["secagg"], "cross_edges": "known",
                            "fedstruct": {"sum_mode": "masked", "abar_support": "union",
                                           "structure_hops": 10}}),
    "photo-fedstruct-abar": ("fedstruct", {"dataset": "Photo", "clients": 10, "rounds": 1,
                             "protocol": ["secagg"], "cross_edges": "known",
                             "fedstruct": {"sum_mode": "masked", "abar_support": "union",
                                           "structure_hops": 10}}),
    # Ray's own cost per round: FedAvg rounds with almost no work (20-node clients)
    "near-empty-rounds": ("fedavg", {"csbm": {"num_nodes": 200, "num_features": 4},
                          "clients": 10, "rounds": 50, "hidden": 4, "local_epochs": 1}),
    "csbm-1e6-fedavg-k100": ("fedavg", {"csbm": {"num_nodes": 1_000_000}, "clients": 100,
                             "rounds": 20}),
}  # fmt: skip
#: recommendation workloads: name -> (dataset, RecConfig settings); privacy noise seeded
#: (NOT PRIVATE) so that the Ray run can be compared with the local one
REC_WORKLOADS: dict[str, tuple[str, dict[str, Any]]] = {
    "epinions-fesog-1000": ("Epinions", {"method": "fesog", "users_per_round": 1000,
                            "rounds": 50, "eval_every": 50, "user_groups": 2}),
}  # fmt: skip
ALL_WORKLOADS = [*WORKLOADS, *REC_WORKLOADS]


def one_recommendation(workload: str, executor: str, workers: int, threads: int) -> dict[str, Any]:
    """A recommendation cell: its users in ``user_groups`` parties, as in the local run."""
    import torch

    from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
    from securefgl.data.rating_views import ClientViews
    from securefgl.data.ratings import load_ratings

    dataset, settings = REC_WORKLOADS[workload]
    torch.set_num_threads(threads)
    views = ClientViews.from_data(load_ratings(dataset, None))
    cfg = RecConfig(**settings, seeded_noise=True, executor=executor, workers=workers)
    t0 = time.perf_counter()
    with FedRecTrainer(views, cfg) as tr:
        setup = time.perf_counter() - t0
        result = tr.run()
    wall = time.perf_counter() - t0
    worker_peaks = [p for p in getattr(tr.executor, "peak_rss_by_worker", []) if p]
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "workload": workload, "executor": executor,
        "workers": workers if executor == "ray" else 1, "threads": threads,
        "clients": settings["users_per_round"], "wall_seconds": round(wall, 2),
        "setup_seconds": round(setup, 2),
        "peak_rss_gib": round((driver + sum(worker_peaks)) / GIB, 3),
        "peak_rss_gib_per_worker": [round(p / GIB, 3) for p in worker_peaks],
        "rounds": result.rounds, "test_rmse": result.test_rmse,
        "total_bytes": tr.channel.transcript.total_bytes(),
        **driver_traffic([tr.executor], wall),
    }  # fmt: skip


def one(workload: str, executor: str, workers: int, threads: int) -> dict[str, Any]:
    """Run one cell in this process; returns its row (with the result's fingerprint).
    ``threads``: torch threads of the driver (local) or of every worker (ray)."""
    if workload in REC_WORKLOADS:
        return one_recommendation(workload, executor, workers, threads)
    import torch

    from securefgl.config import ExperimentConfig
    from securefgl.experiment.runner import load_graph, run_single
    from securefgl.federation.federation import Federation

    algorithm, settings = WORKLOADS[workload]
    rounds, clients = settings["rounds"], settings["clients"]
    cfg = ExperimentConfig(
        **{"partition": "random", "eval_every": rounds, **settings},
        executor=executor, workers=workers, threads=threads,
    )  # fmt: skip
    torch.set_num_threads(threads)  # as run_experiment does
    data = load_graph(cfg)
    worker_peaks: list[int] = []
    made: list[Any] = []
    close = Federation.close

    def keep_peaks(self: Federation) -> None:
        made.extend(self._made)
        for ex in self._made:
            ex.shutdown()
            worker_peaks.extend(p for p in getattr(ex, "peak_rss_by_worker", []) if p)
        close(self)

    Federation.close = keep_peaks  # type: ignore[method-assign]
    t0 = time.perf_counter()
    result = run_single(cfg, algorithm, 0, data, progress=False)
    wall = time.perf_counter() - t0
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    total_bytes = result.setup_bytes + sum(
        h["bytes_up"] + h["bytes_down"] + h["bytes_p2p"] for h in result.history
    )
    return {
        "workload": workload, "executor": executor,
        "workers": workers if executor == "ray" else 1, "threads": threads, "clients": clients,
        "wall_seconds": round(wall, 2), "setup_seconds": round(result.setup_seconds, 2),
        "peak_rss_gib": round((driver + sum(worker_peaks)) / GIB, 3),
        "peak_rss_gib_per_worker": [round(p / GIB, 3) for p in worker_peaks],
        "rounds": rounds, "test_acc": result.final["test_acc"], "total_bytes": total_bytes,
        **driver_traffic(made, wall),
    }  # fmt: skip


def run_child(workload: str, executor: str, workers: int, threads: int) -> dict[str, Any]:
    one = ["--one", workload, executor, str(workers), str(threads)]
    cmd = [sys.executable, "-m", "benchmarks.distributed", *one]  # a fresh process per row
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any],
             pairs: list[dict[str, Any]]) -> str:
    lines = ["# Local vs Ray executor", "", section(NOTES, "lead"), "",
             "## Every workload on both executors", "",
             "| workload | executor | workers | torch threads | clients | rounds | wall s "
             "| of which set-up s | speed-up vs local (1 thread / 2 threads) | peak RSS GiB "
             "| same result |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    local = {(r["workload"], r["threads"]): r for r in rows if r["executor"] == "local"}

    def ratio(r: dict[str, Any], threads: int) -> str:
        base = local.get((r["workload"], threads))
        return f"{base['wall_seconds'] / r['wall_seconds']:.2f}×" if base else "–"

    for r in sorted(rows, key=lambda r: (ALL_WORKLOADS.index(r["workload"]),
                                         r["executor"], r["threads"])):  # fmt: skip
        same = {True: "yes", False: "NO", None: "–"}[r.get("same_result_as_local")]
        lines.append(
            f"| {r['workload']} | {r['executor']} | {r['workers']} | {r['threads']} | "
            f"{r['clients']} | {r['rounds']} | {r['wall_seconds']:.1f} | "
            f"{r.get('setup_seconds', float('nan')):.1f} | {ratio(r, 1)} / {ratio(r, 2)} | "
            f"{r['peak_rss_gib']:.2f} | {same} |"
        )
    lines += driver_table(rows) + startup_table(rows) + pairs_table(pairs)
    lines += [
        "",
        "## Conclusion",
        "",
        section(NOTES, "conclusion"),
        "",
        "## Settings",
        "",
        section(NOTES, "intro"),
        "",
        f"Machine: {meta.get('machine', {}).get('cpu_count', '?')} CPUs.",
        "",
        "## Findings",
        "",
        *per_round_overhead(rows),
        section(NOTES, "reading"),
        "",
    ]
    return "\n".join(lines)


def driver_table(rows: list[dict[str, Any]]) -> list[str]:
    """What crossed the driver in the Ray rows that measured it."""
    ray = [r for r in rows if r["executor"] == "ray" and "driver_read_payload_bytes" in r]
    if not ray:
        return []
    lines = ["", "## What crossed the driver (Ray)", "",
             "Payloads go from actor to actor (the receiver fetches from the sender's object "
             "store); the driver records their size and digest. Payload bytes read: payloads "
             "brought into the driver (kept transcripts, driver code reading one). Call and "
             "result bytes: the encoded arguments and results of every call (ids, settings, "
             "the numbers driver code uses).", "",
             "| workload | channel bytes | payload bytes read | driver-sent payload bytes "
             "| call bytes | result bytes | same result |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in ray:
        same_result = r.get("driver_bytes_same_result", r.get("same_result_as_local"))
        same = {True: "yes", False: "NO", None: "–"}[same_result]
        lines.append(f"| {r['workload']} | {r['total_bytes']:,} | "
                     f"{r['driver_read_payload_bytes']:,} | {r['driver_put_bytes']:,} | "
                     f"{r['driver_call_bytes']:,} | {r['driver_result_bytes']:,} | "
                     f"{same} |")  # fmt: skip
    return lines


def startup_table(rows: list[dict[str, Any]]) -> list[str]:
    """Ray's wall time without its start-up (starting Ray and the worker processes with
    their builder modules imported, not building the parties) against the local run on one
    thread: the issue's ≤ 1.2× target. Rows measured before the workers imported their
    modules at start-up have no import column."""
    local = {r["workload"]: r for r in rows if r["executor"] == "local" and r["threads"] == 1}
    ray = [r for r in rows if r["executor"] == "ray" and "ray_startup_seconds" in r
           and r["workload"] in local]  # fmt: skip
    if not ray:
        return []
    lines = ["", "## Ray without its start-up", "",
             "| workload | local wall s (1 thread) | Ray wall s | Ray start-up s "
             "(of which imports) | Ray wall − start-up s | Ray / local |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in ray:
        base = local[r["workload"]]["wall_seconds"]
        net = r["wall_s_excluding_setup"]
        imports = f" ({r['ray_import_seconds']:.1f})" if "ray_import_seconds" in r else ""
        lines.append(
            f"| {r['workload']} | {base:.1f} | {r['wall_seconds']:.1f} | "
            f"{r['ray_startup_seconds']:.1f}{imports} | {net:.1f} | {net / base:.2f}× |"
        )
    return lines


PAIR_TARGET = 1.2  # Ray (start-up excluded) / local, ratio of the medians


def run_pairs(workloads: list[str], count: int, workers: int) -> list[dict[str, Any]]:
    """``count`` back-to-back (local, Ray) pairs of each workload, alternating which runs
    first; every row tagged with its pair and the session it ran in."""
    session = time.strftime("%Y-%m-%d %H:%M")
    rows = []
    for workload in workloads:
        for pair in range(count):
            cells = [("local", 1), ("ray", workers)]
            for executor, n in cells if pair % 2 == 0 else cells[::-1]:
                row = run_child(workload, executor, n, 1)
                row.update(pair=pair, session=session)
                rows.append(row)
                print(f"{workload} pair {pair} {executor}: "
                      f"{row['wall_s_excluding_setup']:.2f} s", flush=True)  # fmt: skip
    return rows


def pairs_table(pairs: list[dict[str, Any]]) -> list[str]:
    """Each back-to-back pair's Ray / local ratio (start-up excluded) and, per workload and
    session, the ratio of the medians against the target."""
    groups: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
    for r in pairs:
        cell = groups.setdefault((r["workload"], r["session"]), {}).setdefault(r["pair"], {})
        cell[r["executor"]] = r["wall_s_excluding_setup"]
    if not groups:
        return []
    lines = ["", "## Ray against local, back-to-back pairs", "",
             "Start-up excluded, both on one torch thread; a fresh process per run, the "
             "machine otherwise idle (`--pairs`).", "",
             "| workload | session | pairs: Ray / local | median Ray s / median local s "
             "| ratio of medians | target ≤ 1.2× |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for (workload, session), cells in sorted(groups.items()):
        done = [c for c in cells.values() if {"local", "ray"} <= c.keys()]
        if not done:  # an interrupted pair: nothing to compare
            continue
        ray = statistics.median(c["ray"] for c in done)
        local = statistics.median(c["local"] for c in done)
        each = ", ".join(f"{c['ray'] / c['local']:.2f}" for c in done)
        met = "met" if ray / local <= PAIR_TARGET else "not met"
        lines.append(f"| {workload} | {session} | {each} | {ray:.2f} / {local:.2f} | "
                     f"{ray / local:.2f}× | {met} |")  # fmt: skip
    return lines


def per_round_overhead(rows: list[dict[str, Any]]) -> list[str]:
    """Ray's own cost per round: the near-empty rounds' time after set-up, Ray minus local
    (both on one torch thread)."""
    cells = {(r["executor"], r["threads"]): r for r in rows if r["workload"] == "near-empty-rounds"}
    ray, local = cells.get(("ray", 1)), cells.get(("local", 1))
    if ray is None or local is None:
        return []

    def per_round(r: dict[str, Any]) -> float:
        return (r["wall_seconds"] - r["setup_seconds"]) / r["rounds"]

    extra = per_round(ray) - per_round(local)
    return [
        f"Ray's own cost per round (near-empty rounds, after set-up): {per_round(ray) * 1e3:.1f} "
        f"ms per round on Ray against {per_round(local) * 1e3:.1f} ms locally, "
        f"{extra * 1e3:.1f} ms more.",
        "",
    ]


def merge_driver_bytes(rows: list[dict[str, Any]], workloads: list[str], workers: int) -> None:
    """The Ray cells of ``workloads`` again; only their driver byte counts are kept (their
    timings stay those of the idle-machine run), and whether the result is unchanged."""
    for workload in workloads:
        row = next((r for r in rows if r["workload"] == workload and r["executor"] == "ray"
                    and r["workers"] == workers), None)  # fmt: skip
        if row is None:
            continue
        print(f"{workload} · ray · driver bytes", flush=True)
        fresh = run_child(workload, "ray", workers, row["threads"])
        metric = "test_rmse" if workload in REC_WORKLOADS else "test_acc"
        row.update({k: fresh[k] for k in DRIVER_FIELDS if k in fresh})
        same = fresh[metric] == row[metric] and fresh["total_bytes"] == row["total_bytes"]
        row["driver_bytes_same_result"] = same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one", nargs=4, metavar=("WORKLOAD", "EXECUTOR", "WORKERS", "THREADS"))
    parser.add_argument("--workloads", default=",".join(ALL_WORKLOADS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--driver-bytes", action="store_true",
                        help="rerun the Ray cells; merge only what crossed the driver")  # fmt: skip
    parser.add_argument("--pairs", type=int, default=0,
                        help="run this many back-to-back local / Ray pairs of each workload "
                             "(into distributed_pairs.json), then report")  # fmt: skip
    args = parser.parse_args()
    if args.one:
        workload, executor, workers, threads = args.one
        print(json.dumps(one(workload, executor, int(workers), int(threads))))
        return
    path, pairs_path = OUT / "distributed.json", OUT / "distributed_pairs.json"
    rows: list[dict[str, Any]] = [] if args.fresh else read_json(path, [])
    pairs: list[dict[str, Any]] = read_json(pairs_path, [])
    if args.pairs:
        pairs += run_pairs(args.workloads.split(","), args.pairs, args.workers)
        write_json(pairs_path, pairs, indent=1, newline=True)
        args.report_only = True
    done = {(r["workload"], r["executor"], r["workers"], r["threads"]) for r in rows}
    cells = (("local", 1, 1), ("local", 1, args.workers), ("ray", args.workers, 1))
    if args.driver_bytes:
        merge_driver_bytes(rows, args.workloads.split(","), args.workers)
        write_json(path, rows, indent=1, newline=True)
        args.report_only = True
    for workload in args.workloads.split(","):
        if args.report_only:
            break
        for executor, workers, threads in cells:
            if (workload, executor, workers, threads) in done:
                continue
            print(f"{workload} · {executor} · {workers} worker(s) · {threads} thread(s)",
                  flush=True)  # fmt: skip
            row = run_child(workload, executor, workers, threads)
            local = next((r for r in rows if r["workload"] == workload
                          and r["executor"] == "local" and r["threads"] == 1), None)  # fmt: skip
            metric = "test_rmse" if workload in REC_WORKLOADS else "test_acc"
            row["same_result_as_local"] = (
                None if executor == "local" or local is None
                else row[metric] == local[metric] and row["total_bytes"] == local["total_bytes"]
            )  # fmt: skip
            rows.append(row)
            write_json(path, rows, indent=1, newline=True)
            print(f"  {row['wall_seconds']:.1f} s, {row['peak_rss_gib']:.2f} GiB", flush=True)
    meta_path = OUT / "distributed_meta.json"
    if args.report_only:  # the machine the rows were measured on, not the one rendering
        meta = read_json(meta_path, {"machine": machine_info()})
    else:
        meta = {"machine": machine_info()}
        write_json(meta_path, meta, indent=1, newline=True)
    write_text(OUT / "distributed.md", markdown(rows, meta, pairs))


if __name__ == "__main__":
    main()
