"""Federated graph recommendation: FeSoG / FedGNN / a centralised GNN on FilmTrust, Ciao and
Epinions beside FeSoG's Table 4 (Liu et al., ACM TIST 2022), privacy sweeps with the
interaction-inference AUC beside every point, and wall time per round vs sampled users.

Run: ``python -m benchmarks.reproduce_recommendation [--parts table,movielens,sweeps,timing]
[--datasets FilmTrust,Ciao,Epinions] [--seeds 0,1,2]`` with ``SECUREFGL_DATA`` set (FedGNN on
MovieLens-100K's u1 split beside the FedGNN paper: ``movielens``; ``--movielens-runs`` picks
runs of ``MOVIELENS_RUNS``).
Writes ``benchmarks/results/recommendation{.json,.md,_sweeps.png,_timing.png}`` and
``recommendation_timing.json``; ``--render-only`` rewrites Markdown and plots from the JSON.

Protocol (as FeSoG's released code): embedding size 8, lr 0.1 (and 0.05: ``LR_CANDIDATES``),
weight decay 1e-3, 256 users per round, validation every 20 rounds, test RMSE/MAE at the best
validation RMSE, stop after 5 evaluations without improvement (or at the time budget per run;
``--max-rounds`` only bounds a run that never stops); per-user 60/20/20 split. A table run
saves itself every ``CHECKPOINT_EVERY`` evaluations (a MovieLens run every
``MOVIELENS_CHECKPOINT_EVERY``) under ``$SECUREFGL_CACHE/recommendation-checkpoints`` and a
restart resumes it.
FilmTrust uses FeSoG's preprocessing (users in the trust network, ratings 2r − 1 ∈ 0..7).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from attacks.interaction_inference import interaction_inference
from benchmarks.harness.notes import load_data
from benchmarks.harness.ratings import load_views
from benchmarks.harness.results import locked, read_json, write_json
from benchmarks.reproduce_recommendation.report import DATASETS, OUT, REPEAT_NOTE, render
from securefgl.algorithms.recommendation.central import train_central
from securefgl.algorithms.recommendation.fedgnn import user_offsets
from securefgl.algorithms.recommendation.ldp import LDPConfig
from securefgl.algorithms.recommendation.settings import aggregating
from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig, RecResult
from securefgl.data.datasets import cache_dir
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import load_ratings

JSON = OUT / "recommendation.json"
TIMING = OUT / "recommendation_timing.json"
RUNS = OUT / "recommendation_runs.json"  # the table's per-seed runs (resumable)

# FeSoG Table 4 (benchmarks/data/fesog_paper.json): (dataset, method) -> (RMSE, MAE);
# "central" = GraphRec, the GNN recommender among the paper's non-federated baselines.
PAPER = {
    (dataset, method): (v[0], v[1])
    for dataset, methods in load_data("fesog_paper")["values"].items()
    for method, v in methods.items()
}
FESOG_LDP = LDPConfig("heuristic", clip=0.3, lam=0.1)  # FeSoG defaults
# FedGNN as run by the FeSoG authors (FedGNN/main.py: clip 0.1, laplace_lambda 0.1, i.e.
# ε = 2δ/λ = 2 per coordinate); their 1000 pseudo items are in the pseudo-item sweep only
FEDGNN_LDP = LDPConfig("laplace", clip=0.1, lam=0.1)
# server lr: FeSoG's 0.1; FedGNN 0.3, chosen on FilmTrust from {0.1, 0.3, 1.0} (FeSoG's
# FedGNN baseline runs at lr 1 with 64 users per round; at 0.1 and clip 0.1 it barely moves)
LR = {"fesog": 0.1, "fedgnn": 0.3}
#: other server lrs tried in the main table: per dataset the table keeps the lr with the lowest
#: mean validation RMSE over the seeds; the rest are listed as "lr-selection" rows. FeSoG at
#: 0.05: at 0.1 about one Epinions run in five diverges (the notes' "Why some Epinions FeSoG
#: runs diverge")
LR_CANDIDATES = {"fesog": (0.05,), "fesog-secure": (0.05,), "fesog-secure-own": (0.05,)}
#: table runs stop by validation patience; this cap only bounds a run that never stops
#: (runs an earlier, lower cap stopped are run on, from scratch, by a later grid)
MAX_ROUNDS = 200_000
CHECKPOINT_EVERY = 25  # evaluations between a table run's checkpoints
log = logging.getLogger("reproduce_recommendation")


def privacy_label(cfg: RecConfig) -> str:
    l_ = cfg.ldp
    if l_.mode == "heuristic":
        ldp = f"heuristic LDP δ={l_.clip} λ={l_.lam}"
    elif l_.mode == "laplace":
        ldp = f"Laplace LDP δ={l_.clip} λ={l_.lam} (ε={l_.paper_epsilon:g}/coord)"
    else:
        ldp = "no LDP"
    agg = {"plain": "plain agg", "ideal": "secure agg", "ckks": "CKKS agg", "secagg+": "SecAgg+"}[
        cfg.aggregation
    ]
    extra = " + expansion" if cfg.method == "fedgnn" else ""
    if cfg.method == "fesog" and cfg.uniform_averages:
        agg += ", uniform averages"
    if cfg.method == "fesog" and cfg.own_user_rows:
        agg += ", own user rows"
    return f"{ldp} + {cfg.pseudo_items} pseudo{extra}; {agg}"


def attack(tr: FedRecTrainer, backend: str, rounds: int = 3) -> dict:
    """Magnitude attack on the server's view of fresh rounds (no update applied)."""
    res = [
        interaction_inference(tr.observe(10_000 + r, backend), tr.views, "magnitude", k=10, seed=r)
        for r in range(rounds)
    ]

    def nanmean(v: list[float]) -> float:
        v = [x for x in v if np.isfinite(x)]
        return float(np.mean(v)) if v else float("nan")

    mean = {
        k: nanmean([getattr(x, k) for x in res]) for k in ("auc", "auc_uploaded", "precision_at_k")
    }
    return {
        "attack_auc": mean["auc"],
        "attack_auc_uploaded": mean["auc_uploaded"],
        "attack_precision_at_10": mean["precision_at_k"],
        "attack_view": res[0].view,
    }


def fed_row(
    views: ClientViews,
    cfg: RecConfig,
    experiment: str,
    attack_backends=("plain",),
    checkpoint: Path | None = None,
    checkpoint_every: int = CHECKPOINT_EVERY,
) -> list[dict]:
    tr = FedRecTrainer(views, cfg)
    res = tr.run(checkpoint=checkpoint, checkpoint_every=checkpoint_every)
    rows = []
    for be in attack_backends:
        shown = replace(cfg, **aggregating(be))
        p = (
            PAPER.get((views.name, cfg.method), (None, None))
            if experiment == "table"
            else (None, None)
        )
        row = {
            "experiment": experiment,
            "dataset": views.name,
            "method": method_label(cfg),
            "privacy": privacy_label(shown),
            "seed": cfg.seed,
            "rmse": res.test_rmse,
            "mae": res.test_mae,
            "paper_rmse": p[0],
            "paper_mae": p[1],
            "clip": cfg.ldp.clip,
            "lam": cfg.ldp.lam,
            "ldp": cfg.ldp.mode,
            "pseudo_items": cfg.pseudo_items,
            "offset": cfg.offset,
            "backend": be,
            "val_rmse": res.val_rmse,
            "rounds": res.rounds,
            "seconds": round(res.seconds, 1),
            "sec_per_round": res.seconds_per_round,
            "lr": cfg.lr,
            "eval_every": cfg.eval_every,
            "budget_s": cfg.time_budget_s,
            "stopped_by_budget": stopped_by_budget(res, cfg),
            "stopped_by_round_cap": res.rounds >= cfg.rounds,
            "val_history": [round(float(h["val_rmse"]), 4) for h in res.history],
            **{k: res.detail.get(k) for k in ("rmse_warm", "rmse_cold", "cold_share")},
            "epsilon_per_coordinate": cfg.ldp.paper_epsilon,
            "epsilon_worst_user": res.privacy.get("epsilon_max_user"),
            "max_releases": res.privacy.get("max_releases"),
            **attack(tr, "ideal" if be != "plain" else "plain"),
        }
        if be != cfg.aggregation:
            row["note"] = REPEAT_NOTE
        rows.append(row)
        log.info(
            "%s %s %s seed %d rmse %.4f mae %.4f auc %.3f (%d rounds, %ds)",
            views.name,
            row["method"],
            row["privacy"],
            cfg.seed,
            row["rmse"],
            row["mae"],
            row["attack_auc"],
            res.rounds,
            res.seconds,
        )
    return rows


def shown_as(cfg: RecConfig, experiment: str) -> tuple[str, ...]:
    """The aggregations a run's rows show: its own; a plain FedGNN table run also as the
    ideal functionality (the same sums; FeSoG's secure averages differ: a run of its own)."""
    if cfg.aggregation == "plain" and experiment == "table" and cfg.method == "fedgnn":
        return ("plain", "ideal")
    return (cfg.aggregation,)


def method_label(cfg: RecConfig) -> str:
    label = "fedgnn + user-mean offset" if cfg.offset == "user-mean" else cfg.method
    return label + (", per-rating loss" if cfg.loss == "sse" else "")


def stopped_by_budget(res: RecResult, cfg: RecConfig) -> bool:
    """True when the time budget, not the validation patience or the round cap, ended it."""
    if cfg.time_budget_s is None or res.rounds >= cfg.rounds:
        return False
    evals = res.history
    best = min(range(len(evals)), key=lambda i: evals[i]["val_rmse"]) if evals else 0
    return len(evals) - 1 - best <= cfg.patience


def central_row(views: ClientViews, budget: float | None, seed: int) -> dict:
    res = train_central(views, epochs=200, lr=0.01, time_budget_s=budget, seed=seed)
    p = PAPER.get((views.name, "central"), (None, None))
    log.info("%s central seed %d rmse %.4f mae %.4f", views.name, seed, res.test_rmse, res.test_mae)
    return {
        "experiment": "table",
        "dataset": views.name,
        "method": "central",
        "privacy": "none (centralised, not federated)",
        "seed": seed,
        "rmse": res.test_rmse,
        "mae": res.test_mae,
        "paper_rmse": p[0],
        "paper_mae": p[1],
        "attack_auc": None,
        "val_rmse": res.val_rmse,
        "rounds": res.rounds,
        "seconds": round(res.seconds, 1),
        **{k: res.detail.get(k) for k in ("rmse_warm", "rmse_cold", "cold_share")},
        "note": "FeSoG architecture trained centrally with Adam, plus the mean training "
        "rating as offset; paper column = GraphRec",
    }


def user_mean_row(views: ClientViews, seed: int) -> dict:
    """No model: every test rating predicted by the user's own mean training rating (what
    FedGNN's user-mean offset alone gives)."""
    u, _, r = views.eval_pairs("test")
    pred = user_offsets(views, np.arange(views.n_users), "user-mean").numpy()[u]
    return {
        "experiment": "table",
        "dataset": views.name,
        "method": "user mean (no model)",
        "privacy": "none (each user's own mean training rating)",
        "seed": seed,
        "rmse": float(np.sqrt(np.mean((pred - r) ** 2))),
        "mae": float(np.mean(np.abs(pred - r))),
        "paper_rmse": None,
        "paper_mae": None,
        "attack_auc": None,
        "rounds": 0,
        "note": "a reference for what a model adds beyond each user's mean",
    }


def save_rows(new: list[dict]) -> None:
    """Upsert summary rows into ``recommendation.json``, merging what other grid processes
    saved meanwhile (under the runs file's lock)."""
    with locked(RUNS.with_suffix(".lock")):
        write_json(JSON, upsert(read_json(JSON, []), new), indent=1, default=float, newline=True)


def _run_key(r: dict) -> tuple:
    return (r["experiment"], r["dataset"], r.get("run"), r["seed"])


def record_runs(new: list[dict]) -> None:
    """Add per-seed runs to ``recommendation_runs.json`` (replacing earlier runs of the same
    experiment, dataset, run and seed) and refresh the summaries built from them, merging
    what other grid processes saved meanwhile (several may run at once)."""
    with locked(RUNS.with_suffix(".lock")):
        redone = {_run_key(r) for r in new}
        runs = [r for r in read_json(RUNS, []) if _run_key(r) not in redone] + new
        write_json(RUNS, runs, indent=1, default=float, newline=True)
        rows = table_rows(read_json(JSON, []), runs)
        write_json(JSON, rows, indent=1, default=float, newline=True)


def done_runs(max_rounds: int | None = None) -> set[tuple]:
    """(experiment, dataset, run, seed) of every run saved so far (what a restart skips),
    except runs that a round cap below ``max_rounds`` stopped: those go on (again)."""
    return {_run_key(r) for r in read_json(RUNS, [])
            if not (max_rounds and r.get("stopped_by_round_cap") and r["rounds"] < max_rounds)}


def checkpoint_dir(*key: object) -> Path:
    """Where a table run saves itself (removed once the run is recorded)."""
    return cache_dir() / "recommendation-checkpoints" / "-".join(map(str, key))


KEY = ("experiment", "dataset", "method", "privacy", "lr")


def upsert(rows: list[dict], new: list[dict]) -> list[dict]:
    keys = {tuple(r.get(k) for k in KEY) for r in new}
    return [r for r in rows if tuple(r.get(k) for k in KEY) not in keys] + new


#: the main table's runs: method -> (RecConfig changes); FedGNN as the FeSoG authors ran it,
#: and with our flagged user-mean offset for items without training ratings. FeSoG under
#: secure aggregation is a run of its own (uniform averages); FedGNN's users all weigh 1, so
#: its secure row is its plain run seen through the ideal functionality
TABLE_METHODS = {
    "fesog": {"method": "fesog", "ldp": FESOG_LDP},
    "fesog-secure": {
        "method": "fesog", "ldp": FESOG_LDP, "social_rows": "neighbours", **aggregating("ideal")
    },
    "fesog-secure-own": {
        "method": "fesog", "ldp": FESOG_LDP, "social_rows": "own", **aggregating("ideal")
    },
    "fedgnn": {"method": "fedgnn", "ldp": FEDGNN_LDP},
    "fedgnn-offset": {"method": "fedgnn", "ldp": FEDGNN_LDP, "offset": "user-mean"},
    "fedgnn-offset-sse": {
        "method": "fedgnn",
        "ldp": FEDGNN_LDP,
        "offset": "user-mean",
        "loss": "sse",
    },
}
TABLE_METHODS |= {
    f"{m}-lr{lr:g}": {**TABLE_METHODS[m], "lr": lr}
    for m, lrs in LR_CANDIDATES.items()
    for lr in lrs
}
#: one-seed ablation of FedGNN: what LDP costs with and without the offset, and the
#: per-rating loss without the offset
ABLATION = {
    "fedgnn-sse": {"method": "fedgnn", "ldp": FEDGNN_LDP, "loss": "sse"},
    "fedgnn-no-ldp": {"method": "fedgnn", "ldp": LDPConfig("none")},
    "fedgnn-offset-no-ldp": {"method": "fedgnn", "ldp": LDPConfig("none"), "offset": "user-mean"},
}
NUMERIC = ("rmse", "mae", "val_rmse", "rmse_warm", "rmse_cold", "seconds", "rounds",
           "attack_auc", "attack_auc_uploaded", "attack_precision_at_10")  # fmt: skip


def select_lr(runs: list[dict]) -> list[dict]:
    """Main-table runs of one (dataset, method, privacy) at several server lrs: keep, as
    ``table``, the lr with the lowest mean validation RMSE over the seeds both lrs ran; mark
    the others ``lr-selection``. Chosen on validation only; test RMSE plays no part."""
    groups: dict[tuple, dict[float, list[dict]]] = {}
    for r in runs:
        if r["experiment"] == "table" and r.get("lr") is not None:
            key = (r["dataset"], r["method"], r["backend"], r["privacy"])  # one variant
            groups.setdefault(key, {}).setdefault(r["lr"], []).append(r)
    rejected: set[int] = set()
    for by_lr in groups.values():
        if len(by_lr) < 2:
            continue
        common = set.intersection(*({m["seed"] for m in ms} for ms in by_lr.values()))
        if not common:
            continue
        mean_val = {
            lr: float(np.mean([m["val_rmse"] for m in ms if m["seed"] in common]))
            for lr, ms in by_lr.items()
        }
        best = min(mean_val, key=mean_val.__getitem__)
        rejected |= {id(m) for lr, ms in by_lr.items() if lr != best for m in ms}
    return [{**r, "experiment": "lr-selection"} if id(r) in rejected else r for r in runs]


def table_rows(rows: list[dict], runs: list[dict]) -> list[dict]:
    """Replace the main table's, ablation's and lr selection's rows by summaries of the runs."""
    exps = ("table", "ablation", "lr-selection", "movielens")
    runs = select_lr([r for r in runs if r["experiment"] in exps])
    return [r for r in rows if r["experiment"] not in exps] + summarise(runs)


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (experiment, dataset, method, privacy): means over seeds, RMSE's std."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault(tuple(r.get(k) for k in KEY), []).append(r)
    out = []
    for members in groups.values():
        row = dict(members[0])
        row.pop("seed", None)
        row.pop("val_history", None)  # per run (recommendation_runs.json)
        for k in NUMERIC:
            vals = [m[k] for m in members if isinstance(m.get(k), int | float)]
            row[k] = float(np.mean(vals)) if vals else None
        row["rmse_std"] = float(np.std([m["rmse"] for m in members]))
        row["mae_std"] = float(np.std([m["mae"] for m in members]))
        row["seeds"] = len(members)
        ordered = sorted(members, key=lambda m: m["seed"])
        row["seed_list"] = [m["seed"] for m in ordered]
        row["rmse_seeds"] = [float(m["rmse"]) for m in ordered]
        row["any_stopped_by_budget"] = any(m.get("stopped_by_budget") for m in members)
        row["any_stopped_by_round_cap"] = any(m.get("stopped_by_round_cap") for m in members)
        row.pop("stopped_by_round_cap", None)
        out.append(row)
    return out


def run_table(
    datasets: list[str],
    budget: float | None,
    methods: tuple[str, ...],
    seeds: list[int],
    eval_every: int = 20,
    max_rounds: int = MAX_ROUNDS,
) -> None:
    """Resumable: each (dataset, method, seed) run is kept in ``recommendation_runs.json``
    and a run in progress saves itself every ``CHECKPOINT_EVERY`` evaluations (a restart
    resumes it); the main table's rows are their means (``seeds``, ``rmse_std``)."""
    done = done_runs(max_rounds)
    table_runs = TABLE_METHODS | {"central": {}, "user-mean": {}}
    todo = [(exp, name, m, seed) for name in datasets
            for exp, table in (("table", table_runs), ("ablation", ABLATION))
            for m in methods if m in table
            for seed in (seeds if exp == "table" else seeds[:1])]  # fmt: skip
    for exp, name, m, seed in todo:
        if (exp, name, m, seed) in done:
            continue
        views = load_views(name, seed)
        if m == "central":
            new = [central_row(views, budget, seed)]
        elif m == "user-mean":
            new = [user_mean_row(views, seed)]
        else:
            spec = (TABLE_METHODS | ABLATION)[m]
            # evaluate at least once per pass over the users: on Epinions (87 rounds per
            # pass) early validation swings widely and 5 evaluations of 20 rounds stopped a
            # FeSoG run at round 140
            every = max(eval_every, -(-views.active_users().size // RecConfig.users_per_round))
            spec = {"lr": LR[spec["method"]], **spec}
            cfg = RecConfig(rounds=max_rounds, time_budget_s=budget, eval_every=every,
                            pseudo_items=10, seed=seed, **spec)  # fmt: skip
            saved = checkpoint_dir(exp, name, m, seed)
            new = fed_row(views, cfg, exp, shown_as(cfg, exp), saved)
        record_runs([{**r, "run": m} for r in new])
        if m not in ("central", "user-mean"):
            shutil.rmtree(saved, ignore_errors=True)


#: FedGNN on MovieLens-100K (u1 split) beside the FedGNN paper's Table 3 (RMSE 0.920):
#: the paper's setting (§4.1: star graph, GAT, 256-d, MSE, SGD lr 0.01, 128 users per round,
#: M = 1000, δ = 0.1, λ = 0.2) with our user-mean offset and items initialised at 0.05·N(0, 1)
#: (without them the predictions start near 0: benchmarks/notes/recommendation.md), and ours
#: (two-level GAT, 8-d, per-user RMSE, lr 0.3, M = 10, δ = λ = 0.1) with the offset, per-user
#: RMSE or the per-rating loss ("sse"; its lr chosen on validation RMSE: the notes)
FEDGNN_PAPER_ML100K = 0.920
MOVIELENS_RUNS = {
    "fedgnn + user-mean offset": {
        "lr": LR["fedgnn"], "pseudo_items": 10, "ldp": FEDGNN_LDP, "offset": "user-mean",
    },
    "fedgnn + user-mean offset, per-rating loss": {
        "lr": LR["fedgnn"], "loss": "sse", "pseudo_items": 10, "ldp": FEDGNN_LDP,
        "offset": "user-mean",
    },
    "fedgnn (paper setting + user-mean offset)": {
        "arch": "star", "loss": "mse", "dim": 256, "lr": 0.01, "users_per_round": 128,
        "pseudo_items": 1000, "ldp": LDPConfig("laplace", clip=0.1, lam=0.2),
        "offset": "user-mean", "item_std": 0.05,
    },
}  # fmt: skip


#: MovieLens runs save themselves every 5 evaluations (100 rounds: ~10 min in the paper's
#: setting)
MOVIELENS_CHECKPOINT_EVERY = 5


def run_movielens(seeds: list[int], root: str | None, names: list[str] | None = None) -> None:
    """Resumable, like :func:`run_table` (the runs file keeps every seed; a run in progress
    resumes from its checkpoint). ``names``: only these of ``user-mean`` and
    :data:`MOVIELENS_RUNS`."""
    from securefgl.data.rating_splits import published_split

    done = done_runs()
    data = load_ratings("MovieLens100K", root)
    for name, spec in {"user-mean": {}, **MOVIELENS_RUNS}.items():
        for seed in seeds:
            if ("movielens", "MovieLens100K", name, seed) in done or (names and name not in names):
                continue
            views = ClientViews(data, published_split(data, "u1", root, seed=seed))
            saved = checkpoint_dir("movielens", "MovieLens100K", name, seed)
            if name == "user-mean":
                new = [{**user_mean_row(views, seed), "experiment": "movielens"}]
            else:
                cfg = RecConfig(method="fedgnn", rounds=20000, eval_every=20, seed=seed, **spec)
                new = [{**r, "method": name, "paper_rmse": FEDGNN_PAPER_ML100K}
                       for r in fed_row(views, cfg, "movielens", checkpoint=saved,
                                        checkpoint_every=MOVIELENS_CHECKPOINT_EVERY)]  # fmt: skip
            for r in new:
                r |= {"run": name, "split": "u1 (20 % of u1.base for validation)"}
            record_runs(new)
            shutil.rmtree(saved, ignore_errors=True)


def run_sweeps(name: str, budget: float) -> None:
    views = load_views(name)
    base = RecConfig(rounds=5000, time_budget_s=budget)
    for method, mode in (("fesog", "heuristic"), ("fedgnn", "laplace")):
        base = replace(base, lr=LR[method])
        for clip in (0.1, 0.3, 0.5):
            for lam in (0.1, 0.3, 1.0):
                cfg = replace(base, method=method, ldp=LDPConfig(mode, clip, lam), pseudo_items=10)
                save_rows(fed_row(views, cfg, "sweep_ldp"))
        default = FESOG_LDP if method == "fesog" else FEDGNN_LDP
        for q in (0, 10, 50, 200, 1000):
            cfg = replace(base, method=method, ldp=default, pseudo_items=q)
            save_rows(fed_row(views, cfg, "sweep_pseudo"))
        cfg = replace(base, method=method, ldp=LDPConfig("none"), pseudo_items=0)
        save_rows(fed_row(views, cfg, "sweep_pseudo"))  # no protection at all


def run_timing(out: list[dict]) -> list[dict]:
    """Seconds per round (mean of 3 after a warm-up round) vs sampled users."""
    for name, sizes, backends in (
        ("Epinions", (100, 300, 1000, 3000, 10000), ("plain", "ideal")),
        ("Ciao", (16, 64, 256), ("ckks", "secagg+")),
    ):
        views = load_views(name)
        for method in ("fesog", "fedgnn"):
            for be in backends:
                for b in sizes:
                    ldp = FESOG_LDP if method == "fesog" else FEDGNN_LDP
                    cfg = RecConfig(method=method, users_per_round=b, ldp=ldp, **aggregating(be))
                    tr = FedRecTrainer(views, cfg)
                    tr.round(0)
                    secs, nbytes = [], []
                    for r in range(1, 4 if be in ("plain", "ideal") else 2):
                        t = time.perf_counter()
                        view = tr.round(r)
                        secs.append(time.perf_counter() - t)
                        nbytes.append(view.bytes_up)
                    row = {
                        "dataset": name,
                        "method": method,
                        "backend": be,
                        "users": b,
                        "sec_per_round": float(np.mean(secs)),
                        "mb_per_round": float(np.mean(nbytes)) / 1e6,
                    }
                    log.info("timing %s", row)
                    out = [
                        r
                        for r in out
                        if (r["dataset"], r["method"], r["backend"], r["users"])
                        != (name, method, be, b)
                    ] + [row]
                    write_json(TIMING, out, indent=1, newline=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--parts", default="table,movielens,sweeps,timing")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--sweep-dataset", default="FilmTrust")
    parser.add_argument(
        "--methods",
        default=",".join(["user-mean", "central", *TABLE_METHODS, *ABLATION]),
        help="table (and ablation) runs",
    )
    parser.add_argument("--seeds", default="0,1,2", help="table seeds (ablation: the first)")
    parser.add_argument("--eval-every", type=int, default=20, help="table: rounds per eval")
    parser.add_argument("--max-rounds", type=int, default=MAX_ROUNDS, help="table: round cap")
    parser.add_argument(
        "--budget", type=float, default=None, help="seconds per table run (default: none)"
    )
    parser.add_argument("--sweep-budget", type=float, default=150.0, help="seconds per sweep run")
    parser.add_argument(
        "--movielens-runs", default="", help=f"only these MovieLens runs: {list(MOVIELENS_RUNS)}"
    )
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("securefgl").setLevel(logging.WARNING)
    timing = read_json(TIMING, [])
    parts = set(args.parts.split(","))
    seeds = [int(x) for x in args.seeds.split(",")]
    if not args.render_only:
        if "table" in parts:
            methods = tuple(args.methods.split(","))
            run_table(args.datasets.split(","), args.budget, methods, seeds, args.eval_every,
                      args.max_rounds)  # fmt: skip
        if "movielens" in parts:
            names = args.movielens_runs.split(",") if args.movielens_runs else None
            run_movielens(seeds, None, names)
        if "sweeps" in parts:
            run_sweeps(args.sweep_dataset, args.sweep_budget)
        if "timing" in parts:
            timing = run_timing(timing)
    else:  # the table's rows again from the per-seed runs (any summary added since)
        record_runs([])
    rows = read_json(JSON, [])
    render(rows, timing)


if __name__ == "__main__":
    main()
