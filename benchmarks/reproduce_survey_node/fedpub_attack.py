"""The FED-PUB functional-embedding attack rows of the survey-node result file.

Per protection of the embeddings (plain, Gaussian at several σ): one FED-PUB run in the
disjoint setting (:func:`grid.fedpub_config`) kept for the audit, the server's attack
(:mod:`attacks.fedpub_embedding`) and the run's validation-selected accuracy. Saved per
cell to ``benchmarks/results/survey_node_attacks.json`` (a rerun skips what is there).
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

import torch

from benchmarks.harness.checkout_families import register_checkout_families
from benchmarks.harness.results import csv_list, read_json, write_json
from benchmarks.reproduce_survey_node.grid import ROOT, Cell, fedpub_config

ATTACK_RUNS = ROOT / "benchmarks" / "results" / "survey_node_attacks.json"
log = logging.getLogger("survey_node.attack")


def attack_cell(dataset: str, clients: int, protection: str, seed: int,
                rounds: int) -> dict[str, Any]:  # fmt: skip
    from attacks.fedpub_embedding import fedpub_embedding_inference
    from attacks.simulation import simulate
    from securefgl.algorithms.fedpub.parties import TAG_EMBEDDING
    from securefgl.experiment.runner import load_graph

    cfg = fedpub_config(Cell("fed-pub", dataset, clients, protection), seed, rounds)
    t0 = time.time()
    run = simulate(cfg, "fed-pub", seed, load_graph(cfg), keep_tags=frozenset({TAG_EMBEDDING}))
    res = fedpub_embedding_inference(run)
    hist = [h for h in run.result.history if "client_mean_test" in h]
    best = max(hist, key=lambda h: h["client_mean_val"])
    return {
        "attack": "fedpub-embedding", "dataset": dataset, "clients": clients, "seed": seed,
        "protection": protection, "metric": res.primary, "value": res.value,
        "baseline": res.baseline(), "margin": res.margin(), "leaks": res.leaks(),
        "label_tv": res.metrics["label_tv"], "label_tv_baseline": res.baselines["label_tv"],
        "community_spearman": res.metrics["community_spearman"],
        "epsilon": res.details["embedding_epsilon"], "delta": res.details["embedding_delta"],
        "acc_val_selected": round(100 * best["client_mean_test"], 2),
        "seconds": round(time.time() - t0, 1),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--datasets", type=csv_list, default=["Cora"])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--protections", type=csv_list,
                    default=["plain", "dp-embedding-0.5", "dp-embedding-5"])  # fmt: skip
    ap.add_argument("--seeds", type=csv_list, default=["0"])
    ap.add_argument("--rounds", type=int, default=100)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    register_checkout_families()
    torch.set_num_threads(1)
    rows: list[dict[str, Any]] = read_json(ATTACK_RUNS, [])
    for seed in (int(s) for s in args.seeds):
        for dataset in args.datasets:
            for prot in args.protections:
                key = (dataset, args.clients, prot, seed)
                if any((r["dataset"], r["clients"], r["protection"], r["seed"]) == key
                       for r in rows):  # fmt: skip
                    continue
                row = attack_cell(dataset, args.clients, prot, seed, args.rounds)
                rows = [r for r in read_json(ATTACK_RUNS, [])  # saved meanwhile elsewhere
                        if (r["dataset"], r["clients"], r["protection"], r["seed"]) != key]
                rows.append(row)
                write_json(ATTACK_RUNS, rows)
                log.info("attack %s: %s", key, row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
