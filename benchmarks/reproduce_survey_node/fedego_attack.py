"""De-mixing FedEgo's uploads as a function of the mixup batch size, with and without DP.

One FedEgo run (label-skew Cora, 5 clients, secagg on the shared layer) is trained for
``--rounds`` rounds; at its final state every client re-draws its mixed ego-graphs with
each batch size B and DP multiplier σ (a round's upload is a function of the model state,
B and σ only) and the server-side attack (:mod:`attacks.fedego_demix`) de-mixes them, with
the public-features prior and without. ε: what ``--rounds`` rounds of DP mixup at σ would
cost (RDP, δ = 1e-5, unit one ego-graph, against the server). Output:
``benchmarks/results/fedego_demix.json`` (rows in the issue's attack-row shape).

    python -m benchmarks.reproduce_survey_node.fedego_attack --rounds 10
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import Any

import numpy as np
import torch

from attacks.fedego_demix import demix_attack
from benchmarks.harness.checkout_families import register_checkout_families
from benchmarks.reproduce_survey_node.grid import ROOT
from protocols.dp.accounting import PrivacyAccountant

OUT = ROOT / "benchmarks" / "results" / "fedego_demix.json"
log = logging.getLogger("fedego_demix")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", default="Cora")
    ap.add_argument("--seed", type=int, default=1027)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--batch-sizes", default="1,4,16,32,64")
    ap.add_argument("--sigmas", default="0,2")
    ap.add_argument("--attacked", type=int, default=2, help="clients whose uploads are de-mixed")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    register_checkout_families()
    torch.set_num_threads(1)
    from benchmarks.reproduce_survey_node.fedego_runs import build

    t0 = time.time()
    algo, world, fed = build("fedego", args.dataset, "secagg", args.seed, args.rounds)
    for r in range(args.rounds):
        algo.train_round(r)
        log.info("round %d trained (%.0f s)", r, time.time() - t0)
    t = args.rounds - 1
    clients = [algo.executor.held(c) for c in algo.ids]
    base = clients[0].s
    features = load_x(args.dataset)
    rows: list[dict[str, Any]] = []
    for sigma in (float(v) for v in args.sigmas.split(",")):
        eps = None
        if sigma > 0:
            acc = PrivacyAccountant("rdp", base.delta)
            for _ in range(args.rounds):
                acc.step(sigma, 1.0)
            eps = acc.epsilon()
        for b in (int(v) for v in args.batch_sizes.split(",")):
            seen = {}
            for c in clients[: args.attacked]:
                c.s = base.replace(batch_size=b, dp_noise=sigma, mixup=b > 1)
                c._mixup(t)
                seen[c.party_id] = dict(c.upload)
            for prior in ("features", "none"):
                res = demix_attack(algo, seen, t, features, world.members, {}, prior)
                d = res.to_dict()
                rows.append({
                    "attack": "fedego-demix", "dataset": args.dataset, "seed": args.seed,
                    "batch_size": b, "prior": prior,
                    "protection": "secagg" + (f"+dp-mixup-{sigma:g}" if sigma else ""),
                    "dp_noise": sigma, "mixup_epsilon": eps, "rounds_trained": args.rounds,
                    "metric": d["primary"], "value": round(d["value"], 4),
                    "baseline": round(d["baseline"], 4),
                    "metrics": {k: round(v, 4) for k, v in d["metrics"].items()},
                    "baselines": {k: round(v, 4) for k, v in d["baselines"].items()},
                    "leaks": d["leaks"], "centres": d["details"]["centres"],
                    "clients_attacked": args.attacked,
                })  # fmt: skip
                log.info("σ=%g B=%d %s: %s vs %s", sigma, b, prior, rows[-1]["metrics"],
                         rows[-1]["baselines"])  # fmt: skip
    for c in clients:
        c.s = base
    fed.close()
    with open(args.out, "w") as fh:
        json.dump({"rows": rows, "seconds": round(time.time() - t0, 1)}, fh, indent=1)
    return 0


def load_x(dataset: str) -> np.ndarray:
    """The public corpus' features in the label-skew world's node order (isolated nodes
    dropped, as :func:`securefgl.data.label_skew.label_skew_world` does)."""
    from securefgl.data import load_dataset
    from securefgl.data.label_skew import _drop_isolated

    return _drop_isolated(load_dataset(dataset)).x.numpy()


if __name__ == "__main__":
    raise SystemExit(main())
