"""``benchmarks/results/spreadfgl.md`` and ``.png`` from the result rows: Table II beside the
paper, the targets, bytes per round per party, the privacy–utility curve of the H
protections, the survey setting, the tested causes; prose from ``notes/spreadfgl.md``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.notes import section
from benchmarks.harness.results import pyplot, save_figure, write_text
from benchmarks.reproduce_spreadfgl.grid import (
    CLIENTS,
    DATASETS,
    HPARAM_VARIANTS,
    LABELS,
    METHODS,
    NOT_RUN,
    PATCHER_VARIANTS,
    REDUCTION_METHODS,
    SURVEY_CLIENTS,
    SURVEY_STEPS,
)

NOTES = "spreadfgl"
TOLERANCE = 2.0  # points of ACC
SEEDS = 5  # a cell with fewer is marked "[n seeds]"


def _cell(row: dict[str, Any] | None, key: str = "acc") -> str:
    if row is None or row.get(key) is None:
        return "–"
    std = row.get("std" if key == "acc" else "f1_std")
    paper = row.get(f"paper_{key}")
    ours = f"{row[key]:.2f} ± {std:.2f}" if std is not None else f"{row[key]:.2f}"
    seeds = row.get("seeds")
    ours += f" [{seeds} seed{'s' if seeds != 1 else ''}]" if seeds and seeds < SEEDS else ""
    return ours + (f" ({paper:.2f})" if paper is not None else "")


def _find(rows: list[dict], setting: str, dataset: str, clients: int, method: str,
          protection: str = "none") -> dict | None:  # fmt: skip
    for r in rows:
        if (r["setting"], r["dataset"], r["clients"], r["method"], r["protection"]) == (
            setting, dataset, clients, method, protection,
        ):  # fmt: skip
            return r
    return None


STEPS_LABEL = {"none": "T_l = 10", "steps:1": "T_l = 1"}


def _mean_val(row: dict, seeds: set[int]) -> float:
    return sum(r["val_acc"] for r in row["runs"] if r["seed"] in seeds) / len(seeds)


def _kept_on_validation(found: dict[str, dict | None], default: str) -> str | None:
    """The key of ``found`` with the higher mean validation accuracy over the seeds every
    candidate ran (a tie keeps ``default``); None until every candidate has runs and all of
    them record validation accuracy."""
    if any(r is None or not r["runs"] or any("val_acc" not in x for x in r["runs"])
           for r in found.values()):  # fmt: skip
        return None
    common = set.intersection(*({x["seed"] for x in r["runs"]} for r in found.values()))
    if not common:
        return None
    return max(found, key=lambda v: (_mean_val(found[v], common), v == default))


def survey_kept(rows: list[dict], dataset: str, clients: int, method: str) -> str | None:
    """The local steps (``SURVEY_STEPS``) a survey cell keeps on validation (a tie keeps
    T_l = 10)."""
    found = {v: _find(rows, "survey", dataset, clients, method, v) for v in SURVEY_STEPS}
    return _kept_on_validation(found, "none")


#: the classifier's loss reduction of each setting that runs Table II's cells
REDUCTIONS = {"table2": "sum", "mean-ce": "mean"}
#: the local steps per round of each setting that runs Table II's cells (Eq. 7's sum)
LOCAL_STEPS = {"table2": "T_l = 10", "tl20": "T_l = 20"}


def setting_kept(rows: list[dict], dataset: str, clients: int, method: str,
                 choices: dict[str, str] = REDUCTIONS) -> str | None:  # fmt: skip
    """The setting of ``choices`` (default the loss reductions: ``table2``, Eq. 7's summed
    cross-entropy, or ``mean-ce``, averaged) a Table II cell keeps on validation (a tie
    keeps ``table2``); None for a method without such runs or until every setting's runs
    record validation accuracy."""
    if method not in REDUCTION_METHODS:
        return None
    found = {s: _find(rows, s, dataset, clients, method) for s in choices}
    return _kept_on_validation(found, "table2")


def kept_table2(rows: list[dict], choices: dict[str, str] = REDUCTIONS,
                what: str = "the reduction") -> list[str]:  # fmt: skip
    """Table II's ACC with each method's setting of ``choices`` chosen on validation, per
    cell (a dataset without runs of the alternatives is left out)."""
    out = []
    others = [s for s in choices if s != "table2"]
    for ds in DATASETS:
        if not any(r["dataset"] == ds and r["setting"] in others for r in rows):
            continue
        out += [f"**{ds}, ACC** (ours with {what} kept on validation; paper in "
                "brackets)", "", "| method | " + " | ".join(f"M = {m}" for m in CLIENTS)
                + " |", "|---|" + "---|" * len(CLIENTS)]  # fmt: skip
        for meth in REDUCTION_METHODS:
            cells = []
            for m in CLIENTS:
                kept = setting_kept(rows, ds, m, meth, choices)
                cells.append(_cell(_find(rows, kept, ds, m, meth)) + f" · {choices[kept]}"
                             if kept else "pending")  # fmt: skip
            out.append(f"| {LABELS[meth]} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def _readings_table(rows: list[dict], setting: str, caption: str,
                    cell: Callable[[dict], str | None]) -> list[str]:  # fmt: skip
    """Per dataset with ``setting`` rows: a method × M table of ``cell(row)`` (``–`` where
    the cell has no row or ``cell`` returns None; a method without any is left out)."""
    out = []
    for ds in DATASETS:
        if not any(r["setting"] == setting and r["dataset"] == ds for r in rows):
            continue
        out += [f"**{ds}** ({caption})", "", "| method | "
                + " | ".join(f"M = {m}" for m in CLIENTS) + " |",
                "|---|" + "---|" * len(CLIENTS)]  # fmt: skip
        for meth in REDUCTION_METHODS:
            found = [_find(rows, setting, ds, m, meth) for m in CLIENTS]
            cells = [(cell(r) if r is not None else None) or "–" for r in found]
            if any(c != "–" for c in cells):
                out.append(f"| {LABELS[meth]} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def _seeds_mark(row: dict) -> str:
    n = row["seeds"]
    return f" [{n} seed{'s' if n != 1 else ''}]" if n < SEEDS else ""


def f1_table(rows: list[dict]) -> list[str]:
    """``f1-clients``: Table II's cells run again, the pooled macro-F1 beside each client's
    own averaged over the clients, the paper's F1, and whether the runs repeat Table II's
    test ACC seed for seed."""

    def cell(r: dict) -> str | None:
        if r.get("f1_clients_true") is None:
            return None
        t2 = _find(rows, "table2", r["dataset"], r["clients"], r["method"])
        same = t2 is not None and all(
            any(x["seed"] == y["seed"] and x["acc"] == y["acc"] for y in t2["runs"])
            for x in r["runs"]
        )
        paper = f" ({r['paper_f1']:.2f})" if r.get("paper_f1") is not None else ""
        return (f"{r['f1']:.2f} / {r['f1_clients']:.2f} / {r['f1_clients_true']:.2f}"
                f"{paper}{_seeds_mark(r)}" + ("" if same else " · ACC differs"))  # fmt: skip

    return _readings_table(rows, "f1-clients", "macro-F1 %: pooled / mean of the clients' "
                           "own over the classes each client has or predicts / the same over "
                           "the classes it has; paper in brackets; every seed's test ACC "
                           "equals Table II's unless marked", cell)  # fmt: skip


def round_table(rows: list[dict]) -> list[str]:
    """``best-round``: test ACC at the last round / at the round of the best validation ACC
    / at the best round for test, per method and cell, the paper's in brackets."""

    def cell(r: dict) -> str | None:
        if r.get("best_round_acc") is None:
            return None
        return (f"{r['acc']:.2f} / {r['val_round_acc']:.2f} / {r['best_round_acc']:.2f} "
                f"({r['paper_acc']:.2f}){_seeds_mark(r)}")  # fmt: skip

    return _readings_table(rows, "best-round", "test ACC %: last round / round of the best "
                           "validation ACC / best round for test; mean over seeds, paper in "
                           "brackets", cell)  # fmt: skip


def table2(rows: list[dict], setting: str = "table2", keys: tuple[str, ...] = ("acc", "f1"),
           methods: tuple[str, ...] = METHODS) -> list[str]:  # fmt: skip
    """Per dataset with ``setting`` rows, a method × M table of each of ``keys`` (``acc``,
    ``f1``), the paper's in brackets."""
    out = []
    names = {"acc": "ACC", "f1": "macro-F1"}
    for ds in DATASETS:
        if not any(r["dataset"] == ds and r["setting"] == setting for r in rows):
            continue
        for key, name in ((k, names[k]) for k in keys):
            how = "ours: mean ± std over 5 seeds, fewer where marked; paper in brackets"
            out += [f"**{ds}, {name}** ({how})", "",
                    "| method | " + " | ".join(f"M = {m}" for m in CLIENTS) + " |",
                    "|---|" + "---|" * len(CLIENTS)]  # fmt: skip
            for meth in methods:
                cells = [_cell(_find(rows, setting, ds, m, meth), key) for m in CLIENTS]
                if any(c != "–" for c in cells):
                    out.append(f"| {LABELS[meth]} | " + " | ".join(cells) + " |")
            out.append("")
    return out


def variant_table(rows: list[dict], setting: str, variants: dict[str, Any]) -> list[str]:
    """FedGL (and FedAvg-fusion where a variant changes its model) under ``mean-ce`` with
    each variant of ``setting`` (``patcher`` or ``hparams``), beside ``mean-ce``'s FedGL and
    FedAvg-fusion: test ACC ± std, mean validation ACC in brackets."""

    def cell(r: dict | None) -> str:
        if r is None or r.get("acc") is None:
            return "–"
        val = [x["val_acc"] for x in r["runs"] if "val_acc" in x]
        out = f"{r['acc']:.2f} ± {r['std']:.2f}"
        out += f" [{r['seeds']} seeds]" if r["seeds"] < SEEDS else ""
        return out + (f" (val {sum(val) / len(val):.2f})" if val else "")

    out = []
    for ds in DATASETS:
        found = [r for r in rows if r["setting"] == setting and r["dataset"] == ds]
        if not found:
            continue
        sizes = [m for m in CLIENTS if any(r["clients"] == m for r in found)]
        paper = {m: _find(rows, "table2", ds, m, "fedgl") for m in sizes}
        out += [f"**{ds}** (test ACC ± std over seeds, mean validation ACC in brackets)", "",
                "| method | variant | " + " | ".join(f"M = {m}" for m in sizes) + " |",
                "|---|---|" + "---|" * len(sizes),
                "| FedGL | paper | " + " | ".join(
                    f"{paper[m]['paper_acc']:.2f}" if paper[m] else "–" for m in sizes) + " |"]
        for meth in ("fedavg-fusion", "fedgl"):
            out.append(f"| {LABELS[meth]} | mean-ce | " + " | ".join(
                cell(_find(rows, "mean-ce", ds, m, meth)) for m in sizes) + " |")
            for v in variants:
                cells = [cell(_find(rows, setting, ds, m, meth, v)) for m in sizes]
                if any(c != "–" for c in cells):
                    out.append(f"| {LABELS[meth]} | {v} | " + " | ".join(cells) + " |")
        out.append("")
    return out  # fmt: skip


def targets(rows: list[dict], choices: dict[str, str] | None = None, setting: str = "table2",
            key: str = "acc", survey: bool = True) -> list[str]:  # fmt: skip
    """Each target, cell by cell: met, missed (by how much) or not measured. With
    ``choices`` each Table II cell takes the setting of ``choices`` kept on validation (a
    cell whose choice is pending is not checked); otherwise the cells of ``setting``, read at
    ``key`` (``best-round``: ``val_round_acc`` or ``best_round_acc``). ``survey`` adds the
    FedSage+ checks in the survey's setting."""
    lines, met, missed = [], 0, 0

    def find(ds: str, m: int, meth: str) -> dict | None:
        if choices is None:
            r = _find(rows, setting, ds, m, meth)
            return r if r is None or key == "acc" else {**r, "acc": r.get(key)}
        kept = setting_kept(rows, ds, m, meth, choices)
        return _find(rows, kept, ds, m, meth) if kept else None

    for ds in DATASETS:
        for m in CLIENTS:
            checks = []
            for meth in ("fedavg-fusion", "fedgl"):
                r = find(ds, m, meth)
                if r and r.get("acc") is not None and r.get("paper_acc") is not None:
                    gap = r["acc"] - r["paper_acc"]
                    ok = abs(gap) <= TOLERANCE
                    checks.append(f"{LABELS[meth]} {gap:+.2f} {'✓' if ok else '✗'}")
                    met, missed = met + ok, missed + (not ok)
            s, f = find(ds, m, "spreadfgl"), find(ds, m, "fedavg-fusion")
            if s and f and s.get("acc") is not None and f.get("acc") is not None:
                ok = s["acc"] >= f["acc"]
                checks.append(
                    f"SpreadFGL − FedAvg-fusion {s['acc'] - f['acc']:+.2f} {'✓' if ok else '✗'}"
                )
                met, missed = met + ok, missed + (not ok)
            if checks:
                lines.append(f"| {ds} | {m} | " + " · ".join(checks) + " |")
    for ds in DATASETS if survey else ():
        for m in SURVEY_CLIENTS:
            kept = survey_kept(rows, ds, m, "fedsage+")
            r = _find(rows, "survey", ds, m, "fedsage+", kept or "none")
            if r and r.get("acc") is not None and r.get("paper_acc") is not None:
                gap = r["acc"] - r["paper_acc"]
                ok = abs(gap) <= TOLERANCE
                how = STEPS_LABEL[kept] + " kept on validation" if kept else "T_l = 10, " \
                    "selection pending"
                lines.append(f"| {ds} (survey setting) | {m} | FedSage+ ({how}) {gap:+.2f} "
                             f"{'✓' if ok else '✗'} |")  # fmt: skip
                met, missed = met + ok, missed + (not ok)
    head = [f"{met} checks met, {missed} missed (ACC within {TOLERANCE:g} points of the "
            "paper; SpreadFGL ≥ FedAvg-fusion"
            + ("; FedSage+ within 2 points of the survey)." if survey else ")."), "",
            "| dataset | M | checks (ours − paper, ACC points) |", "|---|---|---|"]  # fmt: skip
    return head + lines + [""]


def bytes_table(rows: list[dict]) -> list[str]:
    out = ["| dataset | M | method | client up KB/round | client down KB/round | of which H up | "
           "of which patches down | H per upload KB | patch per download KB | server↔server "
           "KB/round | set-up MB |", "|---|---|---|" + "---|" * 8]  # fmt: skip
    for r in rows:
        if r["setting"] not in ("table2", "bytes") or not r.get("bytes"):
            continue
        if r["setting"] == "table2" and r["clients"] != 9:
            continue
        b = r["bytes"]
        name = LABELS[r["method"]] + (f" [{r['protection']}]" if r["setting"] == "bytes" else "")
        out.append(
            f"| {r['dataset']} | {r['clients']} | {name} | {b['client_up_kb']} | "
            f"{b['client_down_kb']} | {b['h_kb']} | {b['patch_kb']} | {b['h_per_upload_kb']} | "
            f"{b['patch_per_download_kb']} | {b['server_p2p_kb']} | {b['setup_mb']} |"
        )
    return out + [""]


def privacy_table(rows: list[dict]) -> list[str]:
    out = ["| protection of H | ε (per node row, all uploads) | ACC | F1 | link AUC (server) | "
           "label acc. (server) | membership AUC (server) | foreign-label acc. (client) |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in sorted((r for r in rows if r["setting"] == "privacy"), key=_privacy_order):
        eps = "∞ (none)" if r.get("h_epsilon") is None else f"{r['h_epsilon']:.3g}"
        attacks = [_attack(r, k) for k in ATTACK_KEYS]
        out.append(f"| {r['protection']} | {eps} | {_cell(r)} | {_cell(r, 'f1')} | "
                   + " | ".join(attacks) + " |")  # fmt: skip
    return out + ["", "(attack baselines in brackets: chance AUC 0.5; the majority class.)", ""]


ATTACK_KEYS = ("h_link_auc", "h_label_accuracy", "h_membership_auc", "generated_label_accuracy")


def _attack(row: dict, key: str) -> str:
    """An attack's value with its naive baseline in brackets."""
    if row.get(key) is None:
        return "–"
    base = row.get(key + "_baseline")
    return f"{row[key]:.3f}" + (f" ({base:.3f})" if base is not None else "")


def _privacy_order(r: dict) -> tuple:
    kind, _, value = r["protection"].partition(":")
    return (kind != "none", kind, float(value or 0))


def write_markdown(rows: list[dict], path: Path) -> None:
    lines = ["# SpreadFGL, FedGL and FedSage+: reproduction, traffic and the H leak", "",
             section(NOTES, "intro"), "", "## Table II beside the paper (ACC, %)", ""]  # fmt: skip
    lines += table2(rows, keys=("acc",))
    lines += [f"Not run: {ds}, {why}." for ds, why in NOT_RUN.items()] + [""]
    lines += ["## Conclusion", "", section(NOTES, "conclusion"), ""]
    lines += ["Every check, cell by cell (Table II as written):", ""] + targets(rows)
    lines += ["## Settings", "", section(NOTES, "settings"), ""]
    lines += ["## Table II, macro-F1", ""] + table2(rows, keys=("f1",))
    lines += [section(NOTES, "table2"), ""]
    lines += ["## FedSage / FedSage+ in their paper's setting", "", section(NOTES, "survey"), ""]
    lines += ["Test ACC ± std over seeds (the survey's in brackets) · mean validation ACC; ◀ the "
              "local steps kept on validation.", ""] + survey_table(rows)  # fmt: skip
    lines += ["## Bytes per round per party", "", section(NOTES, "bytes"), ""] + bytes_table(rows)
    lines += ["## The H leak and its protections (FedGL, Cora, M = 9)", ""]
    lines += privacy_table(rows) + ["![privacy-utility](spreadfgl.png)", ""]
    lines += [section(NOTES, "privacy"), ""]
    lines += ["## Causes tested", "", section(NOTES, "causes"), ""]
    lines += ["### The partition", "", section(NOTES, "partition"), ""]
    lines += table2(rows, "partition")
    lines += ["### Table I's cut on Coauthor CS", "", section(NOTES, "table1-cut"), ""]
    lines += table2(rows, "table1-cut", keys=("acc",)) + ["Targets at Table I's cut:", ""]
    lines += targets(rows, setting="table1-cut", survey=False)
    lines += ["### Feature normalisation", "", section(NOTES, "normfeat"), ""]
    lines += table2(rows, "normfeat", keys=("acc",))
    lines += ["Each client rescaling the generated rows to its own rows' mean norm:", ""]
    lines += table2(rows, "normfeat-scaled", keys=("acc",))
    lines += ["### The loss reduction", "", section(NOTES, "mean-ce"), ""]
    lines += table2(rows, "mean-ce")
    lines += [section(NOTES, "mean-ce-kept"), ""] + kept_table2(rows)
    lines += ["Targets with the reduction kept on validation:", ""]
    lines += targets(rows, REDUCTIONS)
    lines += ["### T_l = 20 local steps", "", section(NOTES, "tl20"), ""]
    lines += table2(rows, "tl20", keys=("acc",))
    lines += kept_table2(rows, LOCAL_STEPS, "the local steps")
    lines += ["Targets with the local steps kept on validation:", ""]
    lines += targets(rows, LOCAL_STEPS, survey=False)
    lines += ["### The round reported", "", section(NOTES, "best-round"), ""]
    lines += round_table(rows) + ["Targets at the round of the best validation ACC:", ""]
    lines += targets(rows, setting="best-round", key="val_round_acc", survey=False)
    lines += ["Targets at the best round for test (not a method: a reading of the paper):", ""]
    lines += targets(rows, setting="best-round", key="best_round_acc", survey=False)
    lines += ["### How the macro-F1 is averaged", "", section(NOTES, "f1"), ""]
    lines += f1_table(rows)
    lines += ["### FedGL's imputation and patcher", "", section(NOTES, "patcher"), ""]
    lines += variant_table(rows, "patcher", PATCHER_VARIANTS)
    lines += ["### K, k, T_l and the hidden width", "", section(NOTES, "hparams"), ""]
    lines += variant_table(rows, "hparams", HPARAM_VARIANTS)
    write_text(path, "\n".join(lines))


def survey_table(rows: list[dict]) -> list[str]:
    """Both local-step variants per cell: test ACC (the survey's in brackets) and mean
    validation ACC; ◀ marks the variant kept on validation."""
    out = ["| dataset | method | local steps | " + " | ".join(f"M = {m}" for m in SURVEY_CLIENTS)
           + " |", "|---|---|---|" + "---|" * len(SURVEY_CLIENTS)]  # fmt: skip
    for ds in DATASETS:
        for meth in ("fedsage", "fedsage+"):
            for steps in SURVEY_STEPS:
                cells = []
                for m in SURVEY_CLIENTS:
                    r = _find(rows, "survey", ds, m, meth, steps)
                    cell = _cell(r)
                    vals = [x["val_acc"] for x in r["runs"] if "val_acc" in x] if r else []
                    if vals:
                        cell += f" · val {sum(vals) / len(vals):.2f}"
                    if survey_kept(rows, ds, m, meth) == steps:
                        cell += " ◀"
                    cells.append(cell)
                if any(c != "–" for c in cells):
                    head = f"| {ds} | {LABELS[meth]} | {STEPS_LABEL[steps]} | "
                    out.append(head + " | ".join(cells) + " |")
    return out + [""]


#: where the protections without an ε (none, row subsets) are drawn on the ε axis
NO_EPSILON = 1e4


def write_plot(rows: list[dict], path: Path) -> None:
    priv = [r for r in rows if r["setting"] == "privacy" and r.get("acc") is not None]
    if not priv:
        return
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    styles = (("gaussian", "o", "C0"), ("rr", "s", "C1"), ("rows", "^", "C2"),
              ("none", "*", "k"))  # fmt: skip
    names = {"gaussian": "Gaussian noise", "rr": "randomised response",
             "rows": "row subsets (no ε)", "none": "no protection"}  # fmt: skip
    panels = (("acc", "test ACC (%)", "FedGL's test accuracy"),
              ("h_label_accuracy", "label accuracy", "edge server: labels from H"),
              ("h_link_auc", "link AUC", "edge server: links from H"))  # fmt: skip
    for kind, marker, color in styles:
        sel = sorted((r for r in priv if r["protection"].split(":")[0] == kind), key=_privacy_order)
        if not sel:
            continue
        eps = [r["h_epsilon"] if r.get("h_epsilon") is not None else NO_EPSILON for r in sel]
        for ax, (key, _, _) in zip(axes, panels, strict=True):
            ys = [r.get(key) for r in sel]
            ax.plot(eps, ys, marker=marker, color=color, label=names[kind],
                    ls="-" if kind in ("gaussian", "rr") else "none",
                    ms=9 if kind == "none" else 6)  # fmt: skip
            if kind == "rows":  # two points at one x: name them
                for r, y in zip(sel, ys, strict=True):
                    ax.annotate(r["protection"], (NO_EPSILON, y), xytext=(-6, 0),
                                textcoords="offset points", ha="right", va="center",
                                fontsize=8, color=color)  # fmt: skip
    base = next((r for r in priv if r.get("h_label_accuracy_baseline") is not None), None)
    if base is not None:
        axes[1].axhline(base["h_label_accuracy_baseline"], color="grey", ls=":",
                        label="attack baseline (majority class; chance AUC)")  # fmt: skip
    axes[2].axhline(0.5, color="grey", ls=":", label="attack baseline (majority class; chance AUC)")
    for ax, (_, ylabel, title) in zip(axes, panels, strict=True):
        ax.set_xscale("log")
        ax.set_xticks([10, 100, NO_EPSILON], ["10", "100", "no ε"])
        ax.set_xlabel("ε per node row, all 20 uploads")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles),
               bbox_to_anchor=(0.5, -0.08), fontsize=9)  # fmt: skip
    fig.suptitle("FedGL on Cora, M = 9: protecting the H uploads (mean over 5 seeds)")
    save_figure(fig, path)
