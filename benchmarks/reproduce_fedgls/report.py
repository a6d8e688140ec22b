"""The FedGLS reproduction's outputs: ``fedgls.json`` (the summary rows our checks read),
``fedgls_diagnostics.json``, ``fedgls_selected.json`` (the open settings chosen on
validation), ``fedgls.md`` (Tables 1-3 beside the paper, the protocol
check, the diagnostics, prose from ``benchmarks/notes/fedgls.md``) and ``fedgls.png``
(accuracy vs the graphless ratio)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.notes import section
from benchmarks.harness.results import pyplot, read_json, save_figure, write_json, write_text
from benchmarks.reproduce_fedgls.drift import drift_table
from benchmarks.reproduce_fedgls.grid import (
    DATASETS,
    EPOCHS,
    KEY_FIELDS,
    KNN_METHODS,
    LABELS,
    METHODS,
    NOT_RUN,
    PAPER,
    RATIOS,
    SELECTION,
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
    for ds in DATASETS:  # the datasets not run are in the main table
        paper = PAPER["table1"]["values"][ds]
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


def _val_mean(row: dict[str, Any] | None) -> float | None:
    """Mean best validation accuracy over the row's 5 seeds, or None (fewer recorded)."""
    vals = [x["val_acc_best"] for x in (row or {}).get("runs", []) if "val_acc_best" in x]
    return round(sum(vals) / len(vals), 2) if len(vals) >= 5 else None


def select_on_validation(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per dataset and method, the candidate setting of :data:`SELECTION` with the highest
    mean validation accuracy (ties: the earlier candidate, the preset first); test accuracy
    plays no part. Datasets or methods with a candidate short of 5 seeds are left out."""
    chosen = []
    for ds in DATASETS:
        key = {"dataset": ds, "clients": PAPER["setup"]["clients"][ds], "local_epochs": 5}
        for m in METHODS:
            names = [v for v in SELECTION if m in KNN_METHODS or not v.startswith("k")]
            cands = [_find(rows, **key, graphless_fraction=0.5, method=m, variant=v)
                     for v in names]  # fmt: skip
            vals = [_val_mean(r) for r in cands]
            if any(v is None for v in vals):
                continue
            best = max(range(len(names)), key=lambda i: (vals[i], -i))
            row = cands[best]
            assert row is not None
            chosen.append({
                **{k: row.get(k) for k in (*SUMMARY_FIELDS, *LAST_FIELDS)},
                "setting": names[best], "val_mean": vals[best],
                "candidates": {n: {"val_mean": v, "mean": r["mean"], "std": r["std"]}
                               for n, v, r in zip(names, vals, cands, strict=True) if r},
                "paper_mean": PAPER["table1"]["values"][ds][m][0],
            })  # fmt: skip
    return chosen


def with_chosen_settings(
    summary: list[dict[str, Any]], chosen: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``fedgls.json``'s rows with each Table 1 cell that has a validation choice replaced
    by the chosen candidate; every row names its ``setting`` (``default``: the preset)."""
    by_key = {tuple(c[k] for k in KEY_FIELDS): c for c in chosen}
    out = []
    for r in summary:
        c = by_key.get(tuple(r[k] for k in KEY_FIELDS))
        if c is None:
            out.append({**r, "setting": "default"})
        else:
            out.append({k: c[k] for k in (*r, "setting")})
    return out


def chosen_table(chosen: list[dict[str, Any]]) -> list[str]:
    """Table 1 under the settings chosen on validation (in brackets) beside the paper, and
    the datasets not run."""
    if not chosen:
        return ["(no dataset has every candidate's 5 seeds yet)"]
    lines = [
        "| dataset | " + " | ".join(LABELS[m] for m in METHODS) + " |",
        "|---|" + "---|" * len(METHODS),
    ]
    for ds in DATASETS:
        got = {r["method"]: r for r in chosen if r["dataset"] == ds}
        if not got:
            continue
        cells = [f"{_cell(got[m])} ({got[m]['setting']})" if m in got else "–" for m in METHODS]
        lines.append(f"| {ds} (ours, chosen) | " + " | ".join(cells) + " |")
        paper = PAPER["table1"]["values"][ds]
        lines.append(f"| {ds} (paper) | " + " | ".join(_paper(paper[m]) for m in METHODS) + " |")
    for ds in NOT_RUN:
        paper = PAPER["table1"]["values"][ds]
        lines.append(f"| {ds} (not run) | " + " | ".join("–" for _ in METHODS) + " |")
        lines.append(f"| {ds} (paper) | " + " | ".join(_paper(paper[m]) for m in METHODS) + " |")
    return lines


def candidates_table(chosen: list[dict[str, Any]]) -> list[str]:
    """Every candidate's mean best validation accuracy / test accuracy, the chosen in bold."""
    if not chosen:
        return []
    lines = [
        "| dataset | method | " + " | ".join(SELECTION) + " |",
        "|---|---|" + "---|" * len(SELECTION),
    ]
    for r in chosen:
        cells = []
        for v in SELECTION:
            c = r["candidates"].get(v)
            text = "–" if c is None else f"{c['val_mean']:.2f} / {c['mean']:.2f}"
            cells.append(f"**{text}**" if v == r["setting"] else text)
        lines.append(f"| {r['dataset']} | {LABELS[r['method']]} | " + " | ".join(cells) + " |")
    return lines


def _seed_accs(rows: list[dict[str, Any]], **key: Any) -> dict[int, float]:
    """Seed -> accuracy (``acc``) of the plain cell ``key`` on Table 1's setting."""
    ds = key["dataset"]
    base = {"clients": PAPER["setup"]["clients"][ds], "graphless_fraction": 0.5,
            "local_epochs": 5}  # fmt: skip
    row = _find(rows, **{**base, **key})
    return {} if row is None else {x["seed"]: x["acc"] for x in row["runs"]}


def _paired(a: dict[int, float], b: dict[int, float]) -> str:
    """Mean ± std over the seeds both have of a − b (paired by seed), or "–"."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return "–"
    d = [a[s] - b[s] for s in seeds]
    mean = sum(d) / len(d)
    std = (sum((x - mean) ** 2 for x in d) / len(d)) ** 0.5
    return f"{mean:+.2f} ± {std:.2f}" + ("" if len(seeds) >= 5 else f" ({len(seeds)})")


def _paper_gap(ds: str, a: str, b: str) -> str:
    paper = PAPER["table1"]["values"][ds]
    return f"{paper[a][0] - paper[b][0]:+.2f}"


def targets_table(rows: list[dict[str, Any]], chosen: list[dict[str, Any]]) -> list[str]:
    """Per dataset, FedGLS with its setting chosen on validation against the paper's targets:
    within 1.5 points of the paper, above Fed-GNNk and above Fed-MLP (each baseline at its own
    chosen setting; differences paired by seed)."""
    lines = [
        "| dataset | FedGLS (setting) | paper | gap | within 1.5 | FedGLS − Fed-GNNk "
        "| paper | FedGLS − Fed-MLP | paper |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for ds in DATASETS:
        got = {r["method"]: r for r in chosen if r["dataset"] == ds}
        if not {"fedgls", "fed-gnnk", "fed-mlp"} <= set(got):
            continue
        accs = {m: _seed_accs(rows, dataset=ds, method=m, variant=got[m]["setting"])
                for m in ("fedgls", "fed-gnnk", "fed-mlp")}  # fmt: skip
        g = got["fedgls"]
        gap = g["mean"] - g["paper_mean"]
        vs = [f"{_paired(accs['fedgls'], accs[m])} | {_paper_gap(ds, 'fedgls', m)}"
              for m in ("fed-gnnk", "fed-mlp")]  # fmt: skip
        lines.append(
            f"| {ds} | {_cell(g)} ({g['setting']}) | {g['paper_mean']:.2f} | {gap:+.2f} "
            f"| {'yes' if abs(gap) <= 1.5 else '**no**'} | " + " | ".join(vs) + " |"
        )
    return lines


#: the PubMed variants that test why our Fed-MLP leads there (Diagnostics)
ORDER_VARIANTS = ("default", "weight-decay", "no-dropout", "adam-kept", "normfeat")


def pubmed_order_table(rows: list[dict[str, Any]]) -> list[str]:
    """PubMed, Table 1's setting: Fed-MLP, Fed-GNNk and FedGLS under each variant, the
    paired differences, and the mean best validation accuracy (what a choice would use)."""
    lines = [
        "| variant | Fed-MLP | Fed-GNNk | FedGLS | FedGLS − Fed-MLP | FedGLS − Fed-GNNk "
        "| validation (Fed-MLP / Fed-GNNk / FedGLS) |",
        "|---|---|---|---|---|---|---|",
    ]
    key = {"dataset": "PubMed", "clients": 16, "graphless_fraction": 0.5, "local_epochs": 5}
    for v in ORDER_VARIANTS:
        found = {m: _find(rows, **key, method=m, variant=v) for m in TABLE23_METHODS}
        if not any(found.values()):
            continue
        accs = {m: _seed_accs(rows, dataset="PubMed", method=m, variant=v)
                for m in TABLE23_METHODS}  # fmt: skip
        vals = [_val_mean(found[m]) for m in TABLE23_METHODS]
        lines.append(
            f"| {v} | "
            + " | ".join(_cell(found[m]) for m in TABLE23_METHODS)
            + f" | {_paired(accs['fedgls'], accs['fed-mlp'])}"
            + f" | {_paired(accs['fedgls'], accs['fed-gnnk'])} | "
            + " / ".join("–" if x is None else f"{x:.2f}" for x in vals)
            + " |"
        )
    lines.append(
        "| paper | "
        + " | ".join(
            _paper(PAPER["table1"]["values"]["PubMed"][m]) for m in TABLE23_METHODS
        )  # fmt: skip
        + f" | {_paper_gap('PubMed', 'fedgls', 'fed-mlp')}"
        + f" | {_paper_gap('PubMed', 'fedgls', 'fed-gnnk')} | |"
    )
    return lines


def learner_table(rows: list[dict[str, Any]]) -> list[str]:
    """Where the paper's gain over Fed-GNNk could come from: FedGLS against itself with the
    learner frozen, and against Fed-GNNk on a binary kNN graph (paired by seed)."""
    lines = [
        "| dataset | FedGLS − FedGLS (learner frozen) | Fed-GNNk (binary kNN) "
        "| FedGLS − Fed-GNNk (binary kNN) | FedGLS − Fed-GNNk (default) | paper |",
        "|---|---|---|---|---|---|",
    ]
    for ds in DATASETS:
        gls = _seed_accs(rows, dataset=ds, method="fedgls")
        frozen = _seed_accs(rows, dataset=ds, method="fedgls", variant="learner-frozen")
        binary = _seed_accs(rows, dataset=ds, method="fed-gnnk", variant="knn-binary")
        gnnk = _seed_accs(rows, dataset=ds, method="fed-gnnk")
        key = {"dataset": ds, "clients": PAPER["setup"]["clients"][ds], "local_epochs": 5}
        brow = _find(rows, **key, graphless_fraction=0.5, method="fed-gnnk", variant="knn-binary")
        lines.append(
            f"| {ds} | {_paired(gls, frozen)} | {_cell(brow)} | {_paired(gls, binary)} "
            f"| {_paired(gls, gnnk)} | {_paper_gap(ds, 'fedgls', 'fed-gnnk')} |"
        )
    return lines


def write_plot(rows: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    fracs = list(RATIOS)
    for i, m in enumerate(TABLE23_METHODS):
        ours = [
            _find(
                rows, dataset="PubMed", clients=16, graphless_fraction=f, local_epochs=5, method=m
            )
            for f in fracs
        ]
        dodge = 0.012 * (i - 1)  # the error bars side by side
        xs = [f + dodge for f, r in zip(fracs, ours, strict=True) if r and r["mean"] is not None]
        ys = [r["mean"] for r in ours if r and r["mean"] is not None]
        es = [r["std"] for r in ours if r and r["mean"] is not None]
        if xs:
            ax.errorbar(xs, ys, yerr=es, marker="o", color=f"C{i}", capsize=3,
                        label=f"{LABELS[m]} (ours, ± std)")  # fmt: skip
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
    ax.set_title("FedGLS Table 3 (PubMed): accuracy vs graphless ratio")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    save_figure(fig, path)


def write_outputs(runs: list[dict[str, Any]], folder: Path) -> None:
    rows = best_val_rows(runs)
    fields = (*SUMMARY_FIELDS, *LAST_FIELDS)
    default = [r for r in rows if r.get("variant", "default") == "default"]
    chosen = select_on_validation(rows)
    summary = with_chosen_settings([{k: r[k] for k in fields} for r in default], chosen)
    write_json(folder / "fedgls.json", summary, indent=1, newline=True)
    diag = [
        {**{k: r[k] for k in fields}, "variant": r["variant"]}
        for r in rows
        if r.get("variant", "default") != "default"
    ]
    write_json(folder / "fedgls_diagnostics.json", diag, indent=1, newline=True)
    write_json(folder / "fedgls_selected.json", chosen, indent=1, newline=True)
    parts = [
        "# FedGLS reproduction (Fu et al., TMLR)",
        "",
        section(NOTES, "intro"),
        "",
        "## Table 1 beside the paper",
        "",
        *chosen_table(chosen),
        "",
        section(NOTES, "table1_caption"),
        "",
        "Not run: " + "; ".join(f"{ds}, {why}" for ds, why in NOT_RUN.items()) + ".",
        "",
        "## Conclusion",
        "",
        *targets_table(rows, chosen),
        "",
        section(NOTES, "conclusion"),
        "",
        "## Settings",
        "",
        section(NOTES, "settings"),
        "",
        "### k and the θ_z / θ_c split, chosen on validation",
        "",
        section(NOTES, "selection"),
        "",
        *candidates_table(chosen),
        "",
        "## Table 1 at the preset (k = 10, split A)",
        "",
        "Model of the best-validation round:",
        "",
        *table1(rows),
        "",
        "Model of the last round:",
        "",
        *table1(runs),
        "",
        section(NOTES, "table1"),
        "",
        "## Secure aggregation vs plaintext (FedGLS, Cora)",
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
        section(NOTES, "diagnostics"),
        "",
        "### Why our Fed-MLP leads on PubMed",
        "",
        *pubmed_order_table(rows),
        "",
        section(NOTES, "pubmed_order"),
        "",
        "### The learner and the baselines' kNN graph",
        "",
        *learner_table(rows),
        "",
        section(NOTES, "learner"),
        "",
        "### How far the learner moves the graphless clients' graphs",
        "",
        *drift_table(read_json(folder / "fedgls_graph_drift.json", [])),
        "",
        section(NOTES, "drift"),
        "",
        "### Every variant",
        "",
        *diagnostics_table(rows),
        "",
        section(NOTES, "variants"),
        "",
    ]
    write_text(folder / "fedgls.md", "\n".join(parts))
    write_plot(rows, folder / "fedgls.png")
