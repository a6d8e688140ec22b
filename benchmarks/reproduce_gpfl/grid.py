"""The grid of ``python -m benchmarks.reproduce_gpfl``: GPFL's Table 2 settings, methods,
protections, the paper's values and the configuration of one cell."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from benchmarks.harness.notes import load_data
from securefgl.config import ExperimentConfig

DATASETS = ("NCI1", "PROTEINS")
NOT_RUN = {"Yeast": "not available offline (no TU Yeast in the shared data root)"}
CLIENTS = (25, 20, 15)  # the paper's column order
ALPHAS = (0.5, 1.0, 5.0)
METHODS = ("gpfl", "fedavg", "self-train")
OPTIONAL_METHODS = ("fedprox", "gcfl", "fedstar")
#: GPFL's privacy settings ([experiment.gpfl]); "plain" is the paper.
PROTECTIONS: dict[str, dict[str, Any]] = {
    "plain": {},
    "secure": {"sums": "masked", "similarity": "ckks"},
    "secure+ldp": {"sums": "masked", "similarity": "ckks", "property_epsilon": 1.0},
}
#: The paper/code differences (the GPFL README) as flags (diagnostic variants of GPFL).
VARIANTS: dict[str, dict[str, Any]] = {
    "gpfl": {},
    "gpfl[paper-gamma]": {"self_weight": 0.95},
    "gpfl[sym-norm]": {"norm": "sym"},
    "gpfl[identical-probes]": {"identical_probes": True},
    "gpfl[random-init]": {"initial": "random"},
    "gpfl[no-learner]": {"learn": False},
}
#: "<method>[authors-split]" runs <method> on the code's own partitions and folds
#: (``split_stream = "authors"``) with the code's ``multiseed`` seeds: a partition's luck
#: told apart from a method's effect; "<method>[authors-fold<k>]" tests fold k (1-4) of
#: those splits instead of fold 0 (the paper's text: 5-fold cross-validation)
AUTHORS_SPLIT = "[authors-split]"
AUTHORS_FOLDS = tuple(f"[authors-fold{k}]" for k in range(1, 5))
AUTHORS_SEEDS = (0, 10, 42, 111, 123)
_AUTHORS_TAG = re.compile(r"\[authors-(?:split|fold([1-4]))\]$")


def authors_tag(method: str) -> tuple[str, int | None]:
    """(the method without an authors-split tag, the fold its cell tests); the fold is
    None for a method on our own splits."""
    found = _AUTHORS_TAG.search(method)
    if found is None:
        return method, None
    return method[: found.start()], int(found.group(1) or 0)


#: "<method>[authors-log]" runs <method> on the split of the one run the authors' repository
#: logs (train_plot/plot_sh/exp.txt, added in commit 8e06349: NCI1, k = 25, α = 1, seed 0,
#: fold 0, with the code's prior of the time, Dirichlet(α) uncapped), that split fixed under
#: training seeds 0..n-1: the log's numbers against our training's spread on its very split
AUTHORS_LOG = "[authors-log]"
LOG_CELL = ("NCI1", 25, 1.0)
LOG_SPLIT: dict[str, Any] = {"split_stream": "authors", "prior_cap": 1.0, "split_seed": 0}

#: "<method>[authors-seed0]": the code's split of its default seed 0 (fold 0, the final
#: code's capped prior) in every cell, fixed under training seeds 0..n-1: the code's defaults
#: (``--seed 0``, no ``--multiseed``) repeat one split, and the log's seed-0 run matches Table 2
AUTHORS_SEED0 = "[authors-seed0]"
#: every tag that runs a method on the authors' splits
AUTHORS_TAGS = (AUTHORS_SPLIT, *AUTHORS_FOLDS, AUTHORS_LOG, AUTHORS_SEED0)

METRIC = "best_last_test_acc"  # the code's final_best_test_acc: best client mean, last 10 rounds


@dataclass(frozen=True)
class Cell:
    dataset: str
    clients: int
    alpha: float
    method: str
    protection: str = "plain"

    @property
    def key(self) -> tuple[str, int, float, str, str]:
        return (self.dataset, self.clients, self.alpha, self.method, self.protection)


def row_key(row: dict[str, Any]) -> tuple[str, int, float, str, str]:
    return (row["dataset"], row["clients"], float(row["alpha"]), row["method"],
            row["protection"])  # fmt: skip


def paper_value(dataset: str, clients: int, alpha: float, method: str) -> list[float] | None:
    """[mean, std] in % from Table 2 (None when the paper has no such cell)."""
    values = load_data("gpfl_paper")["values"].get(dataset, {})
    base = method.split("[")[0]  # variants and other splits: the method's value
    return values.get(base, {}).get(f"{clients}|{alpha:g}")


def make_config(cell: Cell, rounds: int) -> tuple[ExperimentConfig, str]:
    """(config, algorithm) of a cell: GPFL's set-up (defaults of [experiment.graph])."""
    method, fold = authors_tag(cell.method)
    graph: dict[str, Any] = {"dirichlet": cell.alpha}
    every = 10
    if fold is not None:
        graph.update(split_stream="authors", test_fold=fold)
    if method.endswith(AUTHORS_LOG):
        if (cell.dataset, cell.clients, cell.alpha) != LOG_CELL:
            raise ValueError(f"{AUTHORS_LOG} cells are the logged run's {LOG_CELL}, got "
                             f"{(cell.dataset, cell.clients, cell.alpha)}")  # fmt: skip
        method = method.removesuffix(AUTHORS_LOG)
        graph.update(LOG_SPLIT)
        every = 1  # the log has every round's client mean
    if method.endswith(AUTHORS_SEED0):
        method = method.removesuffix(AUTHORS_SEED0)
        graph.update(split_stream="authors", split_seed=0)
    gpfl = {**VARIANTS.get(method, {}), **PROTECTIONS[cell.protection]}
    algo = "gpfl" if method in VARIANTS else method
    cfg = ExperimentConfig(
        task="graph",
        dataset=cell.dataset,
        clients=cell.clients,
        rounds=rounds,
        local_epochs=1,
        mu=0.01,
        eval_every=every,
        threads=1,
        algorithms=[algo],
        graph=graph,
        gpfl=gpfl,
        name=f"gpfl-repro|{cell.dataset}|{cell.clients}|{cell.alpha:g}|{cell.method}|"
        f"{cell.protection}",
    )
    return cfg, algo


def plan(
    datasets: list[str],
    clients: list[int],
    alphas: list[float],
    methods: list[str],
    protections: list[str],
    protected_cells: list[tuple[str, int, float]],
) -> list[Cell]:
    """Every (dataset, k, α, method) in plain; protected GPFL only in ``protected_cells``."""
    cells = [
        Cell(d, k, a, m)
        for d in datasets
        for k in clients
        for a in alphas
        for m in methods
    ]
    for d, k, a in protected_cells:
        cells += [Cell(d, k, a, "gpfl", p) for p in protections if p != "plain"]
    return cells


def cell_seeds(cell: Cell, n: int) -> list[int]:
    """The first ``n`` seeds of a cell: the code's for its own splits, else 0..n-1."""
    if authors_tag(cell.method)[1] is not None:
        return list(AUTHORS_SEEDS[:n])
    return list(range(n))
