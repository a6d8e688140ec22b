"""The active-server audit: every attack against every protocol it targets, both threat models.

Rows (``Outcome.row``) carry ``adversary = "active server"``, ``attack``, ``protocol``,
``threat_model`` and ``success`` (the server recovered an input, or the clients accepted a
result it corrupted). Sizes are small (the attacks are about messages, not data), so the
whole audit takes seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from attacks.active_server import ckks, cohort, secagg, secure_sums
from attacks.active_server.driver import ADVERSARY, Outcome
from protocols.identity import THREAT_MODELS


def _secagg(attack: str, proto: str, n: int) -> Callable[[str, int], Outcome]:
    return lambda tm, s: secagg.run_attack(attack, tm, proto, n, seed=s)


#: (attack, protocol, how it is run): n = 10 for SecAgg (t = 6), 20 for SecAgg+ (k = 10,
#: t = 6 of 11 holders), 10 for the pair cohort (5 pairs); CKKS with 4 clients; masked
#: secure sums with 5.
CASES: list[tuple[str, str, Callable[[str, int], Outcome]]] = [
    *(
        (attack, proto, _secagg(attack, proto, n))
        for attack in ("inconsistent_dropout", "share_replay", "message_substitution")
        for proto, n in (("secagg", 10), ("secagg+", 20))
    ),
    *(
        (cohort.ATTACK, proto, lambda tm, s, p=proto: cohort.run_pair_cohort(tm, p, 10, seed=s))
        for proto in ("secagg", "secagg+")
    ),
    ("share_replay", "ckks", lambda tm, s: ckks.run_forgery(tm, "stale", seed=s)),
    ("message_substitution", "masked (secure sum)",
     lambda tm, s: secure_sums.run_substitution(tm, seed=s)),
    ("forged_aggregate", "ckks", lambda tm, s: ckks.run_forgery(tm, "offset", seed=s)),
    ("forged_aggregate", "ckks (subset)", lambda tm, s: ckks.run_forgery(tm, "subset", seed=s)),
]  # fmt: skip


def active_server_rows(seed: int = 0) -> list[dict[str, Any]]:
    """One row per (attack, protocol, threat model)."""
    rows = []
    for attack, proto, run in CASES:
        for tm in THREAT_MODELS:
            start = time.perf_counter()
            row = run(tm, seed).row()
            row.update(attack=attack, protocol=proto, seed=seed)
            row["seconds"] = round(time.perf_counter() - start, 3)
            rows.append(row)
    return rows


def merge_rows(existing: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``existing`` without its active-server rows, then ``new``."""
    return [r for r in existing if r.get("adversary") != ADVERSARY] + list(new)


def markdown(rows: list[dict[str, Any]]) -> str:
    """A table: one line per (attack, protocol), success under each threat model."""
    active = [r for r in rows if r.get("adversary") == ADVERSARY]
    if not active:
        return ""
    cells: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in active:
        cells.setdefault((r["attack"], r["protocol"]), {})[r["threat_model"]] = r
    lines = [
        "| attack | protocol | honest-but-curious | malicious | refused by (malicious) |",
        "|---|---|---|---|---|",
    ]

    def cell(r: dict[str, Any] | None) -> str:
        if r is None:
            return "–"
        return f"**{r['outcome']}**" if r["success"] else r["outcome"]

    for (attack, proto), by in cells.items():
        mal = by.get("malicious") or {}
        first = (mal.get("refused_by") or [{}])[0]
        why = f"{first.get('party', '')} at {first.get('phase', '')}" if first else ""
        lines.append(
            f"| {attack} | {proto} | {cell(by.get('honest-but-curious'))} | "
            f"{cell(by.get('malicious'))} | {why} |"
        )
    return "\n".join(lines) + "\n"
