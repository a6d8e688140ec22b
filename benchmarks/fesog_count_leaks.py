"""What FeSoG's server learns of the social graph and of the users' rated items from the
per-row counts of a secure aggregation, across rounds (:mod:`attacks.row_counts`).

FeSoG (Liu et al., ACM TIST 2022) trained under the ideal secure sum (the same sums and
counts as CKKS / SecAgg / SecAgg+ give) in three variants, ``uniform`` (uniform averages,
neighbours' rows as in FeSoG: every count a number of cohort users), ``weighted`` (FeSoG's
averages: the counts are weight sums, of which the attack reads only the support) and ``own
rows`` (uniform, ``social_rows = own``: each user uploads only its own user row; the default
under a secure aggregation); and FedGNN (``fedgnn``: its item rows only). The server keeps
its view of every round; the attack runs on the views of the first ``r`` rounds for each
``r`` in ``--checkpoints``. Model settings are FeSoG's defaults (the counts depend only on
who joined a round and on the links, not on the model). Run: ``SECUREFGL_DATA=... python -m
benchmarks.fesog_count_leaks [--datasets FilmTrust,Ciao] [--cohorts 256,32]
[--rounds 400] [--seeds 0]``; writes ``benchmarks/results/fesog_count_leaks.{json,md}``
(resumable per cell).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from attacks.row_counts import (
    Counts,
    count_correlation_auc,
    evaluate_interaction_elimination,
    evaluate_link_counts,
)
from benchmarks.harness.ratings import load_views
from benchmarks.harness.results import csv_list, read_json, write_json, write_text
from securefgl.algorithms.recommendation.row_dp import RowDPConfig
from securefgl.algorithms.recommendation.settings import aggregating
from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
from securefgl.data.rating_views import ClientViews

OUT = Path(__file__).parent / "results" / "fesog_count_leaks.json"
#: the variants: name -> (method, averages, social_rows, what the user-row counts are to the
#: link attack (None: no user rows, FedGNN's users keep their embeddings), pseudo items q,
#: row DP's noise multiplier z (0: off; its other settings the defaults))
VARIANTS: dict[str, tuple[str, str, str, Counts | None, int, float]] = {
    "uniform": ("fesog", "uniform", "neighbours", "users", 10, 0.0),
    "weighted": ("fesog", "weighted", "neighbours", "weights", 10, 0.0),
    "own rows": ("fesog", "uniform", "own", "users", 10, 0.0),
    "fedgnn": ("fedgnn", "auto", "auto", None, 10, 0.0),
    "own rows q100": ("fesog", "uniform", "own", "users", 100, 0.0),
    "own rows q1000": ("fesog", "uniform", "own", "users", 1000, 0.0),
    "own rows + row DP z=0.5": ("fesog", "uniform", "own", "users", 10, 0.5),
    "own rows + row DP z=2": ("fesog", "uniform", "own", "users", 10, 2.0),
}
COUNT_AUC_USERS = 500  # users scored by the count correlation (a fixed random sample)
log = logging.getLogger("fesog_count_leaks")


def cell_rows(
    views: ClientViews, variant: str, cohort: int, rounds: int, seed: int, checkpoints: list[int]
) -> list[dict[str, Any]]:
    """Train ``rounds`` rounds, keeping the server's views; the attack at each checkpoint."""
    method, averages, social_rows, counts, pseudo, noise = VARIANTS[variant]
    cfg = RecConfig(method=method, users_per_round=cohort, pseudo_items=pseudo, rounds=rounds,
                    keep_views=rounds, averages=averages, social_rows=social_rows, seed=seed,
                    row_dp=RowDPConfig(noise), **aggregating("ideal"))  # fmt: skip
    t0 = time.perf_counter()
    with FedRecTrainer(views, cfg) as tr:
        for r in range(rounds):
            tr.round(r)
        train_s = time.perf_counter() - t0
        rows = []
        for upto in checkpoints:
            t = time.perf_counter()
            seen = tr.server_views[:upto]
            links = {} if counts is None else evaluate_link_counts(seen, views, counts).as_dict()
            items = evaluate_interaction_elimination(seen, views)
            # the count correlation at the last checkpoint, on a fixed sample of users
            auc, prior = (count_correlation_auc(seen, views, COUNT_AUC_USERS)
                          if upto == checkpoints[-1] else (float("nan"),) * 2)  # fmt: skip
            rows.append({
                "dataset": views.name, "variant": variant, "method": method,
                "averages": averages, "social_rows": social_rows, "pseudo_items": pseudo,
                "users_per_round": cohort,
                "seed": seed, "rounds": upto, "users_seen": items.users_seen, **links,
                **({"links_named": links["confirmed_correct"] / links["links"]
                    if links["links"] else float("nan")} if links else {}),
                **{f"items_{k}": v for k, v in items.as_dict().items()
                   if k not in ("rounds", "users_seen")},
                "items_count_auc": auc, "items_prior_auc": prior,
                "attack_s": time.perf_counter() - t, "train_s": train_s,
            })  # fmt: skip
    return rows


def _f(x: float) -> str:
    return "–" if x != x else f"{x:.3f}"  # nan: no candidate


def render(rows: list[dict[str, Any]]) -> str:
    lines = [
        "# What FeSoG's server learns from secure-aggregation counts, across rounds",
        "",
        "The honest-but-curious server of a FeSoG run under a secure aggregation (the ideal "
        "secure sum: the same sums and counts as CKKS, SecAgg and SecAgg+) reads, each round, "
        "the cohort's ids and the per-row counts of the aggregate's rows "
        "(`attacks.row_counts`; exact elimination across rounds, no learning). Model "
        "settings: FeSoG's defaults (Liu et al., ACM TIST 2022); the counts depend only on "
        "the cohorts, the links and the rated items. One seed.",
        "",
        "## Social links from the user rows",
        "",
        "Each member uploads its own user row and its neighbours' (FeSoG, §4). The attack "
        "eliminates every pair a round contradicts and confirms pairs a count pins down "
        "(with exact counts every true link stays a candidate). `uniform` (uniform averages, "
        "neighbours' rows as in FeSoG): the counts are numbers of users; `weighted` (FeSoG's "
        "averages): weight sums, of which the attack reads only the support (the subset-sum "
        "decoding of small cohorts is not run here, so these rows are a lower bound); `own "
        "rows` (uniform averages and `social_rows = own`, the defaults under a secure "
        "aggregation): each user uploads only its own user row, so every count is the member "
        "itself, which the server already knows, and no pair survives. Links: the undirected "
        "trust pairs with at least one end seen; baseline: the link density among the scored "
        "pairs (guessing every pair).",
        "",
        "| dataset | FeSoG variant | users / round | rounds | users seen | links | candidates "
        "| candidate precision | baseline | links named (confirmed, all correct) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in rows if "links" in r):
        lines.append(
            f"| {r['dataset']} | {r['variant']} | {r['users_per_round']} | {r['rounds']} | "
            f"{r['users_seen']} | {r['links']} | {r['candidates']} | "
            f"{_f(r['candidate_precision'])} | {r['baseline_precision']:.2e} | "
            f"{r['confirmed_correct']} ({100 * r['links_named']:.1f} %)"
            f"{'' if r['confirmed'] == r['confirmed_correct'] else ' WRONG CONFIRMATIONS'} |"
        )
    lines += [
        "",
        "## Rated items from the item support",
        "",
        "Each member uploads every item it rated (and q random pseudo items, 10 unless the "
        "variant says otherwise) in every round it joins, whatever the variant (`fedgnn`: "
        "FedGNN's defaults, whose item rows go through the same support phase; it uploads no "
        "user rows); more pseudo items widen each round's support. Item i stays a "
        "candidate for user u while i is in the support of every round u joined. Recall is "
        "1 by construction with exact counts; under row DP (`+ row DP z`: at most 32 item "
        "rows a user and round, noisy counts on every item row, the support where a noisy "
        "count reaches 3 noise stds, noisy sums; the module "
        "`securefgl.algorithms.recommendation.row_dp`) the support and counts are noisy and "
        "the attack reads them as they are; baseline: the density of rated (user, item) "
        "pairs; popular guess: the precision of guessing each user as many items as it has "
        "candidates, the most rated by the other users (a noisy support keeps the popular "
        "items: their precision is this prior's, not a leak; – where not measured). Per-user "
        "inference from one round is not applicable under a secure aggregation; across "
        "rounds it is. Count AUC (last checkpoint, 500 users): item i's mean count in the "
        "rounds u joined less its mean in the others, a per-user ROC AUC over all items, "
        "beside the AUC of the items' popularity among the other users (a public prior); "
        "pseudo items defeat the elimination, not this; row DP bounds what both can learn "
        "(ε in `benchmarks/results/fesog_row_dp.md`).",
        "",
        "| dataset | variant | users / round | rounds | candidates per user (rated) "
        "| precision | recall | baseline | popular guess | count AUC (prior) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in rows if "items_count_auc" in r):
        auc, prior = r["items_count_auc"], r["items_prior_auc"]
        lines.append(
            f"| {r['dataset']} | {r['variant']} | {r['users_per_round']} | {r['rounds']} | "
            f"{r['items_candidates_per_user']:.0f} ({r['items_rated_per_user']:.1f}) | "
            f"{_f(r['items_precision'])} | {_f(r['items_recall'])} | "
            f"{r['items_baseline_precision']:.2e} | "
            f"{_f(r.get('items_popular_precision', float('nan')))} | "
            f"{'–' if auc != auc else f'{auc:.3f} ({prior:.3f})'} |"
        )
    lines += [
        "",
        "Command: `python -m benchmarks.fesog_count_leaks` (`--datasets`, `--cohorts`, "
        "`--variants`, `--rounds`, `--checkpoints`, `--seeds`).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # Epinions (22k users) not by default: the attack's pair matrices grow to ~10^8 entries
    p.add_argument("--datasets", type=csv_list, default=["FilmTrust", "Ciao"])
    p.add_argument("--variants", type=csv_list, default=list(VARIANTS))
    p.add_argument("--cohorts", type=csv_list, default=["256", "32"])
    p.add_argument("--rounds", type=int, default=400)
    p.add_argument("--checkpoints", type=csv_list, default=["20", "100", "400"])
    p.add_argument("--seeds", type=csv_list, default=["0"])
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if bad := [x for x in a.variants if x not in VARIANTS]:
        p.error(f"unknown variants {bad}; expected {list(VARIANTS)}")
    checkpoints = sorted({min(int(c), a.rounds) for c in a.checkpoints})
    rows: list[dict[str, Any]] = read_json(a.out, [])
    for name in a.datasets:
        for seed in map(int, a.seeds):
            views = None
            for variant in a.variants:
                for cohort in map(int, a.cohorts):
                    key = (name, variant, cohort, seed)
                    done = {r["rounds"] for r in rows if "items_count_auc" in r
                            and (r["dataset"], r["variant"], r["users_per_round"],
                                 r["seed"]) == key}  # fmt: skip
                    if set(checkpoints) <= done:
                        continue
                    views = views or load_views(name, seed)
                    log.info("%s %s, %d users a round, seed %d: %d rounds",
                             name, variant, cohort, seed, a.rounds)  # fmt: skip
                    new = cell_rows(views, variant, cohort, a.rounds, seed, checkpoints)
                    rows = [r for r in rows if (r["dataset"], r["variant"],
                            r["users_per_round"], r["seed"]) != key] + new  # fmt: skip
                    write_json(a.out, rows, newline=True)
                    write_text(a.out.with_suffix(".md"), render(rows))
    write_text(a.out.with_suffix(".md"), render(rows))
    print(f"wrote {a.out} and {a.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
