"""The FedGLS reproduction grid (Fu et al., TMLR, Tables 1-3) and the paper's number for a
cell, read from ``benchmarks/data/fedgls_paper.json``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.harness.notes import load_data

PAPER = load_data("fedgls_paper")
DATASETS = ("Cora", "CiteSeer", "PubMed")
NOT_RUN = {
    "Flickr": "not available offline (no copy in the data root; downloads are off)",
    "ogbn-arxiv": "not available offline (OGB is not in the data root; downloads are off)",
}
METHODS = (
    "fed-mlp", "fed-gnnmlp", "fedproto", "local-gnnk", "fed-gnnk", "fedgls", "fed-gnn-oracle",
)  # fmt: skip
TABLE23_METHODS = ("fed-mlp", "fed-gnnk", "fedgls")
LABELS = {
    "fed-mlp": "Fed-MLP",
    "fed-gnnmlp": "Fed-GNNMLP",
    "fedproto": "FedProto",
    "local-gnnk": "Local-GNNk",
    "fed-gnnk": "Fed-GNNk",
    "fedgls": "FedGLS",
    "fed-gnn-oracle": "Fed-GNN (oracle)",
}
PROTOCOL_CHECK = ("Cora", ("secagg", "ckks"))  # FedGLS under secure aggregation vs plain
#: Table 3's ratios |C1|:|C2| on PubMed's 16 clients, as graphless fractions
RATIOS = {0.25: "12:4", 0.5: "8:8", 0.75: "4:12"}
EPOCHS = (3, 5, 10)
#: Diagnostics: settings the paper does not give, each on top of the preset (variant rows
#: go to fedgls_diagnostics.json, never into fedgls.json)
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "k5": {"fedgls": {"knn_k": 5}},
    "k20": {"fedgls": {"knn_k": 20}},
    "k30": {"fedgls": {"knn_k": 30}},
    "split-C": {"fedgls": {"split": "C"}},
    "kd-mean": {"fedgls": {"kd_reduction": "batchmean"}},
    "adam-kept": {"fedgls": {"optimizer_state": "keep"}},
    "weight-decay": {"weight_decay": 5e-4},
    "partition-louvain": {"partition": "louvain"},  # every node, balanced communities
    "knn-binary": {"fedgls": {"knn_graph": "binary"}},  # the kNN baselines' graph only
    "learner-lr10": {"fedgls": {"learner_lr": 1e-2}},  # ω moves 10× faster than the paper's
    "learner-frozen": {"fedgls": {"learner_lr": 0.0}},  # γ = 0: the graphs stay the kNN graphs
    "normfeat": {"normalize_features": True},  # rows of X sum to 1 (PyG NormalizeFeatures)
    "no-dropout": {"dropout": 0.0},  # the paper gives no dropout (the preset's is 0.5)
}
#: the methods a variant changes (default: FedGLS and Fed-GNNk)
VARIANT_METHODS = {
    "knn-binary": ("fed-gnnk", "local-gnnk"),
    "learner-frozen": ("fedgls",),
    "learner-lr10": ("fedgls",),
    "normfeat": ("fed-mlp", "fed-gnnk", "fedgls"),  # does it explain Fed-MLP's PubMed lead?
    "weight-decay": ("fed-mlp", "fed-gnnk", "fedgls"),  # or does regularisation?
    "no-dropout": ("fed-mlp", "fed-gnnk", "fedgls"),  # or less of it?
    "adam-kept": ("fed-mlp", "fed-gnnk", "fedgls"),  # or the optimiser's state across rounds?
}
#: ``--select``: the open settings chosen per method and dataset on validation accuracy, one
#: factor at a time around the preset (k = 10, split A); k only for the methods with a kNN
SELECTION = ("default", "k5", "k20", "split-C")
KNN_METHODS = ("local-gnnk", "fed-gnnk", "fedgls")


@dataclass(frozen=True)
class Cell:
    dataset: str
    clients: int
    graphless_fraction: float
    local_epochs: int
    method: str
    protocol: str  # "plain", "secagg", "ckks"
    variant: str = "default"

    @property
    def key(self) -> tuple[Any, ...]:
        return (
            self.dataset, self.clients, self.graphless_fraction, self.local_epochs,
            self.method, self.protocol, self.variant,
        )  # fmt: skip

    @property
    def tables(self) -> list[str]:
        """The paper's tables this cell belongs to."""
        plain = self.protocol == "plain"
        half, five = self.graphless_fraction == 0.5, self.local_epochs == 5
        small = self.method in TABLE23_METHODS
        if self.variant != "default":
            return []
        out = ["1"] if plain and half and five else []
        if plain and half and small and self.dataset in PAPER["table2"]["values"]:
            out.append("2")
        if plain and five and small and self.dataset == "PubMed":
            out.append("3")
        return out


KEY_FIELDS = ("dataset", "clients", "graphless_fraction", "local_epochs", "method", "protocol")


def row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (*(row[k] for k in KEY_FIELDS), row.get("variant", "default"))


def clients_of(dataset: str) -> int:
    return int(PAPER["setup"]["clients"][dataset])


def paper_value(cell: Cell) -> tuple[float, float | None] | None:
    """The paper's (mean, std or None) for a cell, or None (no such number)."""
    if cell.protocol != "plain" or cell.variant != "default":
        return None  # the paper has no secure-aggregation runs
    t1 = PAPER["table1"]["values"].get(cell.dataset, {}).get(cell.method)
    if cell.graphless_fraction == 0.5 and cell.local_epochs == 5 and t1 is not None:
        return t1[0], t1[1]
    if cell.graphless_fraction == 0.5:
        t2 = PAPER["table2"]["values"].get(cell.dataset, {}).get(cell.method)
        if t2 is not None and cell.local_epochs in PAPER["table2"]["epochs"]:
            return t2[PAPER["table2"]["epochs"].index(cell.local_epochs)], None
    if cell.local_epochs == 5 and cell.graphless_fraction in RATIOS:
        t3 = PAPER["table3"]["values"].get(cell.dataset, {}).get(cell.method)
        ratios = PAPER["table3"]["ratios"].get(cell.dataset, [])
        if t3 is not None and RATIOS[cell.graphless_fraction] in ratios:
            return t3[ratios.index(RATIOS[cell.graphless_fraction])], None
    return None


def plan(datasets: tuple[str, ...] | list[str], tables: str = "123p") -> list[Cell]:
    """Every cell, in run order: per dataset Table 1 (and Cora's protocol check), then
    Table 2's other E, then Table 3's other ratios (PubMed)."""
    cells: list[Cell] = []
    for ds in datasets:
        k = clients_of(ds)
        if "1" in tables:
            cells += [Cell(ds, k, 0.5, 5, m, "plain") for m in METHODS]
        if "p" in tables and ds == PROTOCOL_CHECK[0]:
            cells += [Cell(ds, k, 0.5, 5, "fedgls", p) for p in PROTOCOL_CHECK[1]]
    for ds in datasets:
        k = clients_of(ds)
        if "2" in tables and ds in PAPER["table2"]["values"]:
            cells += [
                Cell(ds, k, 0.5, e, m, "plain") for e in EPOCHS if e != 5 for m in TABLE23_METHODS
            ]
        if "3" in tables and ds == "PubMed":
            cells += [
                Cell(ds, k, f, 5, m, "plain") for f in RATIOS if f != 0.5 for m in TABLE23_METHODS
            ]
    return list(dict.fromkeys(cells))


def diagnostics(datasets: list[str], variants: list[str]) -> list[Cell]:
    """FedGLS and Fed-GNNk (or :data:`VARIANT_METHODS`) under each diagnostic variant
    (Table 1's setting)."""
    return [
        Cell(ds, clients_of(ds), 0.5, 5, m, "plain", v)
        for ds in datasets
        for v in variants
        if v != "default"
        for m in VARIANT_METHODS.get(v, ("fedgls", "fed-gnnk"))
    ]


def selection_cells(datasets: list[str] | tuple[str, ...]) -> list[Cell]:
    """Table 1's cells under every candidate setting of :data:`SELECTION`."""
    return [
        Cell(ds, clients_of(ds), 0.5, 5, m, "plain", v)
        for ds in datasets
        for m in METHODS
        for v in SELECTION
        if m in KNN_METHODS or not v.startswith("k")
    ]
