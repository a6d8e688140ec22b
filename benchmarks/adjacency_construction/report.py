"""The Ā benchmark's report: pivot tables per (dataset, K), findings, all cells, the plot.
Its prose is in ``benchmarks/notes/adjacency.md``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks.adjacency_construction.cells import VARIANTS, receiver_masks_only, variant
from benchmarks.harness.notes import section
from benchmarks.harness.results import pyplot, save_figure, write_text

NOTES = "adjacency"


def _fmt_s(x: float | None) -> str:
    return "—" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.1f}")


def _fmt_b(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x / 1e6:.1f} MB" if x < 1e9 else f"{x / 1e9:.2f} GB"


#: the main table's columns: the paper's scheme and the protected variants on the
#: recommended configuration (union support, receiver pruning)
MAIN_VARIANTS = (
    "plain (pruned)", "masked-union (pruned)", "masked-union-t1 (pruned)",
    "masked-union-rx (pruned)", "masked-union-z32 (pruned)", "ckks-union (pruned)",
)  # fmt: skip


def _par(r: dict) -> str:
    """The parallel ratio; † when measured before the channel's serialisation was
    attributed to the parties (then counted whole)."""
    return f"{r['parallel_ratio']}{'' if r.get('channel_overlap') else '†'}"


def _short(r: dict | None) -> str:
    if r is None:
        return "—"
    if r["skipped"]:
        return "skipped"
    par = f" / ∥×{_par(r)}" if r.get("parallel_ratio") is not None else ""
    return f"{_fmt_s(_cpu(r))} s, ×{r['ratio']}{par}"


def main_table(rows: list[dict], dataset: str, k: int) -> list[str]:
    """Per L_s: central CPU seconds (pruned) and each of :data:`MAIN_VARIANTS`' CPU seconds
    and ratio to central (sequential / parallel critical path)."""
    cells = [r for r in rows if r["dataset"] == dataset and r["clients"] == k]
    names = [x for x in MAIN_VARIANTS if any(variant(r) == x for r in cells)]
    out = ["| L_s | central s (pruned) | " + " | ".join(names) + " |",
           "|---" * (len(names) + 2) + "|"]  # fmt: skip
    for hops in sorted({r["hops"] for r in cells}):
        at = {variant(r): r for r in cells if r["hops"] == hops}
        c1 = next((_cpu(r, "central_") for r in at.values() if r["pruned"]), None)
        out.append(f"| {hops} | {_fmt_s(c1)} | " + " | ".join(_short(at.get(x)) for x in names)
                   + " |")  # fmt: skip
    return out


def _at(rows: list[dict], k: int, hops: int, name: str) -> dict | None:
    found = (r for r in rows if r["dataset"] == "cora" and r["clients"] == k
             and r["hops"] == hops and variant(r) == name and not r["skipped"])  # fmt: skip
    return next(found, None)


#: the scale target of the parallel critical path (K = 20, L_s = 10, union, receiver pruning)
SCALE_TARGET = (20, 10, 10.0)


def _at_scale(rows: list[dict], dataset: str) -> str:
    """Every masked (union, pruned) variant's parallel ratio at :data:`SCALE_TARGET`."""
    k, hops, _ = SCALE_TARGET
    cells = [r for r in rows if r["dataset"] == dataset and r["clients"] == k
             and r["hops"] == hops and r["mode"] == "masked" and r["pruned"]
             and r["support"] == "union" and not r["skipped"]
             and r.get("parallel_ratio") is not None]  # fmt: skip
    out = ", ".join(f"{variant(r).removesuffix(' (pruned)')} ∥×{_par(r)}" for r in cells)
    return out or "not run"


def conclusion(rows: list[dict], headline_k: int) -> str:
    """The conclusion's bullets with their numbers from ``rows`` (Cora)."""
    ran = [r for r in rows if not r["skipped"] and r["dataset"] == "cora" and r["hops"] > 1]
    masked = [r for r in ran if r["mode"] == "masked" and not receiver_masks_only(r)
              and not r.get("collusion_threshold") and not r.get("ring_bits")]  # fmt: skip
    if not masked:
        return ""
    seq = [r for r in masked if r["ratio"] is not None and r["ratio"] <= 20]
    par = [r for r in masked if (r.get("parallel_ratio") or math.inf) <= 20]
    top = max((r["hops"] for r in ran if r["clients"] == headline_k), default=0)
    rec = _at(rows, headline_k, top, "masked-union (pruned)")
    plain = _at(rows, headline_k, top, "plain (pruned)")
    cheap = [(x, r) for x in MAIN_VARIANTS[2:5] if (r := _at(rows, headline_k, top, x))]
    ckks = [r["ratio"] for r in ran if variant(r) == "ckks-union (pruned)"
            and r["clients"] == headline_k]  # fmt: skip
    floor = _at(rows, SCALE_TARGET[0], SCALE_TARGET[1], "plain (pruned)")  # unprotected
    errors: dict[str, float] = {}
    for r in rows:
        if not r["skipped"] and r.get("max_abs_err") is not None and r["mode"] != "plain":
            m = r["mode"] + (f" in Z_2^{r['ring_bits']}" if r.get("ring_bits") else "")
            errors[m] = max(errors.get(m, 0.0), r["max_abs_err"])
    return section(
        NOTES, "conclusion", seq=len(seq), par=len(par), masked=len(masked),
        seq_where=", ".join(f"K={r['clients']} L_s={r['hops']} {variant(r)} ×{r['ratio']}"
                            for r in seq) or "none",
        k=headline_k, hops=top,
        rec_seq=rec["ratio"] if rec else "—", rec_par=rec.get("parallel_ratio") if rec else "—",
        cheap=", ".join(f"{x.removesuffix(' (pruned)')} ×{r['ratio']}" for x, r in cheap) or "—",
        plain=plain["ratio"] if plain else "—",
        ckks=f"×{min(ckks)}–{max(ckks)}" if ckks else "—",
        errors=", ".join(f"{m} {e:.1e}" for m, e in sorted(errors.items())) or "—",
        scale_k=SCALE_TARGET[0], scale_hops=SCALE_TARGET[1], scale_max=SCALE_TARGET[2],
        scale_cora=_at_scale(rows, "cora"), scale_photo=_at_scale(rows, "photo"),
        scale_plain=_par(floor) if floor and floor.get("parallel_ratio") else "—",
    )  # fmt: skip


def write_markdown(rows: list[dict], path: Path, meta: dict, headline_k: int) -> None:
    lines = [
        "# Federated Ā construction: plain vs masked vs CKKS hop sums vs central",
        "",
        section(NOTES, "lead"),
        "",
        f"## Cora, K = {headline_k}: federated Ā beside central",
        "",
        *main_table(rows, "cora", headline_k),
        "",
        section(NOTES, "main_caption"),
        "",
        "## Conclusion",
        "",
        conclusion(rows, headline_k),
        "",
        "![Cora: federated Ā cost vs central](adjacency.png)",
        "",
        "## Settings",
        "",
        meta["header"],
        "",
        section(NOTES, "intro"),
        "",
        "## Findings",
        "",
        *meta["findings"],
        "",
    ]
    grids = [
        (name, k)
        for name in sorted({r["dataset"] for r in rows}, key=lambda x: (x != "cora", x))
        for k in sorted(
            {r["clients"] for r in rows if r["dataset"] == name},
            key=lambda x: (x != headline_k, x),
        )
    ]
    for name, k in grids:
        lines += [f"## {name}, K = {k}: every variant (CPU seconds, bytes, ×ratio)", ""]
        lines += [*pivot(rows, name, k), ""]
    lines += ["## All cells that ran (with the cost model's estimates)", ""]
    lines += [
        "| dataset | K | L_s | variant | CPU s (est: wall) | bytes (est) | peak RSS GiB (est "
        "extra) | central CPU s | ratio | max err |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["skipped"]:
            continue
        err = r.get("max_abs_err")
        lines.append(
            f"| {r['dataset']} | {r['clients']} | {r['hops']} | {variant(r)} | "
            f"{_fmt_s(_cpu(r))} ({_fmt_s(r['est_seconds'])}) | {_fmt_b(r['bytes'])} "
            f"({_fmt_b(r['est_bytes'])}) | {r.get('peak_rss_gib')} ({r['est_peak_gib']}) | "
            f"{_fmt_s(_cpu(r, 'central_'))} | {r['ratio']} | "
            f"{'—' if err is None else f'{err:.1e}'} |"
        )
    lines += ["", "## Skipped cells", ""]
    lines += ["| dataset | K | L_s | variant | reason |", "|---|---|---|---|---|"]
    for r in rows:
        if r["skipped"]:
            lines.append(
                f"| {r['dataset']} | {r['clients']} | {r['hops']} | {variant(r)} | {r['skipped']} |"
            )
    write_text(path, "\n".join(lines) + "\n")


def _cpu(r: dict, prefix: str = "") -> float | None:
    """CPU seconds of a row (``prefix="central_"``: of its central reference); rows written
    before CPU time was recorded fall back to wall seconds."""
    cpu = r.get(f"{prefix}cpu_seconds")
    return cpu if cpu is not None else r.get(f"{prefix}seconds")


def _cell(r: dict | None) -> str:
    if r is None:
        return "—"
    if r["skipped"]:
        return "skipped"
    par = f" (∥×{_par(r)})" if r.get("parallel_ratio") is not None else ""
    cpu = _fmt_s(_cpu(r))
    return f"{cpu} s, {_fmt_b(r['bytes'])}, ×{r['ratio']}{par}"


def pivot(rows: list[dict], dataset: str, k: int) -> list[str]:
    """One line per L_s, one column per variant (seconds, bytes, ratio)."""
    cells = [r for r in rows if r["dataset"] == dataset and r["clients"] == k]
    names = [variant({"mode": m, "support": s, "pruned": p}) for m, s, p in VARIANTS]
    names += sorted({variant(r) for r in cells} - set(names))  # collusion-threshold variants
    names = [x for x in names if any(variant(r) == x for r in cells)]
    out = [
        "| L_s | central s (unpruned / pruned) | " + " | ".join(names) + " |",
        "|---" * (len(names) + 2) + "|",
    ]
    for hops in sorted({r["hops"] for r in cells}):
        at = {variant(r): r for r in cells if r["hops"] == hops}
        c0 = next((_cpu(r, "central_") for r in at.values() if not r["pruned"]), None)
        c1 = next((_cpu(r, "central_") for r in at.values() if r["pruned"]), None)
        out.append(
            f"| {hops} | {_fmt_s(c0)} / {_fmt_s(c1)} | "
            + " | ".join(_cell(at.get(x)) for x in names)
            + " |"
        )
    return out


def central_note(rows: list[dict]) -> str:
    """``"x s at L_s = h (unpruned) / y s (pruned), ..."`` for Cora's central timings."""
    parts = []
    for hops in sorted({r["hops"] for r in rows if r["dataset"] == "cora" and r["hops"] > 1}):
        at = [r for r in rows if r["dataset"] == "cora" and r["hops"] == hops]
        c0 = next((_cpu(r, "central_") for r in at if not r["pruned"]), None)
        c1 = next((_cpu(r, "central_") for r in at if r["pruned"]), None)
        parts.append(f"{_fmt_s(c0)} s / {_fmt_s(c1)} s at L_s = {hops}")
    return "(unpruned / pruned) " + ", ".join(parts)


def _ratios(rows: list[dict]) -> str:
    """``K=… L_s=… variant (cpu s, ×sequential / ∥×parallel)`` for each row."""
    return ", ".join(
        f"K={r['clients']} L_s={r['hops']} {variant(r)} "
        f"({_fmt_s(_cpu(r))} s, ×{r['ratio']} / ∥×{_par(r)})"
        for r in rows
    )


def findings(rows: list[dict], headline_k: int) -> list[str]:
    out = []
    ran = [r for r in rows if not r["skipped"]]
    exchanged = [r for r in ran if r["hops"] > 1]
    cora_masked = [r for r in exchanged if r["dataset"] == "cora" and r["mode"] == "masked"]
    receiver_only = [r for r in cora_masked if receiver_masks_only(r)]
    cora_masked = [r for r in cora_masked if not receiver_masks_only(r)]
    masked = [r for r in cora_masked if not r.get("collusion_threshold") and not r.get("ring_bits")]
    sparse_masks = [
        r for r in cora_masked if r.get("collusion_threshold") and not r.get("ring_bits")
    ]
    ring32 = [r for r in cora_masked if r.get("ring_bits") == 32]
    out.append(section(NOTES, "no_exchange"))
    if masked:
        seq = [r for r in masked if r["ratio"] is not None and r["ratio"] <= 20]
        par = [r for r in masked if (r.get("parallel_ratio") or math.inf) <= 20]
        best = min(masked, key=lambda r: r["ratio"] or math.inf)
        pruned_union = [r for r in masked if r["pruned"] and r["support"] == "union"]
        out.append(
            section(
                NOTES,
                "masked_target",
                seq=len(seq),
                masked=len(masked),
                seq_cells=(": " + _ratios(seq)) if seq else "",
                par=len(par),
                best=variant(best),
                best_k=best["clients"],
                best_hops=best["hops"],
                best_ratio=best["ratio"],
                recommended=_ratios(pruned_union) or "not run",
                central=central_note(rows),
            )
        )
    for cells, what in ((sparse_masks, "threshold_masks"), (receiver_only, "receiver_masks")):
        if cells:
            seq = [r for r in cells if r["ratio"] is not None and r["ratio"] <= 20]
            out.append(
                section(
                    NOTES,
                    "cheaper_masks",
                    what=section(NOTES, what),
                    ratios=_ratios(cells),
                    seq=len(seq),
                    cells=len(cells),
                )
            )
    if ring32:
        seq = [r for r in ring32 if r["ratio"] is not None and r["ratio"] <= 20]
        errs = [r["max_abs_err"] for r in ring32 if r.get("max_abs_err") is not None]
        out.append(
            section(
                NOTES,
                "ring32",
                ratios=_ratios(
                    [r for r in ring32 if r["pruned"] and not r.get("collusion_threshold")]
                ),
                seq=len(seq),
                cells=len(ring32),
                error=max(errs) if errs else float("nan"),
            )
        )
    for name in sorted({r["dataset"] for r in exchanged} - {"cora"}):
        cells = [r for r in exchanged if r["dataset"] == name]
        parts = []
        for var in (
            "plain (pruned)",
            "masked-union (pruned)",
            "masked-union-t1 (pruned)",
            "masked-union-z32 (pruned)",
            "masked-union-rx (pruned)",
            "ckks-union (pruned)",
        ):
            sel = [r for r in cells if variant(r) == var]
            if sel:
                top = max(sel, key=lambda r: (r["hops"], r["clients"]))
                parts.append(
                    f"{var} up to K={top['clients']}, L_s={top['hops']}: "
                    f"{_fmt_s(_cpu(top))} s, {_fmt_b(top['bytes'])}, ×{top['ratio']}"
                )
        out.append(
            section(
                NOTES,
                "other_dataset",
                name=name,
                parts="; ".join(parts) or "no exchanged cell ran",
                rows=len([r for r in cells if r["support"] == "rows"]),
            )
        )
    by_mode: dict[str, float] = {}
    for r in ran:
        if r.get("max_abs_err") is not None:
            m = r["mode"] + (f"-z{r['ring_bits']}" if r.get("ring_bits") else "")
            by_mode[m] = max(by_mode.get(m, 0.0), r["max_abs_err"])
    if by_mode:
        errors = ", ".join(f"{m} {e:.1e}" for m, e in sorted(by_mode.items()))
        out.append(section(NOTES, "max_error", errors=errors))
    skipped = [r for r in rows if r["skipped"]]
    kinds: dict[str, int] = {}
    for r in skipped:
        why = r["skipped"]
        key = next(
            (k for k in ("memory", "aborted", "trimmed", "total budget") if k in why), "time"
        )
        kinds[key] = kinds.get(key, 0) + 1
    out.append(
        section(
            NOTES,
            "skipped",
            skipped=len(skipped),
            cells=len(rows),
            kinds=", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())),
        )
    )
    single = sum(r.get("single_sender_receivers") or 0 for r in ran)
    out.append(section(NOTES, "single_sender", single=single))
    out.append(section(NOTES, "masked_time"))
    return out


def plot(rows: list[dict], path: Path, headline_k: int) -> None:
    """Ratio (left) and absolute seconds (right) vs L_s on Cora at ``headline_k`` clients."""
    plt = pyplot()
    cora = [r for r in rows if r["dataset"] == "cora" and r["clients"] == headline_k]
    colour = {"plain": "black", "masked": "tab:blue", "ckks": "tab:red"}
    style = {None: "-", "union": "-", "rows": "--"}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8))
    for mode, support, pruned in VARIANTS:
        sel = [
            r
            for r in cora
            if (r["mode"], r["support"], r["pruned"]) == (mode, support, pruned)
            and r["ratio"]
            and not r.get("collusion_threshold")
            and not r.get("ring_bits")
            and not receiver_masks_only(r)
        ]
        if not sel:
            continue
        sel.sort(key=lambda r: r["hops"])
        kw = {
            "color": colour[mode],
            "ls": style[support],
            "marker": "s" if pruned else "o",
            "mfc": "white" if pruned else colour[mode],
            "label": variant(sel[0]),
        }
        ax.plot([r["hops"] for r in sel], [r["ratio"] for r in sel], **kw)
        bx.plot([r["hops"] for r in sel], [_cpu(r) for r in sel], **kw)
    for pruned, ls in ((False, ":"), (True, "-.")):
        pts = sorted(
            {(r["hops"], _cpu(r, "central_")) for r in cora if r["pruned"] == pruned}
            - {(h, None) for h in range(100)}
        )
        if pts:
            bx.plot(*zip(*pts, strict=True), color="green", ls=ls, lw=2,
                    label=f"central{' (pruned)' if pruned else ''}")  # fmt: skip
    ax.axhline(20, color="grey", ls=(0, (1, 3)), lw=1.5, label="20× central (target)")
    for a, ylabel in ((ax, "federated / central CPU seconds (same pruning)"),
                      (bx, "CPU seconds")):  # fmt: skip
        a.set_yscale("log")
        a.set_xlabel("L_s (hops)")
        a.set_ylabel(ylabel)
        a.set_xticks(sorted({r["hops"] for r in cora}))
        a.grid(alpha=0.3, which="both")
    ax.set_title(f"Cora, K = {headline_k}: federated Ā cost relative to central")
    bx.set_title(f"Cora, K = {headline_k}: CPU seconds (one run, shared 2-core machine)")
    handles: dict[str, Any] = {}
    for a in (ax, bx):
        for h, lab in zip(*a.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    fig.legend(handles.values(), handles.keys(), loc="upper center", ncol=5, fontsize=8,
               bbox_to_anchor=(0.5, 0.0), title="solid: union support, dashed: rows "
               "support; open squares: receiver-pruned")  # fmt: skip
    save_figure(fig, path, dpi=120)
