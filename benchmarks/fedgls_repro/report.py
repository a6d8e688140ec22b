"""The FedGLS reproduction's outputs: ``fedgls.json`` (the summary rows our checks read),
``fedgls_diagnostics.json``, ``fedgls.md`` (Tables 1-3 beside the paper, the protocol
check, the diagnostics, prose from ``benchmarks/notes/fedgls.md``) and ``fedgls.png``
(accuracy vs the graphless ratio)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.notes import section
from harness.results import pyplot, read_json, save_figure, write_json, write_text

from fedgls_repro.drift import drift_table
from fedgls_repro.grid import (
    DATASETS,
    EPOCHS,
    KEY_FIELDS,
    LABELS,
    METHODS,
    NOT_RUN,
    PAPER,
    RATIOS,
    TABLE23_METHODS,
)

NOTES = "fedgls"
SUMMARY_FIELDS = (*KEY_FIELDS, "mean", "std", "seeds", "paper_mean")
LAST_FIELDS = ("mean_last", "std_last", "seeds_last")


def best_val_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with the best-validation-round accuracy as ``mean`` / ``std`` / ``seeds`` and
    each run's ``acc`` (runs saved before it was recorded are left out); the last round's
    statistics are kept as ``mean_last`` / ``std_last`` / ``seeds_last``."""
    out = []
    for r in rows:
        runs = [{**x, "acc": x["acc_best_val"]} for x in r["runs"] if "acc_best_val" in x]
        out.append({
            **r,
            "mean": r.get("mean_best_val"), "std": r.get("std_best_val"), "seeds": len(runs),
            "runs": runs, "mean_last": r["mean"], "std_last": r["std"], "seeds_last": r["seeds"],
        })  # fmt: skip
    return out


def _find(rows: list[dict[str, Any]], **key: Any) -> dict[str, Any] | None:
    want = {"protocol": "plain", "variant": "default", **key}
    for r in rows:
        if all(r.get(k, "default" if k == "variant" else None) == v for k, v in want.items()):
            return r
    return None


def _cell(row: dict[str, Any] | None) -> str:
    if row is None or row["mean"] is None:
        return "–"
    return f"{row['mean']:.2f} ± {row['std']:.2f}" + (
        "" if row["seeds"] >= 5 else f" ({row['seeds']})"
    )


def _diff(row: dict[str, Any], base: dict[str, Any] | None) -> str:
    if base is None or row["mean"] is None or base["mean"] is None:
        return "–"
    return f"{row['mean'] - base['mean']:+.2f}"


def _paper(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value[0]:.2f} ± {value[1]:.2f}" if isinstance(value, list) else f"{value:.2f}"


def table1(rows: list[dict[str, Any]]) -> list[str]:
    head = "| dataset | " + " | ".join(LABELS[m] for m in METHODS) + " |"
    lines = [head, "|---|" + "---|" * len(METHODS)]
    for ds in (*DATASETS, *NOT_RUN):
        paper = PAPER["table1"]["values"][ds]
        if ds in NOT_RUN:
            lines.append(f"| {ds} (ours) | " + " | ".join("not run" for _ in METHODS) + " |")
        else:
            k = PAPER["setup"]["clients"][ds]
            ours = [
                _find(rows, dataset=ds, clients=k, graphless_fraction=0.5, local_epochs=5, method=m)
                for m in METHODS
            ]
            lines.append(f"| {ds} (ours) | " + " | ".join(_cell(r) for r in ours) + " |")
        lines.append(f"| {ds} (paper) | " + " | ".join(_paper(paper[m]) for m in METHODS) + " |")
    return lines


def table2(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| dataset | E | "
        + " | ".join(f"{LABELS[m]} ours | paper" for m in TABLE23_METHODS)
        + " |",
        "|---|---|" + "---|---|" * len(TABLE23_METHODS),
    ]
    for ds, values in PAPER["table2"]["values"].items():
        k = PAPER["setup"]["clients"][ds]
        for i, e in enumerate(EPOCHS):
            cells = []
            for m in TABLE23_METHODS:
                r = _find(
                    rows, dataset=ds, clients=k, graphless_fraction=0.5, local_epochs=e, method=m
                )
                cells.append(f"{_cell(r)} | {values[m][i]:.2f}")
            lines.append(f"| {ds} | {e} | " + " | ".join(cells) + " |")
    return lines


def table3(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| dataset | C1:C2 | "
        + " | ".join(f"{LABELS[m]} ours | paper" for m in TABLE23_METHODS)
        + " |",
        "|---|---|" + "---|---|" * len(TABLE23_METHODS),
    ]
    values = PAPER["table3"]["values"]["PubMed"]
    for i, (frac, ratio) in enumerate(RATIOS.items()):
        cells = []
        for m in TABLE23_METHODS:
            r = _find(
                rows,
                dataset="PubMed",
                clients=16,
                graphless_fraction=frac,
                local_epochs=5,
                method=m,
            )
            cells.append(f"{_cell(r)} | {values[m][i]:.2f}")
        lines.append(f"| PubMed | {ratio} | " + " | ".join(cells) + " |")
    lines.append(
        "| Flickr | 12:8, 10:10, 8:12 | "
        + " | ".join(
            "not run | " + ", ".join(f"{v:.2f}" for v in PAPER["table3"]["values"]["Flickr"][m])
            for m in TABLE23_METHODS
        )
        + " |"
    )
    return lines


def protocol_check(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| dataset | method | protocol | accuracy | − plain | per-seed |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("variant", "default") != "default" or r["protocol"] == "plain":
            continue
        plain = _find(
            rows,
            dataset=r["dataset"],
            clients=r["clients"],
            graphless_fraction=r["graphless_fraction"],
            local_epochs=r["local_epochs"],
            method=r["method"],
        )
        diff = _diff(r, plain)
        seeds = ""
        if plain is not None:
            base = {x["seed"]: x["acc"] for x in plain["runs"]}
            seeds = ", ".join(
                f"{x['acc'] - base[x['seed']]:+.2f}" for x in r["runs"] if x["seed"] in base
            )
        lines.append(
            f"| {r['dataset']} | {LABELS[r['method']]} | {r['protocol']} | {_cell(r)} "
            f"| {diff} | {seeds} |"
        )
    return lines


def diagnostics_table(rows: list[dict[str, Any]]) -> list[str]:
    """Each variant beside Table 1's default cell: best-validation round (``rows``' mean)
    and last round (``mean_last``)."""
    variants = [r for r in rows if r.get("variant", "default") != "default"]
    if not variants:
        return ["(none run yet)"]
    lines = [
        "| dataset | variant | method | best-val round | − default | last round | − default |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(variants, key=lambda r: (r["dataset"], r["variant"], r["method"])):
        base = _find(
            rows,
            dataset=r["dataset"],
            clients=r["clients"],
            graphless_fraction=0.5,
            local_epochs=5,
            method=r["method"],
        )
        last = {"mean": r["mean_last"], "std": r["std_last"], "seeds": r["seeds_last"]}
        base_last = base and {"mean": base["mean_last"]}
        lines.append(
            f"| {r['dataset']} | {r['variant']} | {LABELS[r['method']]} | {_cell(r)} "
            f"| {_diff(r, base)} | {_cell(last)} | {_diff(last, base_last)} |"
        )
    return lines


def write_plot(rows: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    fracs = list(RATIOS)
    for i, m in enumerate(TABLE23_METHODS):
        ours = [
            _find(
                rows, dataset="PubMed", clients=16, graphless_fraction=f, local_epochs=5, method=m
            )
            for f in fracs
        ]
        xs = [f for f, r in zip(fracs, ours, strict=True) if r and r["mean"] is not None]
        ys = [r["mean"] for r in ours if r and r["mean"] is not None]
        es = [r["std"] for r in ours if r and r["mean"] is not None]
        if xs:
            ax.errorbar(
                xs, ys, yerr=es, marker="o", color=f"C{i}", capsize=3, label=f"{LABELS[m]} (ours)"
            )
        ax.plot(
            fracs,
            PAPER["table3"]["values"]["PubMed"][m],
            ls="--",
            marker="x",
            color=f"C{i}",
            label=f"{LABELS[m]} (paper)",
        )
    ax.set_xticks(fracs, [f"{RATIOS[f]}\n({f:.0%} graphless)" for f in fracs])
    ax.set_xlabel("graph : graphless clients (PubMed, 16 clients)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("FedGLS Table 3: accuracy vs graphless ratio")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def write_outputs(runs: list[dict[str, Any]], folder: Path) -> None:
    rows = best_val_rows(runs)
    fields = (*SUMMARY_FIELDS, *LAST_FIELDS)
    default = [r for r in rows if r.get("variant", "default") == "default"]
    summary = [{k: r[k] for k in fields} for r in default]
    write_json(folder / "fedgls.json", summary, indent=1, newline=True)
    diag = [
        {**{k: r[k] for k in fields}, "variant": r["variant"]}
        for r in rows
        if r.get("variant", "default") != "default"
    ]
    write_json(folder / "fedgls_diagnostics.json", diag, indent=1, newline=True)
    parts = [
        "# FedGLS reproduction (Fu et al., TMLR)",
        "",
        section(NOTES, "intro"),
        "",
        "## Table 1: accuracy, half of the clients graphless, E = 5",
        "",
        *table1(rows),
        "",
        section(NOTES, "table1"),
        "",
        "### Table 1 with the last round's model instead",
        "",
        *table1(runs),
        "",
        section(NOTES, "table1_last"),
        "",
        "## Secure aggregation vs plaintext (FedGLS)",
        "",
        *protocol_check(rows),
        "",
        section(NOTES, "protocols"),
        "",
        "## Table 2: local epochs E",
        "",
        *table2(rows),
        "",
        section(NOTES, "table2"),
        "",
        "## Table 3: graph : graphless clients",
        "",
        *table3(rows),
        "",
        "![accuracy vs graphless ratio](fedgls.png)",
        "",
        section(NOTES, "table3"),
        "",
        "## Diagnostics: settings the paper leaves open",
        "",
        *diagnostics_table(rows),
        "",
        section(NOTES, "diagnostics"),
        "",
        "### How far the learner moves the graphless clients' graphs",
        "",
        *drift_table(read_json(folder / "fedgls_graph_drift.json", [])),
        "",
        section(NOTES, "drift"),
        "",
        "## Not run",
        "",
        *(f"- {ds}: {why}" for ds, why in NOT_RUN.items()),
        "",
    ]
    write_text(folder / "fedgls.md", "\n".join(parts))
    write_plot(rows, folder / "fedgls.png")
