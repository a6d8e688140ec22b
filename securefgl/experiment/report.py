"""Result tables: the one ``securefgl run`` prints (short labels, meant to fit 80 columns,
whatever the terminal) and ``result.md`` (long descriptions), and their recommendation
counterparts. Accuracy and macro-F1 are fractions in result.json and % in every table;
with one seed no ± std is shown (there is none)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from protocols.dp.rng import NOISE_SEEDED
from securefgl.algorithms.recommendation.settings import RecommendationSettings
from securefgl.data.good_motif import MOTIF_DATASETS
from securefgl.experiment.runner import ExperimentResult

#: the setting column (securefgl.algorithms.base.SETTINGS): printed, then in result.md
SETTING_SHORT = {"federated": "yes", "local": "local", "central": "central"}
SETTING_LONG = {
    "federated": "yes",
    "local": "no (each client alone)",
    "central": "no (upper bound: one model on the whole graph)",
}
CLIENT_LEVEL = "client-level"


def percent(row: dict[str, Any], key: str, seeds: int, digits: int = 2, sep: str = " ± ") -> str:
    """``row[key]`` in % with its std over seeds (none with one seed); ``–`` if absent."""
    if row.get(key) is None:
        return "–"
    value = f"{100 * row[key]:.{digits}f}"
    return value if seeds < 2 else f"{value}{sep}{100 * row[key + '_std']:.{digits}f}"


def _claims(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for g in row.get("guarantees") or [] if g.get("epsilon") is not None]


def epsilon_short(row: dict[str, Any]) -> str:
    """The ε cell of the printed table: each claimed ε (``1.2; 2``), ``NOT PRIVATE`` when
    the noise was seeded, ``–`` without a claim."""
    if row.get("noise") == NOISE_SEEDED:
        return "NOT PRIVATE"
    return "; ".join(f"{g['epsilon']:.3g}" for g in _claims(row)) or "–"


def claim_terms(g: dict[str, Any]) -> str:
    """What a claim is about: ``edge-level (edgerand), δ = 0, vs everyone``."""
    parts = [str(g["unit"])] if g.get("unit") else []
    if g.get("delta") is not None:
        parts.append(f"δ = {g['delta']:g}")
    if g.get("adversary"):
        parts.append(f"vs {g['adversary']}")
    return ", ".join(parts)


def describe_claim(g: dict[str, Any]) -> str:
    """``2.00 (edge-level (edgerand), δ = 0, vs everyone)``."""
    terms = claim_terms(g)
    return f"{g['epsilon']:.2f}" + (f" ({terms})" if terms else "")


def format_epsilon(row: dict[str, Any]) -> str:
    """The ε cell of result.md: every claim described, ``NOT PRIVATE (seeded noise)`` when
    the noise was seeded, ``–`` without a claim."""
    if row.get("noise") == NOISE_SEEDED:
        return "NOT PRIVATE (seeded noise)"
    return "; ".join(describe_claim(g) for g in _claims(row)) or "–"


def protections(result: ExperimentResult) -> str:
    """The protocol stack and every other protection a row claims ε for (edge DP, ...)."""
    extra = dict.fromkeys(
        str(g.get("unit")) for row in result.summary() for g in _claims(row)
        if not str(g.get("unit", CLIENT_LEVEL)).startswith(CLIENT_LEVEL)
    )  # fmt: skip
    return " + ".join([result.config.protocol.label, *(f"{u} DP" for u in extra)])


def threat_line(result: ExperimentResult) -> str:
    """The server's threat model, and where clip_noise's noise is added: ``malicious
    server, distributed noise``."""
    protocol = result.config.protocol
    mode = protocol.clip_noise_mode
    return f"{protocol.threat_model} server" + (f", {mode} noise" if mode else "")


def claim_assumptions(g: dict[str, Any]) -> str:
    """What an ε claim rests on: its sampling and collusion assumptions ("" if none)."""
    return "; ".join(str(g[k]) for k in ("sampling", "collusion") if g.get(k))


def assumption_lines(result: ExperimentResult) -> list[str]:
    """Each distinct ε claim of the run with what it rests on (sampling, collusion)."""
    claims: dict[tuple[str, ...], list[str]] = {}
    for row in result.summary():
        if row.get("noise") == NOISE_SEEDED:
            continue
        for g in _claims(row):
            terms = claim_terms(g)
            rests = claim_assumptions(g)
            covers = str(g.get("covers") or "")
            claims.setdefault((terms, rests, covers), []).append(row["algorithm"])
    lines = []
    for (terms, rests, covers), algorithms in claims.items():
        lines.append(f"- {', '.join(dict.fromkeys(algorithms))}: ε {terms}"
                     + (f"; covers: {covers}" if covers else "")
                     + (f"; rests on: {rests}" if rests else ""))  # fmt: skip
    if not lines:
        return []
    sent = {run.algorithm: run.protection for run in result.runs if run.protection}
    covered = [name for name in dict.fromkeys(a for names in claims.values() for a in names)
               if name in sent]  # fmt: skip
    channels = [f"- {name}: " + "; ".join(f"{kind}: {how}" for kind, how in sent[name].items())
                for name in covered]  # fmt: skip
    return ["", "What each ε assumes:", "", *lines,
            "", "Each ε covers its unit only; what each algorithm sent, and how:", "", *channels]


def _split(result: ExperimentResult, md: bool) -> str:
    cfg = result.config
    if cfg.task == "graph" and cfg.dataset.lower() in MOTIF_DATASETS:
        return f"one {MOTIF_DATASETS[cfg.dataset.lower()]} domain per client"
    if cfg.task == "graph":
        return f"Dirichlet α = {cfg.graph.dirichlet:g}" + (" label skew" if md else "")
    return f"{cfg.partition} partition" if md else cfg.partition


def _columns(rows: list[list[str]], right: Sequence[bool]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.rjust(w) if flush else c.ljust(w)
                 for c, w, flush in zip(r, widths, right, strict=True)]  # fmt: skip
        out.append("  ".join(cells).rstrip())
    return out


def text_table(result: ExperimentResult, width: int = 80) -> str:
    """The table ``securefgl run`` prints: short labels, one line per algorithm, notes
    below (wrapped at ``width``)."""
    cfg, rows = result.config, result.summary()
    seeds = len(cfg.seeds)
    title = (f"{cfg.dataset} · {_split(result, False)} · K={cfg.clients} · "
             f"{protections(result)} ({threat_line(result)}) · "
             f"{seeds} seed{'s' * (seeds != 1)}")  # fmt: skip
    head = ["algorithm", "model", "fed.", "acc %", "F1 %", "ε", "MB", "s"]
    body = [
        [
            r["algorithm"], r.get("model_short") or r.get("model", ""),
            SETTING_SHORT.get(r.get("setting", ""), "yes" if r["federated"] else "no"),
            percent(r, "test_acc", seeds, 1, "±"), percent(r, "test_f1", seeds, 1, "±"),
            epsilon_short(r), f"{r['bytes'] / 1e6:.2f}", f"{r['seconds']:.1f}",
        ]
        for r in rows
    ]  # fmt: skip
    lines = [title, *_columns([head, *body], [False, False, False, *[True] * 5])]
    notes = [
        "acc, F1: test accuracy and macro-F1 in %"
        + (f", mean ± std over {seeds} seeds" if seeds > 1 else "")
        + "; fed.: federated, or a local / central reference; MB and s include the set-up."
    ]
    for r in rows:
        if _claims(r) and r.get("noise") != NOISE_SEEDED:
            notes.append(f"ε of {r['algorithm']}: " + "; ".join(
                f"{g['epsilon']:.3g} = {claim_terms(g)}" for g in _claims(r)))  # fmt: skip
    notes += silent_lines(result)
    for note in notes:
        lines += textwrap.wrap(note, width, subsequent_indent="  ")
    return "\n".join(lines)


def silent_lines(result: ExperimentResult) -> list[str]:
    """A note per run whose parties went silent (its later metrics cover the others) or
    whose secure evaluations could not run."""
    out = []
    for run in result.runs:
        if run.silent:
            gone = ", ".join(f"{p} went silent in round {r}" for p, r in run.silent.items())
            out.append(f"{run.algorithm} seed {run.seed}: {gone}; the later rounds and "
                       "metrics cover the other parties only.")  # fmt: skip
        if refused := run.refused_evaluations:
            why = next(h["evaluation_refused"] for h in run.history if "evaluation_refused" in h)
            out.append(f"{run.algorithm} seed {run.seed}: no metrics in round(s) "
                       f"{', '.join(map(str, refused))}: the secure evaluation could not run "
                       f"({why}).")  # fmt: skip
    return out


def _local_work(rows: list[dict[str, Any]], rounds: int) -> str:
    kinds = {r.get("local_work") for r in rows}
    if len(kinds) == 1:
        return f"{rounds} rounds × {kinds.pop() or 'local training'}"
    return f"{rounds} rounds; per round: " + ", ".join(
        f"{r['algorithm']} {r.get('local_work')}" for r in rows
    )


def markdown_table(result: ExperimentResult) -> str:
    """result.md: the full descriptions (model, setting, every ε claim with its unit)."""
    cfg, rows = result.config, result.summary()
    graph, seeds = cfg.task == "graph", len(cfg.seeds)
    last = f"best of last {cfg.graph.best_of_last}"
    third = last if graph else "val acc"
    spread = "mean ± std over seeds" if seeds > 1 else "one seed: no std"
    lines = [
        f"# {cfg.dataset} · {_split(result, True)} · {cfg.clients} clients · "
        f"protocol {protections(result)} · {threat_line(result)}",
        "",
        f"{_local_work(rows, cfg.rounds)}, "
        + (f"fold {cfg.graph.test_fold} of {cfg.graph.folds} per client tested, "
           if graph else f"split {'/'.join(f'{f:g}' for f in cfg.split)}, ")
        + f"seeds {cfg.seeds}. Accuracy and macro-F1 in % ({spread}), "
        + ("mean over clients of local test accuracy, last round; the "
           f"{last} rounds beside it. " if graph else "last-round model. ")
        + "MB and seconds include the set-up (e.g. FedStruct's Ā build).",
        "",
        f"| algorithm | model | federated | test acc | test macro-F1 | {third} | ε (δ) "
        "| MB exchanged | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for row in rows:
        setting = row.get("setting") or ("federated" if row["federated"] else "central")
        lines.append(
            f"| {row['algorithm']} | {row.get('model', '')} | {SETTING_LONG[setting]} "
            f"| {percent(row, 'test_acc', seeds)} | {percent(row, 'test_f1', seeds)} "
            f"| {percent(row, 'best_last_test_acc' if graph else 'val_acc', seeds)} "
            f"| {format_epsilon(row)} | {row['bytes'] / 1e6:.2f} | {row['seconds']:.1f} |"
        )
    silent = silent_lines(result)
    return "\n".join([*lines, *(["", *silent] if silent else []), *assumption_lines(result)]) + "\n"


def _rec_epsilon(row: dict[str, Any]) -> str:
    privacy = row.get("privacy") or {}
    if privacy.get("noise") == NOISE_SEEDED:
        return "NOT PRIVATE (seeded noise)"
    return "; ".join(describe_claim(g) for g in _claims(privacy)) or "–"


def recommendation_lines(rows: list[dict[str, Any]]) -> str:
    """What ``securefgl recommend`` prints: one line per run, its privacy, the reports."""
    lines = []
    for row in rows:
        budget = ", time budget reached" if row.get("budget_reached") else ""
        noise = (row.get("privacy") or {}).get("noise", "none")
        lines += [
            f"{row['method']} on {row['dataset']['dataset']} (seed {row['seed']}): test RMSE "
            f"{row['test_rmse']:.4f}  MAE {row['test_mae']:.4f}  ({row['rounds']} rounds, "
            f"{row['seconds']:.0f} s{budget})",
            f"  ε: {_rec_epsilon(row)}; noise: {noise}",
        ]
        lines += [f"  {v['summary']}" for v in row.values()
                  if isinstance(v, dict) and "summary" in v]  # fmt: skip
    return "\n".join(lines)


def recommendation_markdown(config: Any, rows: list[dict[str, Any]]) -> str:
    """result.md of ``securefgl recommend``: one row per run."""
    data = rows[0]["dataset"] if rows else {"dataset": config.dataset}
    protocol = config.protocol
    sums = config.section(RecommendationSettings).ideal_sums and protocol.transport != "plain"
    stack = f"ideal functionality of {protocol.label} (no cryptography ran)" if sums else (
        protocol.label)  # fmt: skip
    lines = [
        f"# {data['dataset']} · recommendation · protocol {stack} · "
        f"{protocol.threat_model} server",
        "",
        f"At most {config.rounds} rounds (validation patience and the time budget stop "
        "earlier), evaluated every "
        f"{config.eval_every}; test RMSE and MAE at the best validation RMSE, in rating units.",
        "",
        "| method | seed | test RMSE | test MAE | val RMSE | rounds | seconds | ε (δ) | noise |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['seed']} | {r['test_rmse']:.4f} | {r['test_mae']:.4f} "
            f"| {r['val_rmse']:.4f} | {r['rounds']} | {r['seconds']:.1f} | {_rec_epsilon(r)} "
            f"| {(r.get('privacy') or {}).get('noise', 'none')} |"
        )
    for r in rows:
        if r.get("reference_settings"):
            lines += ["", f"{r['method']}: the non-federated reference, with its own settings "
                      f"({r['reference_settings']}); the flags and the protocol above apply to "
                      "the federated methods."]  # fmt: skip
            break
    return "\n".join(lines) + "\n"
