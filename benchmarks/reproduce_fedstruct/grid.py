"""The grid of the FedStruct reproduction (FedStruct, Aliakbari et al., ICLR 2025, Tables 2
and 6): datasets, partitions, K, methods, aggregations and the cells in run order. The
paper's numbers for a cell: :mod:`benchmarks.harness.fedstruct_paper`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

DATASETS = ("Cora", "CiteSeer", "chameleon", "Photo", "PubMed")
PARTITIONS = ("random", "louvain", "kmeans")
RANDOM_CLIENTS = (5, 10, 20)
METHODS = (
    "fedstruct-deg",
    "fedstruct-fedstar",
    "fedstruct-h2v",
    "fedstruct-h2v-f",
    "fedgcn",
    "fedavg",
    "local",
    "central",
)
OPTIONAL_METHODS = ("fedgcn-1hop", "fedstruct-h2v-server-abar")
AGGREGATIONS = ("plain", "ckks")
CKKS_METHODS = ("fedstruct-h2v",)  # the methods run with CKKS aggregation too
FEDSTRUCT_NSF = {
    "fedstruct-deg": ("degree", "receiver"),
    "fedstruct-fedstar": ("fedstar", "receiver"),
    "fedstruct-h2v": ("hop2vec", "receiver"),
    "fedstruct-h2v-f": ("hop2vec", "none"),
}
LABELS = {
    "fedstruct-deg": "FedStruct (DEG)",
    "fedstruct-fedstar": "FedStruct (FED*)",
    "fedstruct-h2v": "FedStruct (H2V)",
    "fedstruct-h2v-f": "FedStruct (H2V)-F",
    "fedgcn": "FedGCN-2hop",
    "fedgcn-1hop": "FedGCN-1hop",
    "fedstruct-h2v-server-abar": "FedStruct (H2V), server-side Ā (official code)",
    "fedavg": "FedSGD GCN",
    "local": "Local GCN",
    "central": "Central GCN",
}
MAX_DENSE_ABAR = 6e7  # n² above which the unpruned (dense) Ā is not attempted (memory)


def row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[k] for k in ("dataset", "partition", "clients", "method", "aggregation"))


@dataclass(frozen=True)
class Cell:
    dataset: str
    partition: str | None  # None for central
    clients: int | None
    method: str
    aggregation: str

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.dataset, self.partition, self.clients, self.method, self.aggregation)


def plan(
    datasets: Iterable[str],
    partitions: Iterable[str],
    clients: Iterable[int],
    methods: Iterable[str],
    aggregations: Iterable[str],
    ckks_settings: Iterable[tuple[str, int]] = (("random", 10),),
) -> list[Cell]:
    """Every cell of the grid, in run order: per dataset, K = 10 random (all methods), then
    Louvain and K-means (K = 10), then the other K. Encrypted aggregations only for
    :data:`CKKS_METHODS` in ``ckks_settings``."""
    parts, ks, methods = list(partitions), list(clients), list(methods)
    settings = [("random", k) for k in ks if "random" in parts]
    settings += [(p, 10) for p in PARTITIONS if p in parts and p != "random"]
    encrypted = set(ckks_settings)
    cells = []
    for ds in datasets:
        if "central" in methods and "plain" in aggregations:
            cells.append(Cell(ds, None, None, "central", "plain"))
        for p, k in settings:
            for method in methods:
                for agg in aggregations:
                    if method == "central":
                        continue
                    if agg != "plain" and (method not in CKKS_METHODS or (p, k) not in encrypted):
                        continue
                    cells.append(Cell(ds, p, k, method, agg))
    order = {d: i for i, d in enumerate(datasets)}
    part_order = {None: -1, "random": 0, "louvain": 1, "kmeans": 2}
    return sorted(  # stable: methods keep their order inside a setting
        cells,
        key=lambda c: (
            order[c.dataset],
            c.clients not in (10, None),
            part_order[c.partition],
            c.clients or 0,
            c.aggregation != "plain",
        ),
    )
