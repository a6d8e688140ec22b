"""Per-party time and bytes of one aggregation round: plain / secagg / secagg+ / ckks.

For every cell (protocol, n clients, dimension d, dropout fraction) the protocol's parties
run one round behind the federation's executor and channel: CPU seconds per party from the
executor, bytes per sender / receiver from the channel's transcript, beside primitive limits
measured in the same run (PRG, X25519, CKKS encryption, memcpy) and a cost model that skips
cells over the time or memory budget. Methodology: ``benchmarks/notes/protocol_overhead.md``.

Run (from the repository root, in the venv)::

    python -m benchmarks.protocol_overhead            # full grid (n 10/100/500, d 1e4-1e6)
    python -m benchmarks.protocol_overhead --quick    # n in {10,100}, d in {1e4,1e5}
    python -m benchmarks.protocol_overhead --plan     # print the cost model's plan, run nothing
    python -m benchmarks.protocol_overhead --report-only   # re-render .md/.png from the JSON
    python -m benchmarks.protocol_overhead --threat-models malicious --merge   # add variants
    python -m benchmarks.protocol_overhead --bytes-only --dims 100000 1000000 --merge
        # bytes and aggregate errors only (deterministic): one round a cell, no re-runs;
        # its timings are marked not comparable

Every cell runs under each ``--threat-models`` entry (default both: ``honest-but-curious``
and ``malicious``, the signed and consistency-checked variants of secagg, secagg+ and ckks;
plain has none), and every row records its ``threat_model``. ``--merge`` keeps the rows of
the existing JSON that this run does not measure.

Writes ``benchmarks/results/protocol_overhead.json`` (one row per cell; rewritten after
every cell), ``protocol_overhead_meta.json`` (machine, load, primitives, arguments),
``protocol_overhead.md`` (tables, targets) and ``protocol_overhead.png``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cryptography
import numpy as np

from benchmarks.harness.results import read_json, write_json
from benchmarks.harness.system import (
    GIB,
    free_memory,
    loadavg,
    machine_info,
    mem_available,
    peak_rss_bytes,
    reset_peak_rss,
    rss_bytes,
)
from benchmarks.protocol_overhead import threat
from benchmarks.protocol_overhead.cells import (
    CKKS_BYTES_TARGET,
    DEFAULT_CLIENTS,
    DEFAULT_DIMS,
    DEFAULT_DROPOUTS,
    MALICIOUS_PROTOCOLS,
    PROTOCOLS,
    QUICK_CLIENTS,
    QUICK_DIMS,
    SECAGG_TARGET,
    Cell,
    default_drop_phase,
    make_protocol,
    sort_key,
)
from benchmarks.protocol_overhead.measure import CellTimeoutError, combine_repeats, run_cell
from benchmarks.protocol_overhead.model import Corrections, make_row, predict
from benchmarks.protocol_overhead.primitives import Primitives, ts
from benchmarks.protocol_overhead.report import fmt_s, summary_lines, write_markdown, write_plot
from protocols.base import Role
from protocols.identity import HONEST_BUT_CURIOUS, MALICIOUS, THREAT_MODELS

OUT = Path(__file__).resolve().parents[1] / "results"
STEM = "protocol_overhead"


def write_json_file(path: Path, data: Any) -> None:
    """The result files' format: indent 1, no NaN, atomic."""
    write_json(path, data, indent=1, allow_nan=False)


def plot_clients(clients: Sequence[int]) -> int:
    """The n of the plot: 100 if measured, else the middle n."""
    return 100 if 100 in clients else list(clients)[len(clients) // 2]


def measure_into(
    rec: dict[str, Any], repeats: int, args: argparse.Namespace, seed_offset: int = 0
) -> None:
    """Run ``repeats`` rounds of ``rec["cell"]``, appending to ``rec["runs"]``."""
    cell = rec["cell"]
    extra = rec["extra"]
    load_before = loadavg()
    free_memory()
    rss0 = rss_bytes()
    peak_ok = reset_peak_rss()
    hard = args.hard_factor * args.budget
    failure = None
    for rep in range(repeats):
        try:
            rec["runs"].append(run_cell(cell, hard, args.seed + seed_offset + rep))
        except CellTimeoutError:
            failure = f"aborted after {hard:.0f} s (hard limit)"
        except MemoryError:
            failure = "aborted: MemoryError"
        free_memory()
        if failure:
            break
    # a completed round counts even if a later repeat failed
    rec["skipped"] = None if rec["runs"] else failure
    peak = peak_rss_bytes() if peak_ok else None
    if "peak_rss_bytes" not in extra:
        extra.update(
            {
                "peak_rss_bytes": peak,
                "rss_before_bytes": rss0,
                "loadavg_before": load_before,
                "loadavg_after": loadavg(),
            }
        )
    else:
        extra["peak_rss_bytes"] = max(extra["peak_rss_bytes"] or 0, peak or 0) or None
        extra["loadavg_remeasure"] = load_before


def build_row(rec: dict[str, Any], prims: Primitives, bytes_only: bool = False) -> dict[str, Any]:
    measured = None
    if rec["runs"]:
        measured = combine_repeats(rec["runs"])
        measured.update(rec["extra"])
    row = make_row(rec["cell"], prims, measured, rec["skipped"], rec["pred"], rec["corr"])
    row["mem_available_bytes"] = rec["avail"]
    if bytes_only:  # a bytes / error run on a busy machine: its seconds are not a result
        row["timings_comparable"] = False
        if row["protocol"] in ("secagg", "secagg+"):  # their target is a time ratio
            row["target_met"] = None
    return row


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Per-party time and bytes of plain / secagg / secagg+ / ckks aggregation.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="n in {10,100}, d in {1e4,1e5}")
    parser.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=list(PROTOCOLS))
    parser.add_argument("--clients", nargs="+", type=int, help="n values (default 10 100 500)")
    parser.add_argument("--dims", nargs="+", type=int, help="d values (default 1e4 1e5 1e6)")
    parser.add_argument(
        "--dropouts",
        nargs="+",
        type=float,
        default=list(DEFAULT_DROPOUTS),
        help="dropout fractions",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=150.0,
        help="skip cells predicted to take longer (wall seconds)",
    )
    parser.add_argument(
        "--hard-factor",
        type=float,
        default=3.0,
        help="abort a running cell after hard-factor x budget seconds",
    )
    parser.add_argument(
        "--mem-fraction",
        type=float,
        default=0.7,
        help="skip cells whose predicted peak exceeds this fraction of MemAvailable",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="rounds per cell when the cell is predicted to take <= --repeat-below seconds "
        "(timings are per-metric medians over the rounds)",
    )
    parser.add_argument("--repeat-below", type=float, default=10.0)
    parser.add_argument(
        "--no-remeasure",
        dest="remeasure",
        action="store_false",
        help="do not re-run cheap secagg cells that missed the target at the end of the run",
    )
    parser.add_argument(
        "--drop-phase",
        nargs="+",
        default=[],
        metavar="PROTOCOL=PHASE",
        help="override the phase before which dropping clients go silent, e.g. "
        "secagg=masked_input (the pairwise-mask recovery path) or ckks=encrypt; default: "
        "the round's last client phase (secagg=unmask, ckks=open_mean, malicious ckks=decrypt)",
    )
    parser.add_argument(
        "--threat-models", nargs="+", choices=THREAT_MODELS, default=list(THREAT_MODELS),
        help="run every cell under these threat models (malicious: secagg, secagg+, ckks)",
    )  # fmt: skip
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the existing JSON's rows for cells this run does not measure",
    )
    parser.add_argument(
        "--paired",
        type=int,
        default=5,
        help="after the grid, this many back-to-back honest-but-curious/malicious pairs of "
        "rounds at the target cell (n = 100, d = 1e5) for the malicious-mode verdict; 0: none",
    )
    parser.add_argument(
        "--bytes-only",
        action="store_true",
        help="measure bytes and aggregate errors (deterministic) on a busy machine: one round "
        "per cell, no re-measuring, no paired rounds; rows and report mark the timings as "
        "not comparable",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT, help="results directory")
    parser.add_argument("--plan", action="store_true", help="print the plan, run nothing")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite the .md and .png from the JSON and meta file in --out, run nothing "
        "(rows without a threat_model, written before it existed, are stamped "
        "honest-but-curious in the JSON)",
    )
    args = parser.parse_args(argv)
    args.clients = tuple(args.clients or (QUICK_CLIENTS if args.quick else DEFAULT_CLIENTS))
    args.dims = tuple(args.dims or (QUICK_DIMS if args.quick else DEFAULT_DIMS))
    if any(n < 3 for n in args.clients) or any(d < 1 for d in args.dims):
        parser.error("need n >= 3 clients and d >= 1")
    if any(not 0 <= p < 0.5 for p in args.dropouts):
        parser.error("dropout fractions must be in [0, 0.5)")
    overrides = {}
    for item in args.drop_phase:
        proto, _, phase = item.partition("=")
        if proto not in PROTOCOLS:
            parser.error(f"--drop-phase: unknown protocol {proto!r}")
        try:
            client_phases = [
                ph.method for ph in make_protocol(proto).round_phases if ph.role is Role.CLIENT
            ]
        except RuntimeError as err:
            parser.error(str(err))
        if phase not in client_phases:
            parser.error(f"--drop-phase: {proto} client phases are {client_phases}, not {phase!r}")
        overrides[proto] = phase
    args.drop_phase = overrides
    if args.bytes_only:
        args.repeats, args.remeasure, args.paired = 1, False, 0
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    t_start = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        rows, meta = read_json(args.out / f"{STEM}.json"), read_json(args.out / f"{STEM}_meta.json")
        rows = threat.stamp(rows)
        write_json_file(args.out / f"{STEM}.json", sorted(rows, key=sort_key))
        write_markdown(rows, meta, args.out / f"{STEM}.md")
        write_plot(rows, args.out / f"{STEM}.png", plot_clients(meta["args"]["clients"]))
        return
    machine = machine_info(
        {
            "numpy": np.__version__,
            "cryptography": cryptography.__version__,
            "tenseal": getattr(ts, "__version__", None) if ts is not None else None,
        }
    )
    cells = [
        Cell(p, n, d, q, args.drop_phase.get(p, ""), tm)
        for p in args.protocols
        for tm in args.threat_models
        if tm == HONEST_BUT_CURIOUS or p in MALICIOUS_PROTOCOLS
        for n in args.clients
        for d in args.dims
        for q in args.dropouts
    ]
    print(f"measuring primitives (d = {list(args.dims)}) ...", flush=True)
    prims = Primitives.measure(args.dims, with_ckks="ckks" in args.protocols)
    print(
        f"  PRG {prims.prg_headline / 1e6:.0f} M words/s, agree {prims.agree_s * 1e6:.1f} us, "
        f"ckks {(prims.ckks_headline or 0) / 1e6:.2f} M floats/s",
        flush=True,
    )
    if args.plan:
        total = 0.0
        for cell in cells:
            pred = predict(cell, prims)
            mem_ok = 1.25 * pred["peak_bytes"] + 0.5 * GIB <= args.mem_fraction * mem_available()
            ok = pred["wall_seconds"] <= args.budget and mem_ok
            total += pred["wall_seconds"] if ok else 0.0
            print(
                f"{cell.protocol:8s} n={cell.clients:4d} d={cell.dim:.0e} drop={cell.dropout:.0%}"
                f"  wall~{pred['wall_seconds']:8.1f} s  peak~{pred['peak_bytes'] / GIB:6.2f} GiB"
                f"  client~{fmt_s(pred['client_seconds'])}"
                + ("" if ok else f"  (skip: {'time' if mem_ok else 'memory'})")
            )
        print(f"predicted total of runnable cells: {total:.0f} s")
        return
    meta: dict[str, Any] = {
        "machine": machine,
        "primitives": prims.to_json(),
        "mode": ("bytes only, " if args.bytes_only else "")
        + ("quick" if args.quick else "default grid"),
        "args": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("plan", "report_only")
        },
        "drop_phase": {
            p: args.drop_phase.get(p)
            or {tm: default_drop_phase(p, tm) for tm in args.threat_models}
            for p in args.protocols
        },
        "timings_comparable": not args.bytes_only,
        "ed25519": threat.ed25519_seconds(),
        "targets": {
            "secagg": f"client_seconds <= {SECAGG_TARGET:g} x limit_seconds",
            "secagg+": f"client_seconds <= {SECAGG_TARGET:g} x limit_seconds",
            "ckks": f"client_bytes_up <= {CKKS_BYTES_TARGET:g} x plain_bytes",
        },
    }
    json_path = args.out / f"{STEM}.json"
    meta_path = args.out / f"{STEM}_meta.json"
    earlier_pairs: dict[str, Any] = {}
    if args.merge and meta_path.exists():
        earlier_pairs = read_json(meta_path).get("paired") or {}
    kept: list[dict[str, Any]] = []
    if args.merge and json_path.exists():
        ours = {(c.protocol, c.clients, c.dim, c.dropout, c.threat_model) for c in cells}
        kept = [
            r for r in threat.stamp(read_json(json_path))
            if (r["protocol"], r["clients"], r["dim"], r["dropout"], r["threat_model"]) not in ours
        ]  # fmt: skip
    meta["merged_rows"] = len(kept)  # rows kept from an earlier run (its own conditions)
    rows: list[dict[str, Any]] = []
    corrections = Corrections()
    records: list[dict[str, Any]] = []
    for i, cell in enumerate(cells, 1):
        pred = predict(cell, prims)
        corr = corrections.for_cell(cell)
        wall_pred = pred["wall_seconds"] * corr["wall"]
        free_memory()
        avail = mem_available()
        allowed = args.mem_fraction * avail
        label = f"[{i}/{len(cells)}] {cell.protocol} n={cell.clients} d={cell.dim:.0e} " + (
            f"drop={cell.dropout:.0%} {cell.threat_model}"
        )
        rec: dict[str, Any] = {
            "cell": cell,
            "pred": pred,
            "corr": corr,
            "avail": avail,
            "runs": [],
            "skipped": None,
            "extra": {},
        }
        if 1.25 * pred["peak_bytes"] + 0.5 * GIB > allowed:
            rec["skipped"] = (
                f"memory: predicted peak {pred['peak_bytes'] / GIB:.1f} GiB (x1.25 + 0.5 GiB "
                f"margin) > {allowed / GIB:.1f} GiB allowed ({args.mem_fraction:g} x "
                "MemAvailable)"
            )
        elif wall_pred > args.budget:
            rec["skipped"] = f"time: predicted {wall_pred:.0f} s > budget {args.budget:g} s"
        if rec["skipped"] is None:
            repeats = max(1, args.repeats) if wall_pred <= args.repeat_below else 1
            print(f"{label}: predicted {wall_pred:.1f} s x {repeats} ...", end=" ", flush=True)
            measure_into(rec, repeats, args)
            if rec["runs"]:
                measured = combine_repeats(rec["runs"])
                corrections.add(cell, pred, measured)
                print(
                    f"done in {measured['wall_seconds']:.1f} s (client "
                    f"{fmt_s(measured['client_seconds'])}, server "
                    f"{fmt_s(measured['server_seconds'])}, ok={measured['result_ok']})",
                    flush=True,
                )
            else:
                print(rec["skipped"], flush=True)
        else:
            print(f"{label}: skipped ({rec['skipped']})", flush=True)
        records.append(rec)
        rows = [build_row(r, prims, args.bytes_only) for r in records]
        meta["runtime_seconds"] = time.time() - t_start
        meta["loadavg_at_end"] = loadavg()
        write_json_file(json_path, sorted(rows + kept, key=sort_key))
        meta["primitives"] = prims.to_json()
        write_json_file(meta_path, meta)
    # The limit is the machine's best: re-measure the primitives now (the load may have
    # changed) and keep the better of the two measurements for every limit.
    print("re-measuring primitives ...", flush=True)
    end = Primitives.measure(args.dims, with_ckks="ckks" in args.protocols)
    meta["primitives_start"] = prims.to_json()
    meta["primitives_end"] = end.to_json()
    prims.merge_best(end)
    meta["primitives"] = prims.to_json()
    meta["primitives"]["notes"] += " Limits use the better of the start and end measurements."
    # Second chance for cheap cells that missed a timing target: a contention spike from
    # other users of the machine can slow every round of a short cell. Their rounds are
    # re-run once now; the row keeps the best over all rounds and says so.
    rows = [build_row(r, prims, args.bytes_only) for r in records]
    retry = [
        (rec, row)
        for rec, row in zip(records, rows, strict=True)
        if row["target_met"] is False
        and row["protocol"] in ("secagg", "secagg+")
        and args.remeasure
        and row["predicted"]["wall_seconds"] <= args.repeat_below
    ]
    for rec, row in retry:
        cell = rec["cell"]
        print(
            f"re-measuring {cell.protocol} n={cell.clients} d={cell.dim:.0e} "
            f"drop={cell.dropout:.0%} (ratio {row['ratio_to_limit']:.2f}) ...",
            end=" ",
            flush=True,
        )
        first = combine_repeats(rec["runs"])
        rec["extra"]["remeasured"] = True
        rec["extra"]["client_seconds_first_pass"] = first["client_seconds"]
        rec["extra"]["ratio_to_limit_first_pass"] = row["ratio_to_limit"]
        measure_into(rec, max(1, args.repeats), args, seed_offset=len(rec["runs"]))
        print(f"client {fmt_s(combine_repeats(rec['runs'])['client_seconds'])}", flush=True)
    meta["remeasured_cells"] = len(retry)
    rows = [build_row(r, prims, args.bytes_only) for r in records] + kept
    rows.sort(key=sort_key)
    target = [p for p in args.protocols if p in MALICIOUS_PROTOCOLS]
    if args.paired and target and MALICIOUS in args.threat_models:
        n, d = threat.TARGET_CELL
        print(f"paired target-cell rounds (n={n}, d={d:.0e}, x{args.paired}) ...", flush=True)

        def client_seconds(protocol: str, threat_model: str) -> float:
            cell = Cell(protocol, n, d, 0.0, args.drop_phase.get(protocol, ""), threat_model)
            measured = run_cell(cell, args.budget * args.hard_factor, args.seed)
            return float(measured["client_seconds"])

        meta["paired"] = threat.paired(target, args.paired, client_seconds)
    if earlier_pairs:  # --merge: the pairs of protocols this run did not pair
        meta["paired"] = {**earlier_pairs, **meta.get("paired", {})}
        meta["paired_from_earlier_run"] = args.bytes_only
    meta["runtime_seconds"] = time.time() - t_start
    meta["loadavg_at_end"] = loadavg()
    meta["summary"] = summary_lines(rows, meta)
    write_json_file(json_path, rows)
    write_json_file(meta_path, meta)
    write_markdown(rows, meta, args.out / f"{STEM}.md")
    plotted = write_plot(
        rows,
        args.out / f"{STEM}.png",
        plot_clients(args.clients),
    )
    print("\n".join(meta["summary"]))
    print(
        f"wrote {json_path}, {meta_path}, {args.out / (STEM + '.md')}"
        + (f", {args.out / (STEM + '.png')}" if plotted else "")
        + f" in {meta['runtime_seconds']:.0f} s"
    )


if __name__ == "__main__":
    main()
