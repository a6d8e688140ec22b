"""The privacy–utility frontier of FedAvg and FedStruct on Cora (``securefgl sweep``).

K = 10 clients (Louvain partition), 3 seeds; protections: ``plain``, ``secagg`` with
client-level DP (``clip_noise``, distributed noise; σ calibrated so that each run reports
ε ∈ {0.5, 2, 8, 32, 128} against the server) and ``ckks``; link stealing and membership
inference on every trained run. The cells live in ``$SECUREFGL_CACHE/frontier`` (resumable:
run the command again after a kill); the frontier is copied to
``benchmarks/results/frontier{.json,.md,_utility.png,_attacks.png,_tradeoff.png}``.

Run: ``SECUREFGL_DATA=... python -m benchmarks.frontier [--seeds 0,1,2]``.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from attacks.sweep import save_frontier
from attacks.sweep.engine import run_sweep
from attacks.sweep.grid import SweepConfig
from securefgl.config import ExperimentConfig
from securefgl.data.datasets import cache_dir

RESULTS = Path(__file__).resolve().parents[1] / "results"
EPSILONS = [0.5, 2.0, 8.0, 32.0, 128.0]


def frontier_sweep(seeds: list[int]) -> SweepConfig:
    base = ExperimentConfig(dataset="Cora", clients=10)  # Louvain partition (the default)
    return SweepConfig(
        base=base, algorithms=["fedavg", "fedstruct"], seeds=seeds,
        protections=["plain", "secagg,clip_noise", "ckks"], epsilons=EPSILONS,
        attacks=["link_stealing", "membership_inference"],
    )  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--restart", action="store_true", help="discard the cached cells")
    args = parser.parse_args(argv)
    sweep = frontier_sweep([int(s) for s in args.seeds.split(",")])
    cache = cache_dir() / "frontier"
    records = run_sweep(sweep, cache, progress=True, restart=args.restart)
    out = save_frontier(records, cache, "frontier")
    for path in out.values():
        shutil.copy(path, RESULTS / path.name)
    print(f"frontier: {RESULTS / 'frontier.md'}")


if __name__ == "__main__":
    main()
