"""The grid of ``python -m benchmarks.reproduce_fedvn``: FedVN's Motif columns (AAAI 2025,
main table), the methods, protections and variants, the slides' values and the
configuration of one cell, in the order the cells run (targets first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.harness.notes import load_data
from securefgl.algorithms.fedvn import apply_setup
from securefgl.config import ExperimentConfig

DATASETS = ("motif-basis", "motif-size")
LABELS = {"motif-basis": "Motif/Basis", "motif-size": "Motif/Size"}
NOT_RUN = {
    "CMNIST/Color": "GOOD-CMNIST needs a download (≈ 0.7 GB archive); not available offline",
    "ZINC/Scaffold": "GOOD-ZINC needs a download; not available offline",
    "SST2/Length": "GOOD-SST2 needs a download; not available offline",
}
#: the slides' baselines we run (FedRep and FedALA are not implemented here)
BASELINES = ("fedprox", "fedbn", "ditto", "gcfl", "fedstar")
METHODS = ("fedvn", "fedavg", "self-train", *BASELINES)
#: variants, ``method[name]``: the section changes of a run of ``method``. FedVN's: the
#: authors' code's constant s_global; the paper's s_local (the mean over the client's
#: graphs, not the last batch's). FedStar's: random walks of 2 steps, whose return
#: probabilities (a node's neighbours' degrees) a 1-WL GIN also sees, where 16 steps see
#: the motifs' cycles
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "fedvn": {},
    "fedvn[constant-s_global]": {"fedvn": {"s_global": "constant"}},
    "fedvn[all-s_local]": {"fedvn": {"s_local": "all"}},
    "fedstar[rw2]": {"graph": {"fedstar_rw": 2}},
}
#: protocol stacks; under secagg FedVN's s_global sums are masked (the transport's mode)
PROTECTIONS: dict[str, list[str]] = {"plain": ["plain"], "secagg": ["secagg"]}
ROUNDS = 100  # the authors' code's default (its FedAvg logs have 100 rounds)


@dataclass(frozen=True)
class Cell:
    dataset: str
    method: str
    protection: str = "plain"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.dataset, self.method, self.protection)

    @property
    def algorithm(self) -> str:
        return self.method.split("[")[0]


def row_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return (row["dataset"], row["method"], row["protection"])


def paper_value(dataset: str, method: str) -> list[float] | None:
    """[mean, std] (%) of the slides' table (a variant: its method's)."""
    data = load_data("fedvn_paper")
    base = method.split("[")[0]
    values = data["values"].get(base)
    return None if values is None else values[data["columns"].index(dataset)]


def stages(datasets: list[str], methods: list[str], protections: list[str]) -> list[list[Cell]]:
    """Cells in the order they run: the targets' cells first (FedVN, FedAvg, self-train in
    plaintext, then protected FedVN) per dataset, then the other baselines, then variants."""
    basis = [m for m in ("fedvn", "fedavg", "self-train") if m in methods]
    rest = [m for m in methods if m not in basis and m not in VARIANTS]
    variants = [m for m in methods if m in VARIANTS and m != "fedvn"]
    out = []
    for d in datasets:
        out.append([Cell(d, m) for m in basis])
        if "fedvn" in methods:
            out.append([Cell(d, "fedvn", p) for p in protections if p != "plain"])
    out += [[Cell(d, m) for m in rest] for d in datasets]
    out += [[Cell(d, m) for m in variants] for d in datasets]
    return [s for s in out if s]


def stage_groups(ordered: list[list[Cell]]) -> list[list[Cell]]:
    """The stages merged into seed-major groups: the targets' cells of every dataset first
    (so each gets seed 0 before any gets seed 1), then the baselines, then the variants."""
    target = {"fedvn", "fedavg", "self-train"}
    first = [c for s in ordered for c in s if c.method in target]
    rest = [c for s in ordered for c in s if c.method not in target and c.method not in VARIANTS]
    last = [c for s in ordered for c in s if c.method in VARIANTS and c.method != "fedvn"]
    return [g for g in (first, rest, last) if g]


def make_config(cell: Cell, rounds: int) -> tuple[ExperimentConfig, str]:
    """(config, algorithm) of a cell: FedVN's set-up (``--fedvn-setup``) on 5 clients, one
    domain each; FedProx μ = 0.01, Ditto λ = 1 (the slides do not give them)."""
    cfg = ExperimentConfig(
        task="graph", dataset=cell.dataset, clients=5, algorithms=[cell.algorithm], threads=1,
        mu=0.01, protocol=PROTECTIONS[cell.protection],
        fedvn=VARIANTS.get(cell.method, {}).get("fedvn", {}),
        name=f"fedvn-repro|{cell.dataset}|{cell.method}|{cell.protection}",
    )  # fmt: skip
    cfg = apply_setup(cfg)
    graph = {"best_of_last": rounds, **VARIANTS.get(cell.method, {}).get("graph", {})}
    return cfg.replace(rounds=rounds, graph=graph), cell.algorithm
