"""What row DP costs FeSoG (and FedGNN): test RMSE against the (ε, δ) each run states.

FeSoG (Liu et al., ACM TIST 2022) under the ideal secure sum with its secure defaults
(uniform averages, own user rows), FedGNN (Wu et al. 2021) with ``--methods fedgnn`` and
FedGNN with the user-mean offset and per-rating loss with ``--methods fedgnn-offset``
(:data:`SETTINGS`), with row DP
(:mod:`securefgl.algorithms.recommendation.row_dp`) at each noise multiplier z in
``--noise`` and each scale s in ``--clip-scales`` of the per-part median norms (at
most ``--rows`` item rows a user and round, threshold 3 count-noise stds), beside the same
runs without row DP. Training otherwise: RecConfig's defaults (lr 0.1, weight decay 1e-3,
256 users a round, no LDP: row DP replaces it), up to 2,000 rounds, validation every 20,
patience 5. ``--medians`` prints each method's first-round median part norms, the bounds at
scale 1 (:data:`MEDIAN_NORMS`). For each z the scale is chosen by the mean
validation RMSE over the seeds (never by test); ε is the run's own claim against its
honest-but-curious server (the most active user's rounds, RDP accountant, no sampling
amplification), beside the ε of the same runs against a malicious server (charged at the
fewest noise shares SecAgg's members enforce in a sum it opens). Run:
``SECUREFGL_DATA=... python -m benchmarks.fesog_row_dp [--datasets
FilmTrust] [--methods fesog] [--noise 0.5,2,8] [--clip-scales 0.2,1] [--seeds 0,1,2]``; writes
``benchmarks/results/fesog_row_dp.{json,md,png}`` (resumable per run).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.ratings import load_views
from benchmarks.harness.results import (
    csv_list,
    pyplot,
    read_json,
    save_figure,
    write_json,
    write_text,
)
from protocols.names import MALICIOUS
from securefgl.algorithms.recommendation.fedgnn import user_offsets
from securefgl.algorithms.recommendation.row_dp import RowDPConfig, part_norms
from securefgl.algorithms.recommendation.settings import LDPConfig, aggregating
from securefgl.algorithms.recommendation.trainer import (
    FedRecTrainer,
    RecConfig,
    row_dp_summands,
)

OUT = Path(__file__).parent / "results" / "fesog_row_dp.json"
ROUNDS, PATIENCE, ROWS = 2000, 5, 32
#: each method's RecConfig settings beyond the defaults: fesog and fedgnn without LDP (row
#: DP replaces it); ``fedgnn-offset`` is the recommendation benchmark's "fedgnn + user-mean
#: offset, per-rating loss" (lr 0.3, its Laplace LDP, whose clip keeps the per-rating
#: loss's large gradients stable), the variant that learns beyond the users' own means on
#: MovieLens-100K and Epinions (benchmarks/results/recommendation.md)
SETTINGS: dict[str, dict[str, Any]] = {
    "fesog": {"method": "fesog"},
    "fedgnn": {"method": "fedgnn"},
    "fedgnn-offset": {"method": "fedgnn", "offset": "user-mean", "loss": "sse", "lr": 0.3,
                      "ldp": LDPConfig("laplace", clip=0.1, lam=0.1)},
}
#: the median norm of each part of a method's uploads in its first round (item rows times
#: w_u, user rows, model; FedGNN uploads no user rows), the bounds at scale 1: FilmTrust's
#: for fesog and fedgnn, MovieLens-100K's for fedgnn-offset (``--medians`` measures them;
#: they move by about 2x either way with the seed, which the scales tried cover)
MEDIAN_NORMS = {"fesog": (25.0, 0.5, 2.5), "fedgnn": (0.8, 0.5, 2.5),
                "fedgnn-offset": (3.4, 0.5, 2.2)}  # fmt: skip
METHODS = tuple(SETTINGS)
log = logging.getLogger("fesog_row_dp")


def run_one(
    views: Any, method: str, noise: float, scale: float, rows: int, seed: int
) -> dict[str, Any]:
    """One run (``noise`` 0: no row DP) with the method's ``MEDIAN_NORMS`` × ``scale`` as
    bounds; its RMSEs, ε and length."""
    items, users, model = (m * scale for m in MEDIAN_NORMS[method])
    dp = RowDPConfig(noise, items, users, model, rows) if noise > 0 else RowDPConfig()
    cfg = RecConfig(rounds=ROUNDS, patience=PATIENCE, seed=seed, row_dp=dp,
                    **SETTINGS[method], **aggregating("ideal"))  # fmt: skip
    t0 = time.perf_counter()
    with FedRecTrainer(views, cfg) as tr:
        res = tr.run()
    claim = next((c for c in res.privacy["guarantees"] if c.get("mechanism")), None)
    return {
        "dataset": views.name, "algorithm": method, "noise": noise,
        "clip": scale if noise > 0 else None,
        "rows": rows if noise > 0 else None, "seed": seed,
        "val_rmse": res.val_rmse, "test_rmse": res.test_rmse, "test_mae": res.test_mae,
        "rounds": res.rounds, "stopped": res.stopped,
        "max_releases": res.privacy["max_releases"],
        "epsilon": None if claim is None else claim["epsilon"],
        "delta": None if claim is None else claim["delta"],
        "seconds": time.perf_counter() - t0,
    }  # fmt: skip


def first_round_medians(views: Any, method: str, seed: int = 0) -> dict[str, float]:
    """The median over a first cohort of each part's norm in the method's uploads (no row
    DP, the secure defaults' averages): the bounds' scale-1 values."""
    cfg = RecConfig(seed=seed, **SETTINGS[method], **aggregating("ideal"))
    with FedRecTrainer(views, cfg) as tr:
        up = tr.observe(0, aggregation="plain").per_user
    assert up is not None  # a plain view holds each user's upload
    return {part: float(norms.median()) for part, norms in part_norms(up).items()}


def user_mean_run(views: Any, seed: int) -> dict[str, Any]:
    """No model: each test rating predicted by the user's own mean training rating (nothing
    leaves a device: ε = 0), the reference a private model has to beat."""
    u, _, r = views.eval_pairs("test")
    pred = user_offsets(views, np.arange(views.n_users), "user-mean").numpy()[u]
    return {"dataset": views.name, "method": "user mean", "seed": seed,
            "test_rmse": float(np.sqrt(np.mean((pred - r) ** 2)))}  # fmt: skip


def algorithm(run: dict[str, Any]) -> str:
    """A run's method (rows measured before FedGNN joined are FeSoG's)."""
    return run.get("algorithm", "fesog")


def malicious_epsilon(method: str, noise: float, releases: int) -> float:
    """ε of a row-DP run's most active user against a malicious server: the same releases
    charged at the fewest shares SecAgg's members enforce in an opened sum."""
    cfg = RecConfig(threat_model=MALICIOUS, row_dp=RowDPConfig(noise), **SETTINGS[method],
                    **aggregating("ideal"))  # fmt: skip
    cohort = cfg.users_per_round
    return cfg.row_dp.epsilon(releases, cfg.row_dp_parts, row_dp_summands(cfg, cohort), cohort)


def summary(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per method, dataset and z: the clip scale of the best mean validation RMSE, its test
    RMSE."""
    cells: dict[tuple, list[dict[str, Any]]] = {}
    for r in (r for r in runs if r.get("method") != "user mean"):
        cells.setdefault((algorithm(r), r["dataset"], r["noise"], r["clip"]), []).append(r)
    best: dict[tuple, dict[str, Any]] = {}
    for (method, name, noise, clip), rs in sorted(cells.items(), key=lambda kv: str(kv[0])):
        row = {
            "dataset": name, "algorithm": method, "noise": noise, "clip": clip,
            "seeds": [r["seed"] for r in rs],
            "val_rmse": float(np.mean([r["val_rmse"] for r in rs])),
            "test_rmse": float(np.mean([r["test_rmse"] for r in rs])),
            "test_rmse_std": float(np.std([r["test_rmse"] for r in rs])),
            "epsilon": None if noise == 0 else float(max(r["epsilon"] for r in rs)),
            "epsilon_malicious": None if noise == 0 else max(
                malicious_epsilon(method, noise, r["max_releases"]) for r in rs),
            "rounds": float(np.mean([r["rounds"] for r in rs])),
            "clips_tried": sorted({r["clip"] for r in cells_of(runs, method, name, noise)
                                   if r.get("clip") is not None}),
        }  # fmt: skip
        key = (method, name, noise)
        if key not in best or row["val_rmse"] < best[key]["val_rmse"]:
            best[key] = row
    for name in sorted({r["dataset"] for r in runs}):
        means = [r for r in runs if r["dataset"] == name and r.get("method") == "user mean"]
        if means:
            best[("", name, -1.0)] = {
                "dataset": name, "algorithm": "", "method": "user mean", "noise": None,
                "seeds": [r["seed"] for r in means],
                "test_rmse": float(np.mean([r["test_rmse"] for r in means])),
                "test_rmse_std": float(np.std([r["test_rmse"] for r in means])),
            }  # fmt: skip
    return sorted(best.values(), key=lambda r: (
        r["dataset"], r["algorithm"], -1.0 if r["noise"] is None else r["noise"]))  # fmt: skip


def cells_of(runs: list[dict[str, Any]], method: str, name: str, noise: float) -> list[dict]:
    """The runs of one method, dataset and z (every clip scale)."""
    return [r for r in runs if r.get("method") != "user mean" and algorithm(r) == method
            and (r["dataset"], r["noise"]) == (name, noise)]  # fmt: skip


def render(rows: list[dict[str, Any]]) -> str:
    lines = [
        "# What row DP costs FeSoG (and FedGNN)",
        "",
        "FeSoG under the ideal secure sum with its secure defaults (uniform averages, own "
        "user rows), with row DP (`row_dp_noise` z; at most 32 item rows a user and round, "
        "each part of a user's upload clipped to its bound: item rows times w_u to 25 s, "
        "user rows to 0.5 s, model gradients to 2.5 s; an item row aggregated when its "
        "noisy count reaches 3 noise stds) and without (z = 0). ε at δ = 1e-5 is each "
        "run's own claim against its honest-but-curious server (the most active user's "
        "rounds, RDP accountant, no amplification by sampling; the largest over the seeds), "
        "beside the same runs' ε against a malicious server, which may claim dropouts "
        "(charged at the fewest noise shares SecAgg's members enforce in a sum it opens), "
        "covering everything the "
        "secure aggregation's outputs say of a user: which items it rated, their counts, "
        "its ratings through the sums. The clip scale s is chosen per z by the mean "
        "validation RMSE over the seeds among those tried (never by test; where one was "
        "tried, it is FilmTrust's choice). Mean ± std of test RMSE over the seeds (the "
        "model of the best validation RMSE). FeSoG and FedGNN (lr 0.1) run without their "
        "LDP, which row DP replaces; FedGNN's bounds come from its own first-round medians "
        "(item rows 0.8, model 2.5). fedgnn-offset: FedGNN with the user-mean offset, the "
        "per-rating loss, lr 0.3 and its Laplace LDP (the recommendation benchmark's "
        "variant that learns beyond the users' own means), bounds from its first-round "
        "medians on MovieLens-100K (item rows 3.4, model 2.2; Epinions' are 2.3 and 2.2), "
        "MovieLens-100K on its u1 fold (a seeded 20 % of u1.base for validation).",
        "",
        "| dataset | method | z | s (tried) | ε (δ = 1e-5) | ε, malicious server | test RMSE "
        "| val RMSE | rounds | seeds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("method") == "user mean":
            lines.append(
                f"| {r['dataset']} | user mean (no model; nothing sent) | – | – | 0 | 0 | "
                f"{r['test_rmse']:.3f} ± {r['test_rmse_std']:.3f} | – | – | {len(r['seeds'])} |"
            )
            continue
        eps = "– (no row DP)" if r["epsilon"] is None else f"{r['epsilon']:.3g}"
        mal = "–" if r.get("epsilon_malicious") is None else f"{r['epsilon_malicious']:.3g}"
        clip = (
            "–" if r["clip"] is None else f"{r['clip']:g} ({', '.join(map(str, r['clips_tried']))})"
        )
        lines.append(
            f"| {r['dataset']} | {r['algorithm']} | {r['noise']:g} | {clip} | {eps} | {mal} | "
            f"{r['test_rmse']:.3f} ± {r['test_rmse_std']:.3f} | {r['val_rmse']:.3f} | "
            f"{r['rounds']:.0f} | {len(r['seeds'])} |"
        )
    lines += ["", f"![test RMSE against ε]({OUT.with_suffix('.png').name})", "",
              "Command: `python -m benchmarks.fesog_row_dp` (module docstring).", ""]  # fmt: skip
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """One panel per dataset (their RMSE scales differ): test RMSE against ε per method,
    its no-row-DP run dashed and the users' own means dotted."""
    plt = pyplot()
    names = sorted({r["dataset"] for r in rows})
    cols = min(2, len(names))
    grid = -(-len(names) // cols)
    fig, axes = plt.subplots(grid, cols, figsize=(5.5 * cols, 3.6 * grid), squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names, strict=False):
        methods = sorted({r["algorithm"] for r in rows
                          if r["dataset"] == name and r.get("method") != "user mean"})  # fmt: skip
        for method in methods:
            mine = [r for r in rows if (r["dataset"], r["algorithm"]) == (name, method)]
            dp = [r for r in mine if r["epsilon"] is not None]
            ref = [r for r in mine if r["epsilon"] is None]
            color = f"C{METHODS.index(method)}"  # one colour a method in every panel
            ax.errorbar([r["epsilon"] for r in dp], [r["test_rmse"] for r in dp],
                        [r["test_rmse_std"] for r in dp], marker="o", capsize=3, color=color,
                        label=f"{method}, row DP")  # fmt: skip
            for r in dp:
                ax.annotate(f"z={r['noise']:g}", (r["epsilon"], r["test_rmse"]),
                            textcoords="offset points", xytext=(4, 4), fontsize=8)  # fmt: skip
            if ref:
                ax.axhline(ref[0]["test_rmse"], ls="--", color=color,
                           label=f"{method}, no row DP")  # fmt: skip
        means = [r for r in rows if r["dataset"] == name and r.get("method") == "user mean"]
        if means:
            ax.axhline(means[0]["test_rmse"], ls=":", color="black",
                       label="user mean (no model, ε = 0)")  # fmt: skip
        ax.set_xscale("log")
        ax.margins(x=0.15)  # room for the z labels
        ax.xaxis.set_minor_formatter(plt.NullFormatter())  # decades only: no crowded labels
        ax.set_title(name)
        ax.set_xlabel("ε at δ = 1e-5 (honest-but-curious server)")
        ax.legend(fontsize=7, loc="best")
    for ax in axes[:, 0]:
        ax.set_ylabel("test RMSE (lower is better)")
    fig.suptitle("Federated recommendation under a secure sum: row DP's privacy–utility "
                 "trade-off (no sampling amplification)")  # fmt: skip
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", type=csv_list, default=["FilmTrust"])
    p.add_argument("--methods", type=csv_list, default=["fesog"])
    p.add_argument("--noise", type=csv_list, default=["0.5", "2", "8"])
    p.add_argument("--clip-scales", type=csv_list, default=["0.2", "1"])
    p.add_argument("--rows", type=int, default=ROWS)
    p.add_argument("--seeds", type=csv_list, default=["0", "1", "2"])
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--medians", action="store_true",
                   help="print each method's first-round median part norms and stop")  # fmt: skip
    a = p.parse_args(argv)
    if bad := [m for m in a.methods if m not in METHODS]:
        p.error(f"unknown methods {bad}; expected {list(METHODS)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if a.medians:
        for name in a.datasets:
            for method in a.methods:
                print(name, method, first_round_medians(load_views(name), method))
        return
    a.out.parent.mkdir(parents=True, exist_ok=True)
    runs_path = a.out.with_name(a.out.stem + "_runs.json")
    runs: list[dict[str, Any]] = read_json(runs_path, [])
    cells = [(0.0, None)] + [(float(z), float(c)) for z in a.noise for c in a.clip_scales]
    for name in a.datasets:
        for seed in map(int, a.seeds):
            views = None
            if not any(r["dataset"] == name and r.get("method") == "user mean"
                       and r["seed"] == seed for r in runs):  # fmt: skip
                views = load_views(name, seed)
                runs.append(user_mean_run(views, seed))
            for method in a.methods:
                for noise, clip in cells:
                    key = (method, name, noise, clip, seed)
                    if any((algorithm(r), r["dataset"], r.get("noise"), r.get("clip"), r["seed"])
                           == key for r in runs if r.get("method") != "user mean"):  # fmt: skip
                        continue
                    views = views or load_views(name, seed)
                    log.info("%s %s z=%g clip scale %s seed %d", name, method, noise, clip, seed)
                    runs.append(run_one(views, method, noise, clip or 1.0, a.rows, seed))
                    write_json(runs_path, runs, indent=1, newline=True)
    rows = summary(runs)
    write_json(a.out, rows, indent=1, newline=True)
    write_text(a.out.with_suffix(".md"), render(rows))
    plot(rows, a.out.with_suffix(".png"))
    print(a.out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
