"""One measured aggregation round of a cell.

The protocol's parties are hosted (:class:`~securefgl.federation.ProtocolHost`) by the
executor of a :class:`~harness.metering.MeteredRun`: every party call, the inputs handed
over by ``begin_round`` included, is timed per party by the executor (CPU seconds, plus
wall seconds), and every envelope crosses the channel, whose transcript gives the bytes
each party sent and received. Serialisation is timed apart (``transport_seconds``).
"""

from __future__ import annotations

import signal
import statistics
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchmarks.harness.metering import MeteredRun
from benchmarks.protocol_overhead.cells import N_DISTINCT_INPUTS, Cell, make_protocol
from protocols.base import (
    AggregateResult,
    AggregationClient,
    AggregationParties,
    AggregationProtocol,
    AggregationServer,
    Role,
    output_of,
    roles_of,
    run_phases,
    setup_parties,
)
from securefgl.federation import Call, ProtocolHost


class CellTimeoutError(Exception):
    """Raised by the alarm when a cell runs past its hard limit."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise CellTimeoutError


def make_inputs(cell: Cell, seed: int) -> tuple[dict[str, tuple[np.ndarray, float]], list]:
    rng = np.random.default_rng(seed)
    base = [rng.uniform(-1.0, 1.0, cell.dim) for _ in range(N_DISTINCT_INPUTS)]
    inputs = {
        cid: (base[i % N_DISTINCT_INPUTS], 1.0 + (i % 3)) for i, cid in enumerate(cell.client_ids())
    }
    return inputs, base


def expected_mean(
    inputs: dict[str, tuple[np.ndarray, float]], participants: Sequence[str]
) -> np.ndarray:
    ids = {id(vec): vec for vec, _ in inputs.values()}
    weights: dict[int, float] = defaultdict(float)
    for cid in participants:
        vec, w = inputs[cid]
        weights[id(vec)] += w
    total = sum(weights.values())
    out = np.zeros_like(next(iter(ids.values())))
    for key, w in weights.items():
        out += ids[key] * (w / total)
    return out


def _mean(values: Sequence[float]) -> float | None:
    return float(statistics.fmean(values)) if values else None


def one_round(
    protocol: AggregationProtocol,
    parties: AggregationParties,
    run: MeteredRun,
    inputs: Mapping[str, tuple[np.ndarray, float]],
    dropped: Mapping[str, str],
) -> AggregateResult:
    """``protocols.base.aggregate`` with every party call made by ``run``'s executor (the
    clients' and the server's ``begin_round`` too, so their seconds are all the work a
    party does in the round) and every envelope sent over ``run``'s channel."""
    executor = run.executor
    executor.call(
        [
            Call.to(cid, AggregationClient.begin_round, 0, np.asarray(vector, np.float64), weight)
            for cid, (vector, weight) in inputs.items()
        ]
    )
    server = parties.server.party_id
    executor.call([Call.to(server, AggregationServer.begin_round, 0, list(inputs))])
    roles = roles_of(parties)
    roles[Role.CLIENT] = list(inputs)
    run_phases(protocol.round_phases, roles, executor.phases(protocol), run.transmit, dropped)
    return output_of(protocol, parties, [c for c in inputs if c not in dropped])


def run_cell(cell: Cell, hard_limit: float, seed: int) -> dict[str, Any]:
    """Run one round of ``cell``; returns the measured fields (or raises CellTimeoutError)."""
    protocol = make_protocol(cell.protocol, cell.threat_model)
    ids = cell.client_ids()
    parties = protocol.create_parties("server", ids, cell.dim)
    hosts = {pid: ProtocolHost(pid, party) for pid, party in parties.by_id().items()}
    server = parties.server.party_id
    role = {server: Role.SERVER} | {c: Role.CLIENT for c in parties.clients}
    role |= {pid: Role.AUTHORITY for pid in parties.others}
    inputs, _base = make_inputs(cell, seed)
    dropped = cell.dropped()
    out: dict[str, Any] = {}
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, hard_limit)
    try:
        wall0 = time.perf_counter()
        if protocol.setup_phases:
            setup = MeteredRun(hosts)
            setup_parties(protocol, parties, setup.transmit, setup.executor.phases(protocol))
            out["setup_seconds"] = time.perf_counter() - wall0
            sent, _ = setup.bytes()
            out["setup_client_bytes_up"] = _mean([sent.get(c, 0) for c in ids])
            cpu = setup.seconds()
            out["setup_authority_seconds"] = sum(cpu.get(p, 0.0) for p in parties.others)
            del setup
        run = MeteredRun(hosts)
        start = time.perf_counter()
        result = one_round(protocol, parties, run, inputs, dropped)
        out["wall_seconds"] = time.perf_counter() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    cpu, wall = run.seconds(), run.seconds(wall=True)
    sent, received = run.bytes()
    methods: defaultdict[str, float] = defaultdict(float)
    for (pid, _, method), seconds in run.executor.seconds_by_call.items():
        methods[f"{role[pid]}.{method}"] += seconds
    survivors = [c for c in ids if c not in dropped]
    client_s = [cpu.get(c, 0.0) for c in survivors]
    expected_participants = ids if cell.dropped_in_sum else survivors
    err = float(np.max(np.abs(result.mean - expected_mean(inputs, result.participants))))
    out.update(
        {
            "client_seconds": _mean(client_s),
            "client_seconds_max": max(client_s),
            "client_seconds_all": _mean([cpu.get(c, 0.0) for c in ids]),
            "client_wall_seconds": _mean([wall.get(c, 0.0) for c in survivors]),
            "server_seconds": cpu.get(server, 0.0),
            "server_wall_seconds": wall.get(server, 0.0),
            "authority_seconds": sum(cpu.get(p, 0.0) for p in parties.others),
            "transport_seconds": run.transport_seconds,
            "client_bytes_up": _mean([sent.get(c, 0) for c in survivors]),
            "client_bytes_up_max": max(sent.get(c, 0) for c in survivors),
            "client_bytes_down": _mean([received.get(c, 0) for c in survivors]),
            "server_bytes_down": sent.get(server, 0),
            "server_bytes_in": received.get(server, 0),
            "messages": len(run.entries),
            "method_seconds": {k: round(v, 6) for k, v in sorted(methods.items())},
            "participants": len(result.participants),
            "result_ok": sorted(result.participants) == sorted(expected_participants)
            and err < 1e-5,
            "max_abs_error": err,
        }
    )
    del protocol, parties, hosts, run, inputs, _base, result
    return out


TIMING_KEYS = (
    "client_seconds",
    "client_seconds_max",
    "client_seconds_all",
    "client_wall_seconds",
    "server_seconds",
    "server_wall_seconds",
    "authority_seconds",
    "transport_seconds",
    "wall_seconds",
    "setup_seconds",
    "setup_authority_seconds",
)


def combine_repeats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Best (minimum) of each timing over the rounds, like the best-of-N primitive limits;
    the medians are kept as ``*_median``; other fields come from the fastest-client round."""
    out = dict(min(runs, key=lambda r: r["client_seconds"]))
    for key in TIMING_KEYS:
        if key in out:
            out[key] = float(min(r[key] for r in runs))
            out[f"{key}_median"] = float(statistics.median(r[key] for r in runs))
    out["repeats"] = len(runs)
    if len(runs) > 1:
        for key in ("client_seconds", "server_seconds", "wall_seconds"):
            out[f"{key}_repeats"] = [r[key] for r in runs]
    out["result_ok"] = all(r["result_ok"] for r in runs)
    out["max_abs_error"] = max(r["max_abs_error"] for r in runs)
    return out
