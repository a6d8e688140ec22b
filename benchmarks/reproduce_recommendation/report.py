"""The report of ``python -m benchmarks.reproduce_recommendation``: the Markdown tables (main
table, sweeps, timing) with the notes, and the sweep and timing plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.harness.notes import section
from benchmarks.harness.results import pyplot, save_figure, write_text

OUT = Path(__file__).resolve().parent.parent / "results"
DATASETS = ("FilmTrust", "Ciao", "Epinions")
NOTES = "recommendation"


def _f(x: object, nd: int = 4) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def per_seed(row: dict) -> str:
    """``3 (1.72, 1.72, 4.56)``: the seed count and, with several seeds, each seed's RMSE."""
    values = row.get("rmse_seeds") or []
    n = row.get("seeds", 1)
    return f"{n} ({', '.join(_f(v, 3) for v in values)})" if len(values) > 1 else str(n)


#: the main table's rows: (experiment, method), in order
MAIN_METHODS = (
    "user mean (no model)", "central", "fesog", "fesog, secure agg (uniform averages)",
    "fesog, secure agg (uniform averages, own user rows)", "fedgnn",
    "fedgnn + user-mean offset",
    "fedgnn + user-mean offset, per-rating loss", "fedgnn (paper setting + user-mean offset)",
)  # fmt: skip
ALL_DATASETS = (*DATASETS, "MovieLens100K")


#: the note of a row that shows another row's training run under another aggregation
REPEAT_NOTE = (
    "same training run as the plain row: secure aggregation returns the same sums (ideal "
    "functionality; CKKS/SecAgg+ equality is tested), only the server's view changes"
)


def _own_run(row: dict) -> bool:
    """Not a repeat of another row's run (a FedGNN secure row repeats its plain run's RMSE)."""
    return row.get("note") != REPEAT_NOTE


def _main_label(row: dict) -> str:
    how = [k for k in ("uniform averages", "own user rows") if k in row["privacy"]]
    return row["method"] + (f", secure agg ({', '.join(how)})" if how else "")


def main_table(rows: list[dict]) -> list[str]:
    """Test RMSE per method and dataset, the paper's in brackets (the table's and MovieLens
    runs; the lr not selected and the ablations are in the full table)."""
    find = {(r["dataset"], _main_label(r)): r for r in rows
            if r["experiment"] in ("table", "movielens") and _own_run(r)}  # fmt: skip
    lines = ["| method | " + " | ".join(ALL_DATASETS) + " |",
             "|---|" + "---|" * len(ALL_DATASETS)]  # fmt: skip
    for method in MAIN_METHODS:
        cells = []
        for ds in ALL_DATASETS:
            r = find.get((ds, method))
            if r is None:
                cells.append("–")
                continue
            ours = _f(r["rmse"], 3)
            if r.get("seeds", 1) > 1:
                ours += f" ± {_f(r.get('rmse_std'), 3)}"
            else:
                ours += " [1 seed]"
            paper = f" ({_f(r['paper_rmse'], 3)})" if r.get("paper_rmse") else ""
            cells.append(ours + paper)
        if any(c != "–" for c in cells):
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def render(rows: list[dict], timing: list[dict]) -> None:
    lines = [
        "# Federated graph recommendation (FeSoG, FedGNN)",
        "",
        section(NOTES, "intro"),
        "",
        "## Test RMSE beside the paper",
        "",
        *main_table(rows),
        "",
        section(NOTES, "main_caption"),
        "",
        "## Conclusion",
        "",
        section(NOTES, "conclusion"),
        "",
        "## Settings",
        "",
        section(NOTES, "settings"),
        "",
        "## Every run",
        "",
        "| dataset | method | privacy | server lr | val RMSE | RMSE (mean ± std) "
        "| seeds (RMSE per seed) | MAE | paper RMSE | ratio "
        "| paper MAE | RMSE warm / cold items | attack AUC | AUC upl. | P@10 | ε worst user "
        "| rounds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    experiments = ("table", "lr-selection", "ablation", "movielens")
    suffix = {"ablation": " (ablation)", "lr-selection": " (lr not selected: higher val RMSE)"}
    shown = sorted(
        (r for r in rows if r["experiment"] in experiments),
        key=lambda r: (ALL_DATASETS.index(r["dataset"]), experiments.index(r["experiment"]),
                       r["method"] != "user mean (no model)", r["method"] != "central",
                       r["method"], r["privacy"]),
    )  # fmt: skip
    for r in shown:
        ratio = r["rmse"] / r["paper_rmse"] if r.get("paper_rmse") else None
        name = r["method"] + suffix.get(r["experiment"], "")
        lines.append(
            f"| {r['dataset']} | {name} | {r['privacy']} | {_f(r.get('lr'), 2)} | "
            f"{_f(r.get('val_rmse'))} | {_f(r['rmse'])} ± "
            f"{_f(r.get('rmse_std'))} | {per_seed(r)} | {_f(r['mae'])} | "
            f"{_f(r['paper_rmse'])} | {_f(ratio, 2)} | {_f(r['paper_mae'])} | "
            f"{_f(r.get('rmse_warm'), 3)} / {_f(r.get('rmse_cold'), 3)} | "
            f"{_f(r.get('attack_auc'), 3)} | {_f(r.get('attack_auc_uploaded'), 3)} | "
            f"{_f(r.get('attack_precision_at_10'), 2)} | "
            f"{_f(r.get('epsilon_worst_user'), 0)} | {_f(r.get('rounds'), 0)} |"
        )
    lines += ["", "## Against the paper", "", section(NOTES, "against_paper"), "",
              "## FedGNN's gap to the paper: what each reason costs", "",
              section(NOTES, "fedgnn_gap"), "", "## FeSoG's evaluation rule and lr", "",
              section(NOTES, "fesog_divergence")]  # fmt: skip
    for exp, title in (
        ("sweep_ldp", "RMSE/MAE vs (δ, λ)"),
        ("sweep_pseudo", "RMSE/MAE vs number of pseudo items"),
    ):
        sel = [r for r in rows if r["experiment"] == exp]
        if not sel:
            continue
        lines += [
            "",
            f"## {title} ({sel[0]['dataset']}, one seed)",
            "",
            "| method | LDP | δ | λ | pseudo | RMSE | MAE | attack AUC | AUC upl. | "
            "P@10 | ε/coord |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in sel:
            lines.append(
                f"| {r['method']} | {r['ldp']} | {r['clip']} | {r['lam']} | "
                f"{r['pseudo_items']} | {_f(r['rmse'])} | {_f(r['mae'])} | "
                f"{_f(r['attack_auc'], 3)} | {_f(r['attack_auc_uploaded'], 3)} | "
                f"{_f(r['attack_precision_at_10'], 2)} | "
                f"{_f(r.get('epsilon_per_coordinate'), 2)} |"
            )
    lines += ["", "![sweeps](recommendation_sweeps.png)", "", "## What the attack shows", "",
              section(NOTES, "attack")]  # fmt: skip
    if timing:
        lines += [
            "",
            "## Secure aggregation cost: wall time per round vs sampled users",
            "",
            "| dataset | method | aggregation | users/round | s/round | MB/round |",
            "|---|---|---|---|---|---|",
        ]
        for t in sorted(
            timing, key=lambda t: (t["dataset"], t["method"], t["backend"], t["users"])
        ):
            lines.append(
                f"| {t['dataset']} | {t['method']} | {t['backend']} | {t['users']} "
                f"| {t['sec_per_round']:.3f} | {t['mb_per_round']:.1f} |"
            )
        lines += ["", "![timing](recommendation_timing.png)", "", section(NOTES, "cost")]
    write_text(OUT / "recommendation.md", "\n".join(lines) + "\n")
    plot(rows, timing)


def plot(rows: list[dict], timing: list[dict]) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    dataset = next((r["dataset"] for r in rows if r["experiment"] == "sweep_ldp"), "")
    for col, method in enumerate(("fesog", "fedgnn")):
        ax = axes[0, col]
        sel = [r for r in rows if r["experiment"] == "sweep_ldp" and r["method"] == method]
        aucs = {f"{r['attack_auc']:.3f}" for r in sel}
        for clip in sorted({r["clip"] for r in sel}):
            pts = sorted([r for r in sel if r["clip"] == clip], key=lambda r: r["lam"])
            ax.plot([r["lam"] for r in pts], [r["rmse"] for r in pts], "o-", label=f"δ = {clip}")
            if len(aucs) > 1:  # the AUC differs between points: label each
                for r in pts:
                    ax.annotate(f"{r['attack_auc']:.2f}", (r["lam"], r["rmse"]), fontsize=7,
                                xytext=(3, 3), textcoords="offset points")  # fmt: skip
        ax.set_xscale("log")
        lams = sorted({r["lam"] for r in sel})
        ax.set_xticks(lams, [f"{x:g}" for x in lams])
        same = f"\n(attack AUC {next(iter(aucs))} at every point)" if len(aucs) == 1 else ""
        ax.set(xlabel="λ (LDP noise scale)", ylabel="test RMSE (FilmTrust's 0-7 scale)",
               title=f"{method}: RMSE vs (δ, λ), {dataset}{same}")  # fmt: skip
        if sel:
            ax.legend(title="clip δ", fontsize=9, loc="center left", bbox_to_anchor=(1.01, 0.5))
        ax = axes[1, col]
        sel = sorted(
            [
                r
                for r in rows
                if r["experiment"] == "sweep_pseudo"
                and r["method"] == method
                and r["ldp"] != "none"
            ],
            key=lambda r: r["pseudo_items"],
        )
        if sel:
            x = [max(r["pseudo_items"], 0.5) for r in sel]
            ax.plot(x, [r["rmse"] for r in sel], "o-", label="test RMSE (left axis)")
            ax2 = ax.twinx()
            ax2.plot(x, [r["attack_auc"] for r in sel], "s--", color="C3",
                     label="attack AUC, all items (right axis)")  # fmt: skip
            ax2.plot(x, [r["attack_auc_uploaded"] for r in sel], "^--", color="C2",
                     label="attack AUC among uploaded rows (right axis)")  # fmt: skip
            ax2.set_ylabel("attack AUC")
            ax2.set_ylim(0.45, 1.02)
            ax.set_xscale("log")
            ax.set_xticks(x, [str(r["pseudo_items"]) for r in sel])
            ax.minorticks_off()
            ax.set(xlabel="pseudo items per user", ylabel="test RMSE (FilmTrust's 0-7 scale)",
                   title=f"{method}: RMSE and attack AUC vs pseudo items")  # fmt: skip
            if col == 0:
                handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
                fig.legend(handles, [h.get_label() for h in handles], loc="upper center",
                           ncol=3, bbox_to_anchor=(0.5, 0.0))  # fmt: skip
    save_figure(fig, OUT / "recommendation_sweeps.png", dpi=110)
    if timing:
        fig, ax = plt.subplots(figsize=(7, 5))
        for key in sorted({(t["dataset"], t["method"], t["backend"]) for t in timing}):
            pts = sorted(
                [t for t in timing if (t["dataset"], t["method"], t["backend"]) == key],
                key=lambda t: t["users"],
            )
            ax.plot(
                [t["users"] for t in pts],
                [t["sec_per_round"] for t in pts],
                "o-",
                label=" / ".join(key),
            )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="sampled users per round",
            ylabel="wall time per round (s)",
            title="Wall time per round, one thread",
        )
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, title="dataset / method / aggregation", title_fontsize=8,
                  loc="center left", bbox_to_anchor=(1.01, 0.5))  # fmt: skip
        save_figure(fig, OUT / "recommendation_timing.png", dpi=110)
