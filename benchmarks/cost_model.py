"""A cost model of one secure-aggregation round, fitted to the measured points of
``benchmarks/results/protocol_overhead.json`` and projected to 1,000 clients per round on a
cluster of N workers.

Per protocol and threat model, with n clients, d entries and p = the peers each client
shares pairwise masks with (n − 1 for SecAgg, SecAgg+'s 2⌈log2 n⌉ neighbourhood, 0 for
plain and CKKS):

- bytes up per client      = b0 + b1·d + b2·p
- bytes down per client    = c0 + c1·d + c2·p + c3·n     (the round's list of survivors)
- client CPU per round     = a0 + a1·d + a2·p·d + a3·p + a4·m  (a PRG expansion per pairwise
  mask; m = n under the malicious threat model, whose clients check the signed list of the
  round's participants, else 0)
- server CPU per round     = s0 + s1·n·d + s2·n·p + s3·n (sum, unmasking, share checks)

Coefficients are non-negative least squares on relative residuals. Two fits: on the points
with n ≤ ``--fit-max-n`` only, whose error on the points above it (n = 500) checks how the
model extrapolates in n; and on every point, whose residuals are reported and which makes
the projection. The projection of a round on N workers (one core each, clients spread
evenly, the server on a worker of its own) adds the network: every upload crosses the
server's link (bandwidth ``--link-gbit``); a router that relays payloads (an executor whose driver
forwards every envelope) also carries every payload over its own
link, in and out, so it is a second ceiling (the "driver relay" column). Not modelled:
dropouts (the unmasking of a dropped client's pairwise masks), stragglers, Ray's per-task
overhead, the model training itself, and the honest-but-curious CKKS relay's extra hop (one
client decrypts the sum and seals the mean before the server forwards it: its bytes are in
the per-client means, its time is not on the projected path).

Run: ``python -m benchmarks.cost_model`` → ``benchmarks/results/cost_model.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls

from protocols.secagg.rounds import default_degree

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PROTOCOLS = ("plain", "secagg", "secagg+", "ckks")

#: quantity -> (row field, regressors of (n, d, p, m)); m = n under the malicious threat
#: model (every client checks the signed list of the round's n participants), else 0
QUANTITIES = {
    "bytes_up": ("bytes_up", lambda n, d, p, m: [1.0, d, p]),
    "bytes_down": ("client_bytes_down", lambda n, d, p, m: [1.0, d, p, n]),
    "client_seconds": ("client_seconds", lambda n, d, p, m: [1.0, d, p * d, p, m]),
    "server_seconds": ("server_seconds", lambda n, d, p, m: [1.0, n * d, n * p, n]),
}


def peers(protocol: str, n: int) -> int:
    """The peers a client shares pairwise masks with (the protocols' defaults)."""
    if protocol == "secagg":
        return n - 1
    if protocol == "secagg+":
        return min(n - 1, default_degree(n))
    return 0


def measured_points(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Median of the repeated rows per (protocol, threat model, n, d), measured rows only."""
    groups: dict[tuple[str, str, int, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("protocol") in PROTOCOLS and r.get("bytes_up") and not r.get("estimated"):
            groups[(r["protocol"], r["threat_model"], int(r["n"]), int(r["d"]))].append(r)
    out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for (proto, threat, n, d), rs in sorted(groups.items()):
        point: dict[str, Any] = {"n": n, "d": d, "p": peers(proto, n),
                                 "m": n if threat == "malicious" else 0, "repeats": len(rs)}
        for name, (field, _) in QUANTITIES.items():
            vals = [float(r[field]) for r in rs if r.get(field) is not None]
            point[name] = float(np.median(vals)) if vals else None
        out[(proto, threat)].append(point)
    return out


def fit(points: list[dict[str, Any]], quantity: str) -> list[float] | None:
    """Non-negative least squares on relative residuals (each point weighted by 1/value),
    so the small and the large points count alike."""
    build = QUANTITIES[quantity][1]
    use = [pt for pt in points if pt[quantity] is not None and pt[quantity] > 0]
    if len(use) < 2:
        return None
    x = np.array([build(pt["n"], pt["d"], pt["p"], pt["m"]) for pt in use], dtype=float)
    y = np.array([pt[quantity] for pt in use], dtype=float)
    scale = x.max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls((x / scale) / y[:, None], np.ones_like(y))
    return [float(c) for c in coef / scale]


def predict(coef: list[float], quantity: str, n: int, d: int, p: int, m: int) -> float:
    return float(np.dot(coef, QUANTITIES[quantity][1](n, d, p, m)))


def round_projection(model: dict[str, list[float]], protocol: str, malicious: bool, n: int,
                     d: int, workers: int, link_bytes_s: float) -> dict[str, float]:  # fmt: skip
    """One round of n clients on ``workers`` workers (one core each) plus a server worker."""
    p, m = peers(protocol, n), n if malicious else 0
    up = predict(model["bytes_up"], "bytes_up", n, d, p, m)
    down = predict(model["bytes_down"], "bytes_down", n, d, p, m) if "bytes_down" in model else 0.0
    client = predict(model["client_seconds"], "client_seconds", n, d, p, m)
    server = predict(model["server_seconds"], "server_seconds", n, d, p, m)
    clients_phase = math.ceil(n / workers) * client
    server_link = n * (up + down) / link_bytes_s
    direct = clients_phase + server + server_link
    relayed = direct + n * (up + down) / link_bytes_s  # the driver's link: in and out
    return {"bytes_up_per_client": up, "bytes_down_per_client": down,
            "server_bytes_in": n * up, "client_cpu_s": client, "server_cpu_s": server,
            "round_s_direct": direct, "round_s_driver_relay": relayed,
            "server_share": server / direct}  # fmt: skip


def build(rows: list[dict[str, Any]], fit_max_n: int, n_project: int, dims: list[int],
          workers: list[int], link_gbit: float) -> dict[str, Any]:  # fmt: skip
    link = link_gbit * 1e9 / 8
    out: dict[str, Any] = {"fit_max_n": fit_max_n, "link_gbit": link_gbit, "models": [],
                           "checks": [], "projection": []}  # fmt: skip
    for (proto, threat), points in sorted(measured_points(rows).items()):
        train = [pt for pt in points if pt["n"] <= fit_max_n]
        small = {q: c for q in QUANTITIES if (c := fit(train, q)) is not None}
        full = {q: c for q in QUANTITIES if (c := fit(points, q)) is not None}
        if not {"bytes_up", "client_seconds", "server_seconds"} <= set(full):
            continue
        out["models"].append({"protocol": proto, "threat_model": threat, "coefficients": full,
                              "points": len(points)})  # fmt: skip
        for held_out, model in ((True, small), (False, full)):
            for pt in points if not held_out else [p for p in points if p["n"] > fit_max_n]:
                for q, coef in model.items():
                    if pt[q] is None:
                        continue
                    pred = predict(coef, q, pt["n"], pt["d"], pt["p"], pt["m"])
                    out["checks"].append({
                        "protocol": proto, "threat_model": threat, "n": pt["n"], "d": pt["d"],
                        "quantity": q, "measured": pt[q], "predicted": pred,
                        "relative_error": (pred - pt[q]) / pt[q], "held_out": held_out,
                    })  # fmt: skip
        for d in dims:
            for w in workers:
                proj = round_projection(full, proto, threat == "malicious", n_project, d, w,
                                        link)  # fmt: skip
                out["projection"].append({"protocol": proto, "threat_model": threat,
                                          "n": n_project, "d": d, "workers": w,
                                          **proj})  # fmt: skip
    return out


def _si(x: float, unit: str) -> str:
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.2f} {prefix}{unit}"
    return f"{x:.0f} {unit}"


def markdown(model: dict[str, Any]) -> str:
    held = [c for c in model["checks"] if c["held_out"]]
    fitted = [c for c in model["checks"] if not c["held_out"]]
    configs = {(c["protocol"], c["threat_model"], c["d"]) for c in held}

    def worst(cs: list[dict[str, Any]], q: str) -> str:
        errs = [abs(c["relative_error"]) for c in cs if c["quantity"] == q]
        return f"{100 * max(errs):.0f} %" if errs else "–"

    lines = [
        "# Cost model: one secure-aggregation round at 1,000 clients", "",
        "Fitted to every measured point of `protocol_overhead.json`; a second fit on the "
        f"points with n ≤ {model['fit_max_n']} only is checked on the n = 500 points (how "
        "the model extrapolates in n). Projected to "
        f"n = {model['projection'][0]['n'] if model['projection'] else '–'} on N workers with a "
        f"{model['link_gbit']:g} Gbit/s link. Model and assumptions: "
        "`benchmarks/cost_model.py` and docs/protocols.md (\"Cost model\").", "",
        "## Conclusion", "",
        f"- Worst relative error of the fit on every point: bytes up {worst(fitted, 'bytes_up')}, "
        f"client CPU {worst(fitted, 'client_seconds')}, server CPU "
        f"{worst(fitted, 'server_seconds')}.",
        f"- Worst relative error on the n = 500 points of the fit on n ≤ {model['fit_max_n']}: "
        "bytes up "
        f"{worst(held, 'bytes_up')}, client CPU {worst(held, 'client_seconds')}, server CPU "
        f"{worst(held, 'server_seconds')} ({len(configs)} held-out configurations). Timings "
        "come from a shared 2-core machine: CPU seconds of one party, not wall time; bytes "
        "are exact.",
    ]  # fmt: skip
    big = [r for r in model["projection"] if r["d"] == max(x["d"] for x in model["projection"])]
    for r in big:
        if r["workers"] == max(x["workers"] for x in big):
            lines.append(
                f"- {r['protocol']} ({r['threat_model']}), d = {r['d']:.0e}, {r['workers']} "
                f"workers: {_si(r['bytes_up_per_client'], 'B')} up per client, server in "
                f"{_si(r['server_bytes_in'], 'B')}, round {r['round_s_direct']:.1f} s direct / "
                f"{r['round_s_driver_relay']:.1f} s relayed through a driver; the server's "
                f"CPU is {100 * r['server_share']:.0f} % of the direct round.")  # fmt: skip
    lines += ["", f"## Extrapolation check: fitted on n ≤ {model['fit_max_n']}, n = 500", "",
              "| protocol | threat model | d | quantity | measured | predicted | error |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for c in held:
        lines.append(f"| {c['protocol']} | {c['threat_model']} | {c['d']:.0e} | "
                     f"{c['quantity']} | {c['measured']:.4g} | {c['predicted']:.4g} | "
                     f"{100 * c['relative_error']:+.0f} % |")  # fmt: skip
    lines += ["", "## Projection", "",
              "| protocol | threat model | d | workers | up / client | server in | client CPU "
              "| server CPU | round, direct | round, driver relay |",
              "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in model["projection"]:
        lines.append(f"| {r['protocol']} | {r['threat_model']} | {r['d']:.0e} | {r['workers']} "
                     f"| {_si(r['bytes_up_per_client'], 'B')} | "
                     f"{_si(r['server_bytes_in'], 'B')} | {r['client_cpu_s']:.3f} s | "
                     f"{r['server_cpu_s']:.2f} s | {r['round_s_direct']:.2f} s | "
                     f"{r['round_s_driver_relay']:.2f} s |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, default=RESULTS / "protocol_overhead.json")
    ap.add_argument("--fit-max-n", type=int, default=100)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--dims", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--link-gbit", type=float, default=10.0)
    ap.add_argument("--out", type=Path, default=RESULTS / "cost_model")
    args = ap.parse_args(argv)
    if not args.input.exists():
        raise SystemExit(f"no measurements at {args.input}: run benchmarks.protocol_overhead")
    rows = json.loads(args.input.read_text())
    model = build(rows, args.fit_max_n, args.clients, args.dims, args.workers, args.link_gbit)
    if not model["models"]:
        raise SystemExit(f"{args.input} has too few measured points to fit a model")
    args.out.with_suffix(".json").write_text(json.dumps(model, indent=1))
    args.out.with_suffix(".md").write_text(markdown(model))
    print(f"wrote {args.out.with_suffix('.json')} and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
