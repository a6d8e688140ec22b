"""The protocol-overhead report: Markdown tables, summary lines and the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.notes import section
from benchmarks.harness.results import pyplot, save_figure, write_text
from benchmarks.protocol_overhead import threat
from benchmarks.protocol_overhead.cells import (
    CKKS_BYTES_TARGET,
    PROTOCOLS,
    SECAGG_BYTES_TARGET,
    sort_key,
)
from protocols.identity import HONEST_BUT_CURIOUS, THREAT_MODELS


def _command(meta: dict[str, Any]) -> str:
    """The last run's command line, from its recorded arguments."""
    a, flags = meta.get("args", {}), []
    for key in ("protocols", "threat_models", "clients", "dims"):
        if a.get(key):
            flags.append(f"--{key.replace('_', '-')} " + " ".join(map(str, a[key])))
    flags += [f"--{k.replace('_', '-')}" for k in ("quick", "bytes_only", "merge") if a.get(k)]
    return " ".join(["python -m benchmarks.protocol_overhead", *flags])

def _groups(rows: list[dict[str, Any]]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(protocol, threat model, its rows) in table order, non-empty only."""
    out = []
    for proto in PROTOCOLS:
        for tm in THREAT_MODELS:
            prows = [r for r in rows if r["protocol"] == proto and threat.threat_of(r) == tm]
            if prows:
                out.append((proto, tm, sorted(prows, key=sort_key)))
    return out


def _label(proto: str, tm: str) -> str:
    return proto if tm == HONEST_BUT_CURIOUS else f"{proto}, {tm} server"


def fmt_s(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 1:
        return f"{x:.2f}"
    if x >= 1e-3:
        return f"{x * 1e3:.2f} ms"
    return f"{x * 1e6:.0f} us"


def fmt_b(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= size:
            return f"{x / size:.2f} {unit}"
    return f"{x:.0f} B"


def fmt_r(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def fmt_e(x: float | None) -> str:
    return "-" if x is None else f"{x:.1e}"


def _form(r: dict[str, Any]) -> str:
    """What travels: the ring of a masked row, the packing of a ckks row."""
    if r.get("ring_bits"):
        return f"Z_2^{r['ring_bits']} words"
    p = r.get("ckks_params")
    if p:
        packing = "2 reals / slot" if p["packing"] == "complex" else "1 real / slot"
        seeded = ", seeded" if p["seeded"] else ""
        bits = "+".join(str(b) for b in p["coeff_mod_bit_sizes"])
        return f"N={p['poly_modulus_degree']}, q={bits} bits, {packing}{seeded}"
    return "-"


def bytes_section(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 49's bytes targets: every secure row at d >= 1e5 without dropouts, its bytes
    ratio beside the target and the aggregate's max abs error against plaintext."""
    judged = sorted(
        (r for r in rows if r.get("bytes_target") and not r["skipped"] and r["dropout"] == 0),
        key=sort_key,
    )
    if not judged:
        return []
    out = [
        "## Bytes near float32",
        "",
        "Secure rows at d >= 1e5 without dropouts: bytes up per client / 4 d (float32) beside "
        "the target (secagg, secagg+: 1.15; ckks: 4, stretch 2.5), bytes down per client / "
        "4 d, and the max abs error of the decrypted / unmasked weighted mean against the "
        "float64 plaintext mean. Inputs in [-1, 1], weights 1-3 (a declared value bound of 3 "
        "chooses the secagg ring).",
        "",
        "| protocol | threat model | n | d | what travels | bytes up ratio | target | met "
        "| bytes down ratio | max abs err |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in judged:
        met = r.get("bytes_target_met")
        down = r.get("client_bytes_down")
        out.append(
            f"| {r['protocol']} | {threat.threat_of(r)} | {r['clients']} | {r['dim']:.0e} | "
            f"{_form(r)} | {fmt_r(r['bytes_ratio'])} | {r['bytes_target']:g} | "
            f"{'-' if met is None else ('yes' if met else '**no**')} | "
            f"{fmt_r(None if down is None else down / r['plain_bytes'])} | "
            f"{fmt_e(r.get('max_abs_error'))} |"
        )
    return [*out, ""]


def bytes_conclusion(rows: list[dict[str, Any]]) -> list[str]:
    """A few lines: each secure protocol's bytes-up ratio range at d >= 1e5 (no dropouts)
    against its target, and its largest aggregate error."""
    out = []
    for proto, tm, prows in _groups(rows):
        sized = [
            r for r in prows
            if r.get("bytes_target") and not r["skipped"] and r["dropout"] == 0
        ]  # fmt: skip
        if not sized:
            continue
        ok = sum(bool(r.get("bytes_target_met")) for r in sized)
        err = max(r.get("max_abs_error") or 0.0 for r in sized)
        forms = sorted({_form(r) for r in sized})
        out.append(
            f"- {_label(proto, tm)}: bytes up {_range(sized, 'bytes_ratio')} x float32 at "
            f"d >= 1e5 (target {sized[0]['bytes_target']:g}: met in {ok}/{len(sized)} cells; "
            f"{'; '.join(forms)}), max abs error of the aggregate {err:.1e}."
        )
    return out

#: the cell the main table shows (n clients, d, dropout)
MAIN_CELL = (100, 100_000, 0.0)


def main_table(rows: list[dict[str, Any]]) -> list[str]:
    """Each protocol and threat model at :data:`MAIN_CELL`, and how many of its measured
    cells meet its target."""
    n, d, drop = MAIN_CELL
    lines = [
        "| protocol | client s | server s | limit s | ratio to limit | bytes up | bytes ratio "
        "| target | met here | met in all cells |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for proto, tm, prows in _groups(rows):
        r = next((x for x in prows if (x["clients"], x["dim"], x["dropout"]) == (n, d, drop)
                  and not x["skipped"]), None)  # fmt: skip
        judged = [x for x in prows if not x["skipped"] and x["target_met"] is not None]
        every = f"{sum(bool(x['target_met']) for x in judged)} of {len(judged)}" if judged else "-"
        if r is None:
            lines.append(f"| {_label(proto, tm)} | not run | | | | | | | | {every} |")
            continue
        met = r["target_met"]
        target = f"`{r['target']}`" if r["target"] else "-"
        lines.append(
            f"| {_label(proto, tm)} | {fmt_s(r['client_seconds'])} | "
            f"{fmt_s(r['server_seconds'])} | {fmt_s(r['limit_seconds'])} | "
            f"{fmt_r(r['ratio_to_limit'])} | {fmt_b(r['client_bytes_up'])} | "
            f"{fmt_r(r['bytes_ratio'])} | {target} "
            f"| {'-' if met is None else ('yes' if met else '**no**')} | {every} |"
        )
    return lines


def write_markdown(rows: list[dict[str, Any]], meta: dict[str, Any], path: Path) -> None:
    prims = meta["primitives"]
    n, d, _ = MAIN_CELL
    lines = [
        "# Protocol overhead: time and bytes per party, one aggregation round",
        "",
        section("protocol_overhead", "lead"),
        "",
        f"## n = {n} clients, d = {d:.0e}, no dropout",
        "",
        *main_table(rows),
        "",
        *(["Seconds in this table come from a bytes-only run on a busy machine: not "
           "comparable, not results (bytes and errors are deterministic).", ""]
          if any(r.get("timings_comparable") is False for r in rows) else []),  # fmt: skip
        "![client time and upload per protocol](protocol_overhead.png)",
        "",
        *bytes_section(rows),
        "## Conclusion",
        "",
        *bytes_conclusion(rows),
        *summary_lines(rows, meta, skips=False),
        "",
        section("protocol_overhead", "conclusion"),
        "",
        "## Settings",
        "",
        f"Generated by `{_command(meta)}` ({meta['mode']}"
        + ("; with --merge, the rows of other protocols and threat models come from earlier "
           "runs" if meta.get("args", {}).get("merge") else "") + ") on "
        f"{meta['machine']['cpu_count']} CPUs ({meta['machine']['processor']}), load average "
        f"at start {meta['machine']['loadavg_at_start']}, at end {meta.get('loadavg_at_end')} "
        "(the machine is shared: timings are noisy).",
        "",
        "Primitive limits measured in the same run (better of start and end): ChaCha20 PRG "
        f"{prims['prg_uint64_per_s'] / 1e6:.0f} M uint64/s (d = 10^6), X25519 + HKDF agreement "
        f"{prims['x25519_agree_s'] * 1e6:.1f} us, TenSEAL CKKS encryption "
        + (
            f"{prims['ckks_floats_per_s'] / 1e6:.2f} M floats/s (d = 10^5)."
            if prims.get("ckks_floats_per_s")
            else "not measured."
        ),
        "",
        section("protocol_overhead", "columns"),
        "",
    ]
    if not meta.get("timings_comparable", True) or any(
        r.get("timings_comparable") is False for r in rows
    ):
        lines += [
            "**Timings not comparable**: rows with `timings_comparable: false` in the JSON "
            "come from a bytes-and-errors run (`--bytes-only`) on a busy machine; their "
            "seconds, ratios to the limits and time targets are not results (bytes and errors "
            "are deterministic).",
            "",
        ]
    for proto, tm, prows in _groups(rows):
        target = prows[0]["target"]
        lines += [f"## Every cell: {_label(proto, tm)}", ""]
        if target:
            lines += [f"Target: `{target}`.", ""]
        lines += [
            "| n | d | drop | client s | server s | limit s | ratio | bytes up | bytes ratio "
            "| max abs err | target met | note |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in prows:
            if r["skipped"]:
                e = r.get("estimate", {})
                cells = [
                    f"est. {fmt_s(e.get('client_seconds'))}",
                    f"est. {fmt_s(e.get('server_seconds'))}",
                    fmt_s(r["limit_seconds"]),
                    f"est. {fmt_r(e.get('ratio_to_limit'))}",
                    f"est. {fmt_b(e.get('client_bytes_up'))}",
                    f"est. {fmt_r(e.get('bytes_ratio'))}",
                    "-",
                    "-",
                    f"skipped: {r['skipped']}",
                ]
            else:
                met = r["target_met"]
                note = "" if r.get("result_ok") else "WRONG RESULT"
                if r.get("timings_comparable") is False:
                    note = (note + " " if note else "") + "times not comparable"
                cells = [
                    fmt_s(r["client_seconds"]),
                    fmt_s(r["server_seconds"]),
                    fmt_s(r["limit_seconds"]),
                    fmt_r(r["ratio_to_limit"]),
                    fmt_b(r["client_bytes_up"]),
                    fmt_r(r["bytes_ratio"]),
                    fmt_e(r.get("max_abs_error")),
                    "-" if met is None else ("yes" if met else "**no**"),
                    note,
                ]
            lines.append(
                f"| {r['clients']} | {r['dim']:.0e} | {r['dropout']:.0%} | "
                + " | ".join(cells)
                + " |"
            )
        lines.append("")
    lines += [*threat.markdown(rows, meta), "## Cells not run", ""]
    lines += [
        f"- {_label(r['protocol'], threat.threat_of(r))}: n={r['clients']} "
        f"d={r['dim']:.0e} drop={r['dropout']:.0%} ({r['skipped']})"
        for _, _, prows in _groups(rows)
        for r in prows
        if r["skipped"]
    ] or ["None."]
    lines.append("")
    write_text(path, "\n".join(lines))


def _range(rows: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in rows if r.get(key) is not None]
    return f"{min(values):.2f}-{max(values):.2f}" if values else "-"


def summary_lines(rows: list[dict[str, Any]], meta: dict[str, Any] | None = None,
                  skips: bool = True) -> list[str]:  # fmt: skip
    """One line per protocol and threat model (cells measured and skipped, the target met,
    where missed; with ``skips`` why cells were skipped), then the threat-model verdicts."""
    out = []
    for proto, tm, prows in _groups(rows):
        run = [r for r in prows if not r["skipped"]]
        skipped = [r for r in prows if r["skipped"]]
        text = f"- **{_label(proto, tm)}**: {len(run)} cells measured, {len(skipped)} skipped"
        judged = [r for r in run if r["target_met"] is not None]
        if judged:
            missed = [r for r in judged if not r["target_met"]]
            text += f"; target `{prows[0]['target']}` met in {len(judged) - len(missed)}"
            text += f"/{len(judged)}"
            if proto in ("secagg", "secagg+"):
                text += f" (CPU-time ratio to limit {_range(judged, 'ratio_to_limit')}; with "
                text += f"wall-clock times {_range(judged, 'ratio_to_limit_wall')})"
            else:
                text += f" (bytes ratio {_range(judged, 'bytes_ratio')}; client time / "
                text += f"encrypt-only limit {_range(judged, 'ratio_to_limit')}, "
                who = "the round's relay" if tm == HONEST_BUT_CURIOUS else "the client"
                text += f"{who} also decrypts the aggregate)"
            if missed:
                text += "; missed at " + ", ".join(
                    f"n={r['clients']} d={r['dim']:.0e} drop={r['dropout']:.0%} "
                    f"({r['ratio_to_limit' if proto != 'ckks' else 'bytes_ratio']:.2f})"
                    for r in missed
                )
        elif run and all(r.get("timings_comparable") is False for r in run):
            text += " (time target not judged: timings of a --bytes-only run)"
        elif run and run[0]["limit_seconds"]:
            text += f" (no target; ratio to limit {_range(run, 'ratio_to_limit')}: the client "
            text += "only computes w x into a fresh array, so this mostly measures allocation)"
        if skipped and skips:
            text += ". Skipped: " + "; ".join(
                f"n={r['clients']} d={r['dim']:.0e} drop={r['dropout']:.0%} ({r['skipped']})"
                for r in skipped
            )
        sized = [r for r in run if r.get("bytes_target_met") is not None and r["dropout"] == 0]
        if sized:
            ok = sum(r["bytes_target_met"] for r in sized)
            text += (f"; bytes <= {sized[0]['bytes_target']:g} x float32 at d >= 1e5 in "
                     f"{ok}/{len(sized)} (bytes ratio {_range(sized, 'bytes_ratio')}, max abs "
                     f"error {max(r.get('max_abs_error') or 0 for r in sized):.1e})")  # fmt: skip
        bad = [r for r in run if not r.get("result_ok")]
        if bad:
            text += f". WARNING: {len(bad)} cells returned a wrong aggregate"
        out.append(text + ".")
    return out + threat.summary(rows, meta)


def write_plot(rows: list[dict[str, Any]], path: Path, n_plot: int = 100) -> bool:
    plt = pyplot()
    sel = [r for r in rows if r["clients"] == n_plot and r["dropout"] == 0.0]
    mal = [r for r in sel if threat.threat_of(r) != HONEST_BUT_CURIOUS]
    sel = [r for r in sel if threat.threat_of(r) == HONEST_BUT_CURIOUS]
    if not sel:
        return False
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = {"plain": "tab:gray", "secagg": "tab:red", "secagg+": "tab:blue", "ckks": "tab:green"}
    for proto in PROTOCOLS:
        prows = sorted((r for r in sel if r["protocol"] == proto), key=sort_key)
        if not prows:
            continue
        meas = [r for r in prows if r["client_seconds"] is not None]
        est = [r for r in prows if r["client_seconds"] is None and r.get("estimate")]
        col = colors[proto]
        if meas:
            ax_t.plot(
                [r["dim"] for r in meas],
                [r["client_seconds"] for r in meas],
                "o-",
                color=col,
                label=f"{proto} client (measured)",
            )
            ax_b.plot(
                [r["dim"] for r in meas],
                [r["bytes_ratio"] for r in meas],
                "o-",
                color=col,
                label=proto,
            )
        if est:
            ax_t.plot(
                [r["dim"] for r in est],
                [r["estimate"]["client_seconds"] for r in est],
                "x",
                color=col,
                label=f"{proto} (estimated, not run)",
            )
        mrows = sorted((r for r in mal if r["protocol"] == proto and r["client_seconds"]),
                       key=sort_key)  # fmt: skip
        if mrows:
            ax_t.plot(
                [r["dim"] for r in mrows],
                [r["client_seconds"] for r in mrows],
                "^:",
                color=col,
                label=f"{proto} client, malicious server (measured)",
            )
        lim = [r for r in prows if r["limit_seconds"]]
        if lim:
            ax_t.plot(
                [r["dim"] for r in lim],
                [r["limit_seconds"] for r in lim],
                "--",
                color=col,
                alpha=0.6,
                label=f"{proto} primitive limit",
            )
    ax_t.set(
        xscale="log",
        yscale="log",
        xlabel="d (vector length)",
        ylabel="CPU seconds per client",
        title=f"Client time per round, n = {n_plot}, no dropout"
        + ("\n(busy machine: times not comparable)"
           if any(r.get("timings_comparable") is False for r in sel) else ""),  # fmt: skip
    )
    ax_t.grid(True, which="both", alpha=0.3)
    ax_t.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    ax_b.axhline(CKKS_BYTES_TARGET, color="tab:green", ls=":",
                 label=f"ckks target ({CKKS_BYTES_TARGET:g}x, d >= 1e5)")
    ax_b.axhline(SECAGG_BYTES_TARGET, color="tab:red", ls=":",
                 label=f"secagg target ({SECAGG_BYTES_TARGET:g}x, d >= 1e5)")  # fmt: skip
    ax_b.axhline(1.0, color="black", ls=":", alpha=0.5, label="float32 payload")
    ax_b.set(
        xscale="log",
        yscale="log",
        xlabel="d (vector length)",
        ylabel="client upload / float32 update (4 d bytes)",
        title=f"Upload per client vs float32, n = {n_plot}",
    )
    ratios = [1.0, 1.15, 1.5, 2.0, 3.0, 4.0]  # plain multiples of float32, not 10^x labels
    ax_b.set_yticks(ratios, [f"{r:g}×" for r in ratios])
    ax_b.set_yticks([], minor=True)
    ax_b.grid(True, which="both", alpha=0.3)
    ax_b.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    save_figure(fig, path, dpi=120)
    return True
