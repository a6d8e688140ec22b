"""The malicious-server variants beside the honest-but-curious ones: cost ratios and target.

Malicious-server mode (``--threat-model malicious``; docs/protocols.md) adds Ed25519
signatures and checks: SecAgg / SecAgg+ sign their round keys and the survivor statement
and verify their neighbours' keys and a quorum of statement signatures (Bonawitz et al.
2017, Sec. 6); CKKS adds check slots, one signed digest per update and verifies every
participant's signature. Target: client seconds at n = 100, d = 10^5 at most
:data:`MALICIOUS_TARGET` times the honest-but-curious client seconds of the same cell.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocols.identity import HONEST_BUT_CURIOUS, MALICIOUS

MALICIOUS_TARGET = 1.5
TARGET_CELL = (100, 10**5)  # (n, d)


def threat_of(row: dict[str, Any]) -> str:
    """Rows written before the field existed are honest-but-curious."""
    return str(row.get("threat_model", HONEST_BUT_CURIOUS))


def stamp(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row with its ``threat_model`` (old rows: honest-but-curious)."""
    return [{**r, "threat_model": threat_of(r)} for r in rows]


def ed25519_seconds(repeats: int = 300) -> dict[str, float]:
    """Best-of-3 seconds of one Ed25519 signature and one verification (200-byte message)."""
    key, msg = Ed25519PrivateKey.generate(), b"x" * 200
    public, sig = key.public_key(), key.sign(msg)
    best = {"ed25519_sign_s": float("inf"), "ed25519_verify_s": float("inf")}
    for _ in range(3):
        t0 = time.process_time()
        for _ in range(repeats):
            key.sign(msg)
        t1 = time.process_time()
        for _ in range(repeats):
            public.verify(sig, msg)
        t2 = time.process_time()
        best["ed25519_sign_s"] = min(best["ed25519_sign_s"], (t1 - t0) / repeats)
        best["ed25519_verify_s"] = min(best["ed25519_verify_s"], (t2 - t1) / repeats)
    return best


def paired(
    protocols: Sequence[str], repeats: int, client_seconds: Callable[[str, str], float]
) -> dict[str, dict[str, Any]]:
    """The target cell measured in pairs: ``repeats`` times an honest-but-curious round then
    a malicious one, back to back (``client_seconds(protocol, threat_model)``), so that both
    modes see the same machine state; the grid's rows of the two modes run minutes apart.
    Ratio of the medians (and of the minima, beside it)."""
    out = {}
    for proto in protocols:
        times: dict[str, list[float]] = {HONEST_BUT_CURIOUS: [], MALICIOUS: []}
        for _ in range(repeats):
            for tm in times:
                times[tm].append(client_seconds(proto, tm))
        hbc, mal = times[HONEST_BUT_CURIOUS], times[MALICIOUS]
        out[proto] = {
            "clients": TARGET_CELL[0], "dim": TARGET_CELL[1], "repeats": repeats,
            "hbc_client_seconds": hbc, "malicious_client_seconds": mal,
            "ratio_median": statistics.median(mal) / statistics.median(hbc),
            "ratio_min": min(mal) / min(hbc),
        }  # fmt: skip
    return out


def _key(r: dict[str, Any]) -> tuple:
    return (r["protocol"], r["clients"], r["dim"], r["dropout"])


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Malicious / honest-but-curious per cell measured in both modes."""
    hbc = {_key(r): r for r in rows if threat_of(r) == HONEST_BUT_CURIOUS and not r["skipped"]}
    out = []
    for r in rows:
        base = hbc.get(_key(r))
        if threat_of(r) != MALICIOUS or r["skipped"] or base is None:
            continue
        names = ("protocol", "clients", "dim", "dropout")
        item: dict[str, Any] = dict(zip(names, _key(r), strict=True))
        for what in ("client_seconds", "server_seconds", "client_bytes_up", "wall_seconds"):
            a, b = r.get(what), base.get(what)
            item[what.replace("seconds", "ratio").replace("bytes_up", "bytes_ratio")] = (
                a / b if a is not None and b else None
            )
        item["result_ok"] = bool(r.get("result_ok"))
        item["target_cell"] = (r["clients"], r["dim"]) == TARGET_CELL and r["dropout"] == 0.0
        out.append(item)
    return out


def summary(rows: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> list[str]:
    """One line per protocol at the target cell (or that it is not measured yet); the
    verdict uses the paired measurement where there is one."""
    lines = []
    pairs = (meta or {}).get("paired") or {}
    for item in ratios(rows):
        if not item["target_cell"]:
            continue
        pair = pairs.get(item["protocol"])
        ratio = pair["ratio_median"] if pair else item["client_ratio"]
        met = ratio is not None and ratio <= MALICIOUS_TARGET
        how = (
            f"{ratio:.2f}x the honest-but-curious one in {pair['repeats']} back-to-back pairs "
            f"(ratio of medians; of minima {pair['ratio_min']:.2f}x; the grid rows, measured "
            f"apart, give {item['client_ratio']:.2f}x)"
            if pair
            else f"{item['client_ratio']:.2f}x the honest-but-curious one"
        )
        if pair and (meta or {}).get("paired_from_earlier_run"):
            how += " (pairs of an earlier timing run, kept by --merge; this run measured bytes)"
        lines.append(
            f"- **{item['protocol']} malicious** at n = 100, d = 1e5: client time {how} "
            f"(target <= {MALICIOUS_TARGET:g}x: {'met' if met else 'NOT met'}), server "
            f"{item['server_ratio']:.2f}x, bytes up {item['client_bytes_ratio']:.2f}x."
        )
    if not any(threat_of(r) == MALICIOUS and not r["skipped"] for r in rows):
        lines.append(
            "- **malicious variants**: not measured yet (timing run pending: "
            "`python -m benchmarks.protocol_overhead` on an idle machine)."
        )
    return lines


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """The section comparing the two threat models cell by cell."""
    items = ratios(rows)
    sig = meta.get("ed25519") or {}
    lines = [
        "## Malicious-server mode vs honest-but-curious",
        "",
        f"Target: client seconds at n = 100, d = 1e5 (no dropout) at most "
        f"{MALICIOUS_TARGET:g} x the honest-but-curious client seconds of the same cell. "
        "The table's ratios are of each cell's best-of-N timings (the two modes' rows run "
        "minutes apart); the verdict below uses back-to-back pairs at the target cell.",
    ]
    if sig:
        lines[-1] += (
            f" Ed25519 on this machine: sign {sig['ed25519_sign_s'] * 1e6:.0f} us, verify "
            f"{sig['ed25519_verify_s'] * 1e6:.0f} us."
        )
    lines.append("")
    if not items:
        return [*lines, *summary(rows, meta), ""]
    lines += [
        "| protocol | n | d | drop | client x | server x | wall x | bytes up x | ok |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for it in items:
        cells = [
            "-" if it[k] is None else f"{it[k]:.2f}"
            for k in ("client_ratio", "server_ratio", "wall_ratio", "client_bytes_ratio")
        ]
        mark = " (target)" if it["target_cell"] else ""
        lines.append(
            f"| {it['protocol']}{mark} | {it['clients']} | {it['dim']:.0e} | "
            f"{it['dropout']:.0%} | "
            + " | ".join(cells)
            + f" | {'yes' if it['result_ok'] else '**no**'} |"
        )
    return [*lines, "", *summary(rows, meta), ""]
