"""Parties across organisations: the local executor against Flower's simulation engine
and its deployment engine, on one machine (loopback only).

For each workload a deployment folder is prepared as :mod:`securefgl.deploy.loopback`
does for the tests (each party's keys made in its own process, the registrar's signed
registry, each client's view in its own file), then:

* ``local``: ``run_single`` in this process (the reference);
* ``flower-sim``: one ``securefgl party`` process per party, Flower's simulation engine in
  this process (a virtual SuperNode per party, reaching its daemon);
* ``flower-deploy``: a SuperLink with TLS and SuperNode authentication, one SuperNode per
  party started by the party's process, ``flwr run`` of securefgl's ServerApp.

``wall_s`` is the run alone (from the call, or from ``flwr run``, to the result), not the
start of the processes (``setup_s``). ``same_result``: the final metrics, the total bytes
and the transcript's messages (sender, receiver, tag, size, in order) equal the local
run's. Measured on a shared 2-core machine: the deployment engine's seconds per message
come from Flower's process per message and its polling (docs/deployment.md).

``python -m benchmarks.deployment`` (needs the ``flower`` and ``ray`` extras) writes
``benchmarks/results/deployment.json`` (rows ``{"workload", "executor", "nodes",
"wall_s", "same_result", ...}``) and ``deployment_meta.json``. Resumable: rows already in
the JSON are kept (``--fresh`` to redo).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.results import read_json, write_json
from benchmarks.harness.system import loadavg, machine_info

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
PORT = 19791  # the SuperLink's; SuperNodes from PORT + 10
SECAGG = {"stack": ["secagg+"], "threat_model": "malicious", "min_cohort": 3}
WORKLOADS: dict[str, dict[str, Any]] = {
    "csbm-fedavg-secagg+-malicious": {
        "dataset": "csbm", "clients": 5, "rounds": 2, "algorithms": ["fedavg"], "seeds": [0],
        "protocol": SECAGG,
    },
    "csbm600-fedstruct-masked-abar": {
        "dataset": "csbm", "csbm": {"num_nodes": 600}, "clients": 5, "rounds": 2,
        "algorithms": ["fedstruct"],
        "seeds": [0], "cross_edges": "known", "protocol": SECAGG,
        "fedstruct": {"sum_mode": "masked", "structure_hops": 2, "nsf_dim": 8,
                      "structure_hidden": [8], "feature_hidden": [8]},
    },
}  # fmt: skip
EXECUTORS = ("local", "flower-sim", "flower-deploy")


def _summary(result: Any, transcript: Any) -> dict[str, Any]:
    from securefgl.deploy.driver import transcript_digest

    rounds = sum(h["bytes_up"] + h["bytes_down"] + h["bytes_p2p"] for h in result.history)
    return {"final": result.final, "bytes": int(result.setup_bytes + rounds),
            "digest": transcript_digest(transcript)}  # fmt: skip


def run_local(config_path: Path) -> tuple[float, dict[str, Any]]:
    from securefgl.deploy.settings import load
    from securefgl.experiment.runner import load_graph, run_single
    from securefgl.federation import Transcript

    settings = load(config_path)
    graph = load_graph(settings.experiment)
    transcript = Transcript()
    t0 = time.perf_counter()
    result = run_single(settings.experiment, settings.algorithm, settings.seed, graph,
                        progress=False, transcript=transcript)  # fmt: skip
    return time.perf_counter() - t0, _summary(result, transcript)


def _deployed(run: Any) -> dict[str, Any]:
    return {"final": run["result"]["final"], "bytes": run["transcript_bytes"],
            "digest": run["transcript_digest"]}  # fmt: skip


def run_sim(config_path: Path, folder: Path) -> tuple[float, float, dict[str, Any]]:
    from securefgl.deploy import loopback
    from securefgl.deploy.flower_server import run_simulation
    from securefgl.deploy.settings import load

    settings = load(config_path)
    procs = loopback.Processes(folder / "logs-sim")
    try:
        t0 = time.perf_counter()
        loopback.start_parties(config_path, list(settings.parties), procs)
        t1 = time.perf_counter()
        run = run_simulation(settings)
        wall = time.perf_counter() - t1
    finally:
        procs.stop()
    return t1 - t0, wall, _deployed(json.loads(json.dumps(run.to_dict(), default=str)))


def run_deploy(config_path: Path, folder: Path) -> tuple[float, float, dict[str, Any]]:
    from securefgl.deploy import flower_launch as fl
    from securefgl.deploy import loopback
    from securefgl.deploy.keys import node_key
    from securefgl.deploy.settings import load

    settings = load(config_path)
    procs = loopback.Processes(folder / "logs-deploy")
    result, progress = folder / "deploy-result.json", folder / "deploy-progress.jsonl"
    result.unlink(missing_ok=True)
    progress.unlink(missing_ok=True)
    try:
        t0 = time.perf_counter()
        fl.start_superlink(folder, PORT, procs)
        for pid in settings.parties:
            fl.register_node(folder, PORT, node_key(settings.party(pid).keydir)[1], pid)
        loopback.start_parties(config_path, list(settings.parties), procs, supernode=True)
        t1 = time.perf_counter()
        fl.flwr_run(folder, PORT, procs, config_path, result, progress)
        deadline = t1 + 3600
        while not result.exists():
            if time.perf_counter() > deadline:
                raise TimeoutError(procs.log("flwr-run")[-2000:])
            time.sleep(0.5)
        wall = time.perf_counter() - t1
    finally:
        procs.stop()
    return t1 - t0, wall, _deployed(json.loads(result.read_text()))


def prepare(name: str, work: Path) -> Path:
    from securefgl.deploy import flower_launch as fl
    from securefgl.deploy import loopback

    folder = work / name
    shutil.rmtree(folder, ignore_errors=True)
    fl.make_certificates(folder / "certs")
    extra = {"superlink": f"127.0.0.1:{PORT}", "root_certificates": "certs/ca.crt",
             "party_timeout": 180.0}  # fmt: skip
    return loopback.prepare(folder, WORKLOADS[name], extra, PORT + 10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.deployment")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--executors", default=",".join(EXECUTORS))
    parser.add_argument("--work", type=Path, default=Path("/tmp/securefgl-deployment-bench"))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--fresh", action="store_true")
    args = parser.parse_args(argv)
    path = args.out / "deployment.json"
    rows: list[dict[str, Any]] = [] if args.fresh else read_json(path, [])
    done = {(r["workload"], r["executor"]) for r in rows}
    write_json(args.out / "deployment_meta.json", {
        "machine": machine_info(), "note": "measured on a busy shared 2-core machine (other "
        "jobs running; see load_before of each row): wall times are inflated",
    }, newline=True)  # fmt: skip
    for name in args.workloads.split(","):
        config = prepare(name, args.work)
        from securefgl.deploy.loopback import party_ids

        nodes = len(party_ids(WORKLOADS[name]))  # one party process (and SuperNode) each
        _, reference = run_local(config)
        for executor in args.executors.split(","):
            if (name, executor) in done:
                continue
            load_before = loadavg()
            setup = 0.0
            if executor == "local":
                wall, got = run_local(config)
            elif executor == "flower-sim":
                setup, wall, got = run_sim(config, config.parent)
            else:
                setup, wall, got = run_deploy(config, config.parent)
            row = {
                "workload": name, "executor": executor,
                "nodes": 0 if executor == "local" else nodes,
                "wall_s": round(wall, 2), "same_result": got == reference,
                "setup_s": round(setup, 2), "bytes": got["bytes"],
                "test_acc": got["final"].get("test_acc"), "load_before": load_before,
            }  # fmt: skip
            print(json.dumps(row), flush=True)
            rows = [r for r in rows if (r["workload"], r["executor"]) != (name, executor)]
            rows.append(row)
            write_json(path, rows, newline=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
