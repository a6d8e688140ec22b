"""FedSage+'s answered gradients: feature recovery and accuracy per protection.

FedSage+ is a baseline of FED-PUB's table; its answered cross-client gradients give client
i the other clients' nearest feature rows exactly (:mod:`attacks.fedsage_gradients`). Per
protection (the answers in the clear; clipped and noised one by one, no ε; only their sum
through a masked secure sum; that sum with accounted Gaussian noise): one FedSage+ run in
its own paper's setting (Louvain, 60/20/20, the spreadfgl reproduction's configuration),
the attack's cosine beside its baseline, and the test accuracy at the round of best
validation accuracy. Saved per cell to ``benchmarks/results/survey_node_fedsage.json``.
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

import torch

from benchmarks.harness.results import csv_list, read_json, write_json
from benchmarks.reproduce_survey_node.grid import ROOT

OUT = ROOT / "benchmarks" / "results" / "survey_node_fedsage.json"
PROTECTIONS: dict[str, dict[str, Any]] = {
    "plain": {},
    "clip-noise": {"cross_clip": 1.0, "cross_noise": 1.0},
    "secure-sum": {"cross_sum": "masked"},
    "secure-sum-dp": {"cross_sum": "masked", "cross_clip": 1.0, "cross_sum_noise": 1.0},
}
log = logging.getLogger("survey_node.fedsage")


def cell(dataset: str, clients: int, protection: str, seed: int, rounds: int) -> dict[str, Any]:
    from attacks.fedsage_gradients import fedsage_gradient_features
    from attacks.simulation import simulate
    from securefgl.algorithms.fedsage.clients import ANSWER_TAG, QUERY_TAG
    from securefgl.config import ExperimentConfig
    from securefgl.experiment.runner import load_graph

    cfg = ExperimentConfig(
        dataset=dataset, clients=clients, partition="louvain", train_fraction=0.6,
        val_fraction=0.2, test_fraction=0.2, rounds=rounds, eval_every=5, hidden=64,
        dropout=0.5, lr=0.01, weight_decay=5e-4, edge_servers=1,
        fedsage={"gen_hidden": [256, 512], **PROTECTIONS[protection]},
        name=f"survey-fedsage|{dataset}|{clients}|{protection}",
    )  # fmt: skip
    t0 = time.time()
    run = simulate(cfg, "fedsage+", seed, load_graph(cfg),
                   keep_tags=frozenset({QUERY_TAG, ANSWER_TAG}))  # fmt: skip
    att = fedsage_gradient_features(run)
    hist = [h for h in run.result.history if "val_acc" in h]
    best = max(hist, key=lambda h: h["val_acc"]) if hist else run.result.final
    return {
        "dataset": dataset, "clients": clients, "protection": protection, "seed": seed,
        "settings": PROTECTIONS[protection], "cosine": att.value,
        "cosine_baseline": att.baseline(), "exact_fraction": att.metrics.get("exact_fraction"),
        "leaks": att.leaks(), "acc_val_selected": round(100 * best["test_acc"], 2),
        "acc_last": round(100 * run.result.final["test_acc"], 2),
        "epsilon": run.result.privacy.get("answers_epsilon"),
        "delta": run.result.privacy.get("answers_delta"),
        "seconds": round(time.time() - t0, 1),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", default="Cora")
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--protections", type=csv_list, default=list(PROTECTIONS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    rows: list[dict[str, Any]] = read_json(OUT, [])
    for prot in args.protections:
        key = (args.dataset, args.clients, prot, args.seed)
        if any((r["dataset"], r["clients"], r["protection"], r["seed"]) == key for r in rows):
            continue
        row = cell(args.dataset, args.clients, prot, args.seed, args.rounds)
        rows = [r for r in read_json(OUT, [])  # another process may have saved meanwhile
                if (r["dataset"], r["clients"], r["protection"], r["seed"]) != key] + [row]
        write_json(OUT, rows)
        log.info("fedsage %s: %s", key, row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
