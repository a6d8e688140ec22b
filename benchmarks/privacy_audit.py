"""Privacy audit on Cora and CiteSeer (K = 10, Louvain): attacks × protocol stacks.

Run: ``python -m benchmarks.privacy_audit [--datasets Cora,CiteSeer] [--quick]`` with
SECUREFGL_DATA pointing at a PyG raw-layout folder. Resumable: cells already in
``benchmarks/results/privacy_audit.json`` (a list of rows; settings and the DP-audit sweep in
``privacy_audit_meta.json``) are skipped (``--fresh`` to start over);
``--render-only`` rewrites the Markdown and plot from the JSON. ``--active-server`` runs the
active-server audit (:mod:`attacks.active_server`, seconds, no dataset) and merges its rows
(``adversary = "active server"``, one per attack, protocol and threat model) into the JSON,
replacing earlier active-server rows and keeping every other row, then re-renders.

Grid (one seed; every cell trains once and runs the attacks that target its algorithm,
``attacks.registry``):

* ``central`` (GCN, not federated): link stealing, LinkTeller, node MIA — the published
  single-graph setting, the reference for the ballparks (:data:`BALLPARK`);
* ``fedavg`` (FedSGD GCN, 100 rounds) × plain / secagg / ckks / clip_noise (σ = 1 and
  0.1, central noise) / secagg+clip_noise (distributed noise) / client-side EdgeRand
  (ε = 1, 8): the model-holder attacks on every client's deployment, gradient inversion
  by the server, the one-run DP audit;
* ``fedstruct`` (Hop2Vec, Table 5 preset) × plain / secagg (masked Ā sums) / EdgeRand ε = 1:
  S-gradient leakage to the server, Ā-construction structure reconstruction, and the
  model-holder attacks on every client's deployment. No ckks cell
  (CKKS on the n·d_s-dimensional H2V updates is too slow here): its accuracy equals plain
  (``benchmarks/results/fedstruct.md``) and a ckks Ā sum delivers the same sum as masked
  (``tests/securefgl/algorithms/fedstruct/test_adjacency_secure.py``), so the attack values match;
* ``fedgcn`` (2-hop) × plain / secagg (masked sums) / ckks: neighbour-feature inference;
* ``fedgls`` on FedGLS's own set-up (``securefgl.algorithms.fedgls.settings.apply_preset``: the
  paper's K and rounds, the K largest Louvain communities, half of the clients graphless)
  × plain / secagg / ckks / clip_noise σ = 1 / ldp_gaussian z = 1: φ's feature support
  and the learned-graph replay by the server, the model-holder attacks on every client's
  deployment (each on its own or learned graph), the one-run DP audit.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from attacks.active_server.audit import active_server_rows, merge_rows
from attacks.active_server.audit import markdown as active_server_table
from attacks.active_server.driver import ADVERSARY
from attacks.audit import AuditConfig, epsilon_cells, markdown_table, run_audit
from attacks.dp_audit import dp_audit
from benchmarks.harness.notes import note_path, section
from benchmarks.harness.results import pyplot, read_json, save_figure, write_json, write_text
from securefgl.algorithms.fedgls.settings import apply_preset
from securefgl.config import ExperimentConfig

OUT = Path(__file__).parent / "results"
NAME = "privacy_audit"

# (algorithm, protocol stack, config overrides, label suffix)
CELLS: list[tuple[str, str, dict[str, Any], str]] = [
    ("central", "plain", {}, ""),
    ("fedavg", "plain", {}, ""),
    ("fedavg", "secagg", {}, ""),
    ("fedavg", "ckks", {}, ""),
    ("fedavg", "clip_noise", {"dp_noise": 1.0}, " σ=1"),
    ("fedavg", "clip_noise", {"dp_noise": 0.1}, " σ=0.1"),
    ("fedavg", "secagg,clip_noise", {"dp_noise": 1.0}, " σ=1"),
    ("fedavg", "edgerand:1", {}, ""),
    ("fedavg", "edgerand:8", {}, ""),
    ("fedstruct", "plain", {}, ""),
    ("fedstruct", "secagg", {}, ""),
    ("fedstruct", "edgerand:1", {}, ""),
    ("fedgcn", "plain", {}, ""),
    ("fedgcn", "secagg", {}, ""),
    ("fedgcn", "ckks", {}, ""),
    ("fedgls", "plain", {}, ""),
    ("fedgls", "secagg", {}, ""),
    ("fedgls", "ckks", {}, ""),
    ("fedgls", "clip_noise", {"dp_noise": 1.0}, " σ=1"),
    ("fedgls", "ldp_gaussian", {"dp_noise": 1.0}, " z=1"),
]
#: algorithms audited on their paper's own set-up rather than the grid's K and partition
PRESETS = {"fedgls": apply_preset}
#: cells repeated with ``--extra-seeds`` (seed spread of the headline numbers)
SEED_CELLS = {
    ("central", "plain"),
    ("fedavg", "plain"),
    ("fedavg", "edgerand:1"),
    ("fedstruct", "plain"),
    ("fedgcn", "plain"),
    ("fedgls", "plain"),
}
QUICK = {("central", "plain"), ("fedavg", "plain"), ("fedavg", "secagg"), ("fedstruct", "plain")}

#: published ballparks ([R] = recalled, to verify against the paper; [V abstract] = checked
#: against the abstract)
BALLPARK = {
    "link_stealing": "He et al. 2021 Attack-0 (correlation), 2-layer GCN: AUC ≈ 0.95 on "
    "Cora and CiteSeer [R]; issue target ≳ 0.9 on Cora",
    "linkteller": "Wu et al. 2022: AUC ≥ 0.95, near-perfect precision/recall on low-degree "
    "nodes without DP; EdgeRand/LapGraph ε ≤ 1 degrades, ε > 5 still leaks [V abstract]",
    "membership_inference": "He et al. 2021 node MIA (shadow model): AUC ≈ 0.7-0.9 on "
    "citation graphs [R]",
    "gradient_inversion": "DLG/iDLG recover small batches exactly on images; graph "
    "versions (GLG, GRAIN) report exact recovery for small graphs [V abstracts]",
    "structure_reconstruction": "no published number (FedStruct claims pruning and low "
    "rank prevent reconstruction; a receiver with a single neighbouring client learns that "
    "client's block)",
    "hop2vec_leakage": "no published number (FedStruct, Aliakbari et al. 2025: the "
    "S-gradient support is the client's L_s-hop reach)",
    "neighbour_feature_inference": "FedStruct footnote 2 / Ngo et al. 2024: FedGCN's sums "
    "reveal neighbours' features (no number)",
    "dp_audit": "Steinke et al. 2023: one-run bounds saturate well below the true ε "
    "(m = 1000, r = 100: ≤ 3.47 at δ = 1e-5)",
}


def base_config(dataset: str, args: argparse.Namespace) -> ExperimentConfig:
    return ExperimentConfig(
        dataset=dataset,
        clients=args.clients,
        partition=args.partition,
        rounds=args.rounds,
        model="gcn",
        hidden=64,
        layers=2,
        dropout=0.5,
        lr=0.01,
        client_lr=1.0,
        protocol={"dp_clip": 1.0, "dp_delta": 1e-5},
        threads=1,
    ).validate()


def _meta_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}_meta.json")


def load(path: Path) -> dict[str, Any]:
    """``{"rows": [...], "settings": {...}, ("dp_audit_sweep": [...])}`` from the two files."""
    payload: dict[str, Any] = {"settings": {}, "rows": []}
    payload["rows"] = read_json(path, payload["rows"])
    payload.update(read_json(_meta_path(path), {}))
    return payload


def save(payload: dict[str, Any], path: Path) -> None:
    """The rows to ``path`` (a list, as the other result files); the rest to ``*_meta.json``."""
    meta = {k: v for k, v in payload.items() if k != "rows"}
    write_json(path, payload["rows"], indent=1, default=str, newline=True)
    write_json(_meta_path(path), meta, indent=1, default=str, newline=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    path = OUT / f"{NAME}.json"
    payload = {"settings": {}, "rows": []} if args.fresh else load(path)
    done = {
        (r["dataset"], r["algorithm"], r["protocol"], r.get("seed", args.seed))
        for r in payload["rows"]
        if r.get("adversary") != ADVERSARY
    }
    cells = [
        (ds, algo, proto, over, suffix, seed)
        for seed in [args.seed, *args.extra_seeds]
        for ds in args.datasets
        for algo, proto, over, suffix in CELLS
        if (not args.quick or (algo, proto) in QUICK)
        and (seed == args.seed or (algo, proto + suffix) in SEED_CELLS)
    ]
    todo = [c for c in cells if (c[0], c[1], c[2] + c[4], c[5]) not in done]
    payload["settings"] = {
        "clients": args.clients,
        "partition": args.partition,
        "seed": args.seed,
        "rounds": args.rounds,
        "central_rounds": args.central_rounds,
        "grid": [[a, p + s, o] for a, p, o, s in CELLS],
        "machine": "2 shared CPUs, torch threads 1",
    }
    bar = tqdm(todo, desc="privacy audit")
    for ds, algo, proto, over, suffix, seed in bar:
        bar.set_postfix_str(f"{ds} · {algo} · {proto}{suffix} · seed {seed}")
        base = base_config(ds, args)
        base = PRESETS.get(algo, lambda c: c)(base).replace(**over)
        audit = AuditConfig(
            base=base,
            algorithms=[algo],
            protocols=[proto],
            seeds=[seed],
            central_rounds=args.central_rounds,
        )
        t0 = time.time()
        rows = run_audit(audit, progress=False)
        for r in rows:
            r["protocol"] += suffix
            r["cell_seconds"] = round(time.time() - t0, 1)
        payload["rows"].extend(rows)
        save(payload, path)  # resumable after every cell
        logging.info("%s %s %s%s seed %d: %.0fs", ds, algo, proto, suffix, seed, time.time() - t0)
    return payload


#: mechanism-only one-run audits (σ, rounds): where the audit is informative vs saturated
SWEEP = [(0.0, 1), (1.0, 1), (2.0, 1), (5.0, 1), (5.0, 10), (2.0, 10), (1.0, 10), (1.0, 100)]


def dp_sweep(guesses: int = 1000) -> list[dict[str, Any]]:
    """``dp_audit`` of ClipNoiseMechanism(C = 1, σ) over ``rounds`` (full participation,
    central noise; ``2·guesses`` canaries), beside the accountant's ε it could refute."""
    out = []
    for sigma, rounds in SWEEP:
        r = dp_audit(1.0, sigma, rounds, 1e-5, guesses=guesses)
        acc = r.metrics["claimed_epsilon"]
        out.append(
            {
                "noise_multiplier": sigma,
                "rounds": rounds,
                "epsilon_lower_bound": r.value,
                "accountant_epsilon": None if acc == float("inf") else acc,
                "correct": r.details["correct"],
                "guesses": r.details["guesses"],
                "canaries": r.details["canaries"],
                "max_lower_bound": r.details["max_lower_bound_for_these_guesses"],
            }
        )
    return out


def sweep_table(sweep: list[dict[str, Any]]) -> str:
    lines = [
        "| σ | rounds | canaries | correct / guesses | ε lower bound (one run) | max bound "
        "for these guesses | accountant ε (RDP, δ = 1e-5) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sweep:
        acc = (
            "∞ (no noise)" if r["accountant_epsilon"] is None else f"{r['accountant_epsilon']:.2f}"
        )
        lines.append(
            f"| {r['noise_multiplier']} | {r['rounds']} | {r['canaries']} | {r['correct']} / "
            f"{r['guesses']} | {r['epsilon_lower_bound']:.2f} | {r['max_lower_bound']:.2f} | "
            f"{acc} |"
        )
    return "\n".join(lines) + "\n"


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _fmt_adv(row: dict[str, Any]) -> str:
    """``value (advantage over the naive baseline)``; rows saved before baselines: value."""
    if row["value"] is None or row.get("advantage") is None:
        return _fmt(row["value"])
    return f"{row['value']:.3f} ({row['advantage']:+.3f})"


def summary_tables(rows: list[dict[str, Any]], seed: int = 0) -> str:
    """Per dataset: one line per (algorithm, protocol) cell with its headline numbers."""
    out = []
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        head = [
            r
            for r in rows
            if r["dataset"] == ds and r.get("primary", True) and r.get("seed", seed) == seed
        ]
        attacks = list(dict.fromkeys(r["attack"] for r in head))
        out += [f"### {ds}", ""]
        cols = " | ".join(f"{a} ({next(r['metric'] for r in head if r['attack'] == a)})"
                          for a in attacks)  # fmt: skip
        out.append(f"| algorithm | protocol | test acc % | ε: what it covers | {cols} |")
        out.append("|" + "---|" * (4 + len(attacks)))
        order = {(a, p + sfx): i for i, (a, p, _, sfx) in enumerate(CELLS)}
        cells = dict.fromkeys((r["algorithm"], r["protocol"]) for r in head)
        for algo, proto in sorted(cells, key=lambda c: order.get(c, len(order))):
            cell = [r for r in head if r["algorithm"] == algo and r["protocol"] == proto]
            by = {r["attack"]: r for r in cell}
            e, covers = epsilon_cells(cell[0])
            if e != "–":
                e += f": {covers}"
            vals = " | ".join("" if a not in by else _fmt_adv(by[a]) for a in attacks)
            out.append(f"| {algo} | {proto} | {100 * cell[0]['accuracy']:.1f} | {e} | {vals} |")
        out.append("")
    return "\n".join(out)


def spread_table(rows: list[dict[str, Any]]) -> str:
    """Mean ± std over seeds of every headline value of cells run with several seeds."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("primary", True) and r["value"] is not None:
            key = (r["dataset"], r["algorithm"], r["protocol"], r["attack"], r["metric"])
            groups.setdefault(key, []).append(r)
    multi = {k: v for k, v in groups.items() if len({r.get("seed") for r in v}) > 1}
    if not multi:
        return ""
    lines = [
        "### Seed spread (cells repeated with --extra-seeds)",
        "",
        "| dataset | algorithm | protocol | attack | metric | seeds | value mean ± std | "
        "accuracy % mean ± std |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (ds, algo, proto, attack, metric), rs in multi.items():
        v = np.array([r["value"] for r in rs])
        a = 100 * np.array([r["accuracy"] for r in rs])
        lines.append(
            f"| {ds} | {algo} | {proto} | {attack} | {metric} | {len(rs)} | "
            f"{v.mean():.3f} ± {v.std():.3f} | {a.mean():.1f} ± {a.std():.1f} |"
        )
    return "\n".join(lines) + "\n"


def secondary_table(rows: list[dict[str, Any]]) -> str:
    """Every metric of every applicable attack (compact)."""
    lines = ["| dataset | algorithm | protocol | attack | metrics |", "|---|---|---|---|---|"]
    keyed: dict[tuple, list[str]] = {}
    for r in rows:
        if r["value"] is None:
            continue
        k = (r["dataset"], r["algorithm"], r["protocol"], r["attack"])
        keyed.setdefault(k, []).append(f"{r['metric']} {r['value']:.3f}")
    for k, ms in keyed.items():
        lines.append(f"| {' | '.join(k)} | {', '.join(ms)} |")
    return "\n".join(lines) + "\n"


def dp_grid_note(rows: list[dict[str, Any]], sweep: list[dict[str, Any]]) -> str:
    """Why the sweep: the canaries and guesses of the grid's ``dp_audit`` rows and the bound
    they cap, against the sweep's."""
    audits = [r for r in rows if r["attack"] == "dp_audit" and r.get("value") is not None
              and r.get("primary", True)]  # fmt: skip
    if not audits or not sweep:
        return ""
    d = audits[0].get("details", {})
    caps = sorted({round(r["details"].get("max_lower_bound_for_these_guesses", 0), 2)
                   for r in audits if r.get("details")})  # fmt: skip
    full = sum(1 for r in audits if r.get("details", {}).get("correct") is not None
               and r["details"]["correct"] == r["details"].get("guesses"))  # fmt: skip
    return (
        f"The grid's `dp_audit` rows use {d.get('canaries')} canaries and {d.get('guesses')} "
        f"guesses, so their bound cannot exceed {' or '.join(f'{c:.2f}' for c in caps)} however "
        f"weak the privacy; {full} of the {len(audits)} rows reach it (every guess correct). "
        "This sweep "
        f"uses {sweep[0]['canaries']} canaries and {sweep[0]['guesses']} guesses on the same "
        "mechanism (C = 1) to show where the one-run bound is informative."
    )


def write_outputs(payload: dict[str, Any], notes_path: Path | None = None) -> None:
    if "dp_audit_sweep" not in payload:  # cheap (seconds): computed once, then stored
        payload["dp_audit_sweep"] = dp_sweep()
        save(payload, OUT / f"{NAME}.json")
    active = [r for r in payload["rows"] if r.get("adversary") == ADVERSARY]
    all_rows = [r for r in payload["rows"] if r.get("adversary") != ADVERSARY]
    st = payload.get("settings", {})
    rows = [r for r in all_rows if r.get("seed", st.get("seed", 0)) == st.get("seed", 0)]
    md = [
        "# Privacy audit: attacks × protocol stacks",
        "",
        section(NAME, "lead"),
        "",
        "## Headline numbers",
        "",
        "Each attack's headline value (AUC unless named) and, in brackets, its advantage over "
        "the attack's naive baseline; n/a: the attack does not apply to that stack (the "
        "reason is in the last table). Test accuracy in %; ε and what it covers where a DP "
        "mechanism runs.",
        "",
        summary_tables(rows, st.get("seed", 0)),
        "## Conclusion",
        "",
        section(NAME, "conclusion"),
        "",
        f"![attacks × stacks and the accuracy cost of DP]({NAME}.png)",
        "",
        "## Settings",
        "",
        f"K = {st.get('clients')} clients, {st.get('partition')} partition, seed "
        f"{st.get('seed')}, FedAvg {st.get('rounds')} rounds (FedSGD GCN), central "
        f"{st.get('central_rounds')} epochs, FedStruct = Hop2Vec with the Table 5 preset, "
        "FedGCN 2-hop, FedGLS on its own preset. Command: `python -m benchmarks.privacy_audit` "
        "(or `securefgl audit ...` for one grid).",
        "",
        section(NAME, "settings"),
        "",
        spread_table(all_rows),
        "## DP audit of the clip-and-noise mechanism (one run, Dirac canaries)",
        "",
        dp_grid_note(rows, payload["dp_audit_sweep"]),
        "",
        sweep_table(payload["dp_audit_sweep"]),
        *(ACTIVE_SERVER_HEAD + [active_server_table(active)] if active else []),
        "## Published ballparks",
        "",
        "| attack | published |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in BALLPARK.items()],
        "",
        "## Reading the numbers (seed 0 unless stated)",
        "",
        section(NAME, "reading"),
        "",
        "## All metrics",
        "",
        secondary_table(rows),
        "## Every headline row (with adversary and not-applicable reasons)",
        "",
        markdown_table(rows),
    ]
    write_text(OUT / f"{NAME}.md", "\n".join(md))
    plot(rows, OUT / f"{NAME}.png")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Per dataset a heat map of the attacks (columns) on every stack (rows): each cell's
    headline value, coloured by its advantage over the attack's naive baseline; below, the
    test accuracy of every DP cell beside the same algorithm without protection."""
    from matplotlib.colors import TwoSlopeNorm

    plt = pyplot()
    head = [r for r in rows if r.get("primary", True) and r["attack"] != "dp_audit"]
    datasets = list(dict.fromkeys(r["dataset"] for r in head))
    attacks = list(dict.fromkeys(r["attack"] for r in head))
    order = {(a, p + sfx): i for i, (a, p, _, sfx) in enumerate(CELLS)}
    cells = sorted(dict.fromkeys((r["algorithm"], r["protocol"]) for r in head),
                   key=lambda c: order.get(c, len(order)))  # fmt: skip
    if not head:
        return
    fig = plt.figure(figsize=(9 * len(datasets) + 1, 15))
    grid = fig.add_gridspec(2, len(datasets), height_ratios=[3, 1.2], hspace=0.35, wspace=0.6)
    norm = TwoSlopeNorm(vmin=-0.5, vcenter=0.0, vmax=0.5)
    cmap = plt.get_cmap("RdBu_r")
    image = None
    for j, ds in enumerate(datasets):
        ax = fig.add_subplot(grid[0, j])
        by = {(r["algorithm"], r["protocol"], r["attack"]): r for r in head if r["dataset"] == ds}
        adv = np.full((len(cells), len(attacks)), np.nan)
        for i, (algo, proto) in enumerate(cells):
            for k, attack in enumerate(attacks):
                r = by.get((algo, proto, attack))
                if r is not None and r["value"] is not None and r.get("advantage") is not None:
                    adv[i, k] = r["advantage"]
        ax.set_facecolor("white")
        image = ax.imshow(adv, cmap=cmap, norm=norm, aspect="auto")
        for i, (algo, proto) in enumerate(cells):
            for k, attack in enumerate(attacks):
                r = by.get((algo, proto, attack))
                if r is None:
                    continue
                if r["value"] is None:
                    ax.add_patch(plt.Rectangle((k - 0.5, i - 0.5), 1, 1, color="0.88"))
                    ax.text(k, i, "n/a", ha="center", va="center", fontsize=7, color="0.4")
                else:
                    strong = abs(adv[i, k]) > 0.3 if not np.isnan(adv[i, k]) else False
                    ax.text(k, i, f"{r['value']:.2f}", ha="center", va="center", fontsize=7.5,
                            color="white" if strong else "black")  # fmt: skip
        metric = {r["attack"]: r["metric"] for r in head}
        ax.set_xticks(range(len(attacks)), [f"{a}\n({metric[a]})" for a in attacks],
                      rotation=40, ha="right", fontsize=8)  # fmt: skip
        acc = {(r["algorithm"], r["protocol"]): r["accuracy"] for r in head
               if r["dataset"] == ds}  # fmt: skip
        ax.set_yticks(range(len(cells)),
                      [f"{a} / {p} ({100 * acc[(a, p)]:.0f} %)" if (a, p) in acc else f"{a} / {p}"
                       for a, p in cells], fontsize=8)  # fmt: skip
        ax.set_title(f"{ds}: attack value on each stack (test accuracy in brackets)",
                     fontsize=10)  # fmt: skip
        ax.set_xticks(np.arange(-0.5, len(attacks)), minor=True)
        ax.set_yticks(np.arange(-0.5, len(cells)), minor=True)
        ax.grid(which="minor", color="white", lw=1)
        ax.tick_params(which="minor", length=0)
    if image is not None:
        bar = fig.colorbar(image, ax=[fig.axes[j] for j in range(len(datasets))],
                           fraction=0.02, pad=0.01)  # fmt: skip
        bar.set_label("advantage over the attack's naive baseline (red: leaks)")
    ax = fig.add_subplot(grid[1, :])
    dp = [
        c
        for c in cells
        if any(r["epsilon"] is not None for r in head if (r["algorithm"], r["protocol"]) == c)
    ]
    markers = ("o", "s", "^", "D")
    for j, ds in enumerate(datasets):
        acc = {(r["algorithm"], r["protocol"]): r for r in head if r["dataset"] == ds}
        xs = [100 * acc[c]["accuracy"] if c in acc else np.nan for c in dp]
        base = [100 * acc[(a, "plain")]["accuracy"] if (a, "plain") in acc else np.nan
                for a, _ in dp]  # fmt: skip
        ys = np.arange(len(dp)) + (j - (len(datasets) - 1) / 2) * 0.2
        ax.scatter(base, ys, marker="|", s=200, color=f"C{j}", alpha=0.6,
                   label=f"{ds}: the same algorithm, plain")  # fmt: skip
        ax.scatter(xs, ys, marker=markers[j % 4], color=f"C{j}", label=f"{ds}: with the mechanism")
        for x, b, y in zip(xs, base, ys, strict=True):
            ax.plot([b, x], [y, y], color=f"C{j}", lw=0.8, alpha=0.5)
    eps = {c: epsilon_cells(next(r for r in head if (r["algorithm"], r["protocol"]) == c
                                 and r["epsilon"] is not None))[0] for c in dp}  # fmt: skip
    ax.set_yticks(range(len(dp)), [f"{a} / {p}: ε = {eps[(a, p)]}" for a, p in dp], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("test accuracy (%)")
    ax.set_title("Accuracy cost of each DP mechanism (ε: client-level accountant, or edge-level)",
                 fontsize=10)  # fmt: skip
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    save_figure(fig, path, dpi=110, tight=False)


ACTIVE_SERVER_HEAD = [
    "## Active server (a server that lies)",
    "",
    "Each attack replaces the server's side of a protocol and runs the library's own clients "
    "(`attacks/active_server`; `python -m benchmarks.privacy_audit --active-server`). "
    "**recovered**: the server read one client's input; **corrupted**: the clients accepted a "
    "result the server altered; refused: an honest client detected the lie first (the first "
    "refusal is named). `honest-but-curious`: the protocols for a server that follows them; "
    "`malicious`: "
    "`--threat-model malicious` (signed messages and consistency checks, docs/protocols.md).",
    "",
]


def run_active_server(seed: int = 0) -> dict[str, Any]:
    """Merge fresh active-server rows into the stored audit (other rows untouched)."""
    path = OUT / f"{NAME}.json"
    payload = load(path)
    payload["rows"] = merge_rows(payload["rows"], active_server_rows(seed))
    save(payload, path)
    return payload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", type=lambda s: s.split(","), default=["Cora", "CiteSeer"])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--partition", default="louvain")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--central-rounds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="the seed of the full grid")
    parser.add_argument(
        "--extra-seeds",
        type=lambda t: [int(x) for x in t.split(",") if x],
        default=[],
        help="more seeds for the SEED_CELLS (seed spread table)",
    )
    parser.add_argument("--quick", action="store_true", help="a 4-cell grid per dataset")
    parser.add_argument("--fresh", action="store_true", help="ignore the existing JSON")
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument(
        "--active-server", action="store_true",
        help="run only the active-server audit; merge its rows into the JSON and re-render",
    )  # fmt: skip
    args = parser.parse_args()
    notes = note_path(NAME)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.active_server:
        write_outputs(run_active_server(args.seed), notes)
        return
    if args.render_only:
        write_outputs(load(OUT / f"{NAME}.json"), notes)
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)  # 2 shared cores: one thread per process
    write_outputs(run(args), notes)


if __name__ == "__main__":
    main()
