"""The SpreadFGL reproduction grid: cells, their configurations and the papers' numbers
(``benchmarks/data/spreadfgl_paper.json``: SpreadFGL Table II and the survey's FedSage+).

Settings:

* ``table2``: Table II (Zhong et al.): Cora, CiteSeer, Coauthor CS; M ∈ {6, 9, 12, 15};
  labelled ratio 0.3, 20 % test, 10 % validation (the rest unlabelled); partition
  ``louvain-chunks`` (equal-size clients, Table I's cut ratios); LocalFGL, FedAvg-fusion,
  FedSage+, FedGL, SpreadFGL (3 edge servers, ring);
* ``survey``: FedSage / FedSage+ in their own paper's setting (Louvain with FedSage+'s
  balancing, M ∈ {3, 5, 10}, 60 / 20 / 20), beside the survey's numbers, with two numbers
  of local steps per round (``SURVEY_STEPS``: the report keeps the one with the higher
  validation accuracy);
* ``privacy``: FedGL on Cora, M = 9, with each protection of the H uploads (the
  privacy–utility curve; attacks from :mod:`attacks.h_inference`);
* ``bytes``: FedGL on Cora, M = 9, with the patch encodings (dedup / rows / factored);
* ``partition``: FedAvg-fusion and FedGL on the balanced ``louvain`` partition (a cause
  tested for the gap to the paper);
* ``normfeat``: FedAvg-fusion and FedGL with row-normalised features (another cause);
* ``normfeat-scaled``: the same, each client rescaling the generated rows it receives to
  its own rows' mean norm (``generated_scale = "own-norm"``);
* ``mean-ce``: FedAvg-fusion, FedGL and SpreadFGL with Eq. 7 / 15 divided by the labelled
  nodes (the cross-entropy averaged, not summed; the report keeps, per method and cell, the
  reduction with the higher validation accuracy);
* ``f1-clients``: Table II's cells run again as they are, recording also each client's own
  macro-F1 averaged over the clients (a reading of the paper's F1 that would explain why
  its F1 is far below its ACC where ours is not);
* ``tl20``: Table II's cells with T_l = 20 local steps per round (the top of the paper's
  range; Table II's T_l is not given): the report keeps, per method and cell, the T_l with
  the higher validation accuracy;
* ``best-round``: Table II's cells run again as they are, evaluated every ``EVAL_EVERY``
  rounds, recording also the test ACC at the round of the best validation ACC and the best
  test ACC of any round (the paper does not say which round it reports);
* ``table1-cut``: FedAvg-fusion, FedGL and SpreadFGL on Coauthor CS as in Table II, with
  the partition's cut raised to Table I's missing links (44-64 % of the edges, where
  ``louvain-chunks`` cuts 28-46 %: ``partition_cut``);
* ``patcher``: FedGL under ``mean-ce`` with one imputation / patcher choice the paper leaves
  open (§III-C, §III-D) changed (``PATCHER_VARIANTS``, the cell's ``protection``; ``sage``
  also runs FedAvg-fusion, whose model it changes): where FedGL's CiteSeer gap lies;
* ``hparams``: the same with one of the values Table II does not give changed
  (``HPARAM_VARIANTS``: K, k and T_l within the ranges of §IV-A / Figs. 5-6, and the hidden
  width; those that change the classifier run FedAvg-fusion too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.harness.notes import load_data
from securefgl.config import ExperimentConfig

DATASETS = ("Cora", "CiteSeer", "CS")
NOT_RUN = {"WikiCS": "not available offline (no copy in the data root; downloads are off)"}
CLIENTS = (6, 9, 12, 15)
METHODS = ("localfgl", "fedavg-fusion", "fedsage+", "fedgl", "spreadfgl")
SURVEY_CLIENTS = (3, 5, 10)
SURVEY_DATASETS = ("Cora", "CiteSeer")
SURVEY_METHODS = ("fedsage", "fedsage+")
#: survey cells' local steps per round (the cell's ``protection``): "none" is T_l = 10, as
#: Table II; "steps:1" one step. The official code runs one epoch of mini-batches of 32 at
#: lr 0.001 per round (a few small steps), which a full-batch trainer has no exact match for
SURVEY_STEPS = ("none", "steps:1")
PRIVACY_PROTECTIONS = (
    "none", "gaussian:0.5", "gaussian:1", "gaussian:2", "gaussian:4", "rr:0.5", "rr:1",
    "rr:2", "rr:4", "rows:0.5", "rows:0.2",
)  # fmt: skip
BYTES_VARIANTS = ("factored", "rows", "rows-nodedup")
LABELS = {
    "localfgl": "LocalFGL",
    "fedavg-fusion": "FedAvg-fusion",
    "fedsage": "FedSage",
    "fedsage+": "FedSage+",
    "fedgl": "FedGL",
    "spreadfgl": "SpreadFGL",
}
ROUNDS = 100
#: settings that rerun Table II cells with one change, or unchanged with more recorded
#: (``f1-clients``): a cause tested for a gap
CAUSES = ("partition", "normfeat", "normfeat-scaled", "mean-ce", "f1-clients", "table1-cut",
          "best-round", "tl20")  # fmt: skip
#: ``best-round``: rounds between two evaluations
EVAL_EVERY = 5
#: the datasets whose Table I cut no community partition of ours reaches
TABLE1_CUT_DATASETS = ("CS",)
#: settings whose runs enter a choice on validation (table2: only ``REDUCTION_METHODS``):
#: runs without ``val_acc`` are redone
VALIDATED = ("table2", "survey", "mean-ce", "tl20")
#: settings that read more than a run's ACC and F1: runs without that key are redone
READS = {"f1-clients": "f1_clients_true", "best-round": "best_round_acc"}
#: the methods each loss reduction is chosen for on validation (``mean-ce`` runs them)
REDUCTION_METHODS = ("fedavg-fusion", "fedgl", "spreadfgl")
#: the ``patcher`` setting's variants: one SpreadFGL setting each, on top of ``mean-ce``
PATCHER_VARIANTS: dict[str, dict[str, Any]] = {
    "local-edges": {"local_links": "edge"},  # a same-client neighbour: the real edge
    "cross-client": {"candidates": "cross_client"},  # neighbours only on other clients
    "sigmoid": {"feature_act": "sigmoid"},  # X̄ in [0, 1], like binary features
    "own-norm": {"generated_scale": "own-norm"},  # X̄ rows at the client's own rows' norm
    "sage": {"aggregator": "sage"},  # Eq. 3's concatenation: own features kept apart
    "k3": {"top_k": 3},  # fewer virtual neighbours per node
    # two readings of where FedGL's gain comes from: §III-D's literal ∀u,v ∈ V^{ji} (links
    # only inside the client, as real edges: no generated row at all), and virtual nodes
    # with all-zero rows (the patch's hubs without their generated features)
    "own-client": {"candidates": "own_client", "local_links": "edge"},
    "zero-rows": {"generated_scale": "zero"},
}
#: the ``hparams`` setting's variants, on top of ``mean-ce`` (Table II: K = 5, k = 5,
#: T_l = 10, hidden 64): each a change of the experiment configuration
HPARAM_VARIANTS: dict[str, dict[str, Any]] = {
    "k10": {"spreadfgl": {"top_k": 10}},
    "k20": {"spreadfgl": {"top_k": 20}},
    "K10": {"spreadfgl": {"interval": 10}},
    "tl20": {"spreadfgl": {"local_steps": 20}},
    "h16": {"hidden": 16},
    "K1": {"spreadfgl": {"interval": 1}},  # imputation every round: 5× the server's work
}
#: variants that change the classifier itself, so FedAvg-fusion runs them too
MODEL_VARIANTS = ("sage", "tl20", "h16")
PAPER = load_data("spreadfgl_paper")
#: fGen's output layer is last-hidden × num_pred·d; the official 2048 needs 2048·5·d
#: weights per client (70 M on Coauthor CS): capped at this many weights (memory).
MAX_FGEN_OUT = 10_000_000


@dataclass(frozen=True)
class Cell:
    setting: str
    dataset: str
    clients: int
    method: str
    protection: str = "none"

    @property
    def edge_servers(self) -> int:
        return 3 if self.method == "spreadfgl" else 1

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.setting, self.dataset, self.clients, self.edge_servers, self.method,
                self.protection)  # fmt: skip


def row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[k] for k in ("setting", "dataset", "clients", "edge_servers", "method",
                                  "protection"))  # fmt: skip


def plan(
    settings: list[str],
    datasets: list[str],
    clients: list[int],
    methods: list[str],
    variants: list[str] | None = None,
) -> list[Cell]:
    """The cells of ``settings``; ``variants`` narrows the ``patcher`` and ``hparams`` cells
    (default all of each)."""
    cells: list[Cell] = []
    if "table2" in settings:
        cells += [Cell("table2", d, m, meth) for d in datasets for m in clients for meth in methods
                  if meth in METHODS]  # fmt: skip
    if "survey" in settings:
        # --clients / --methods narrow the survey cells when they name any of them
        sizes = [k for k in SURVEY_CLIENTS if k in clients] or SURVEY_CLIENTS
        kinds = [m for m in SURVEY_METHODS if m in methods] or SURVEY_METHODS
        cells += [Cell("survey", d, k, meth, steps) for d in datasets if d in SURVEY_DATASETS
                  for k in sizes for meth in kinds for steps in SURVEY_STEPS]  # fmt: skip
    if "privacy" in settings:
        cells += [Cell("privacy", "Cora", 9, "fedgl", p) for p in PRIVACY_PROTECTIONS]
    if "bytes" in settings:
        cells += [Cell("bytes", "Cora", 9, "fedgl", v) for v in BYTES_VARIANTS]
    known = {"patcher": PATCHER_VARIANTS, "hparams": HPARAM_VARIANTS}
    chosen = [s for s in known if s in settings]
    names = [v for s in chosen for v in known[s]]
    if variants and not chosen:
        raise ValueError("variants narrow only the patcher and hparams settings")
    if unknown := set(variants or ()) - set(names):
        raise ValueError(f"unknown variants {sorted(unknown)}; known: {names}")
    for setting in chosen:
        names = [v for v in known[setting] if not variants or v in variants]
        cells += [Cell(setting, d, m, meth, v) for d in datasets for m in clients
                  for v in names for meth in ("fedavg-fusion", "fedgl")
                  if meth == "fedgl" or v in MODEL_VARIANTS]  # fmt: skip
    for cause in CAUSES:
        if cause in settings:
            both = cause in ("mean-ce", "f1-clients", "table1-cut", "best-round", "tl20")
            kinds = REDUCTION_METHODS if both else ("fedavg-fusion", "fedgl")
            cells += [Cell(cause, d, m, meth) for d in datasets for m in clients
                      for meth in kinds if meth in methods
                      and (cause != "table1-cut" or d in TABLE1_CUT_DATASETS)]  # fmt: skip
    return cells


def _fgen_hidden(dataset_dim: int, num_pred: int = 5) -> list[int]:
    last = 2048
    while last > 64 and last * num_pred * dataset_dim > MAX_FGEN_OUT:
        last //= 2
    return [256, last]


def make_config(cell: Cell, dim: int) -> ExperimentConfig:
    """The configuration of a cell (``dim``: the dataset's feature dimension)."""
    survey = cell.setting == "survey"
    base = ExperimentConfig(
        dataset=cell.dataset, clients=cell.clients,
        partition="louvain" if survey or cell.setting == "partition" else "louvain-chunks",
        train_fraction=0.6 if survey else 0.3, val_fraction=0.2 if survey else 0.1,
        test_fraction=0.2, normalize_features=cell.setting.startswith("normfeat"),
        rounds=ROUNDS,
        eval_every=ROUNDS, hidden=64, dropout=0.5, lr=0.01,
        weight_decay=5e-4, threads=1, edge_servers=cell.edge_servers, server_topology="ring",
        fedsage={"gen_hidden": _fgen_hidden(dim)},
        name=f"spreadfgl-repro|{'|'.join(map(str, cell.key))}",
    )  # fmt: skip
    if cell.setting == "tl20":
        return base.replace(spreadfgl={"local_steps": 20})
    if cell.setting == "best-round":
        return base.replace(eval_every=EVAL_EVERY)
    if cell.setting == "table1-cut":
        return base.replace(partition_cut=table1_cut(cell.dataset, cell.clients))
    if cell.setting == "normfeat-scaled":
        return base.replace(spreadfgl={"generated_scale": "own-norm"})
    if cell.setting == "mean-ce":  # the classifier's CE averaged, as FedSage+'s, not summed
        return base.replace(spreadfgl={"loss_reduction": "mean"})
    if cell.setting == "patcher":
        variant = PATCHER_VARIANTS[cell.protection]
        return base.replace(spreadfgl={"loss_reduction": "mean", **variant})
    if cell.setting == "hparams":
        variant = HPARAM_VARIANTS[cell.protection]
        return base.replace(hidden=variant.get("hidden", base.hidden),
                            spreadfgl={"loss_reduction": "mean", **variant.get("spreadfgl", {})})
    if cell.setting == "bytes":
        encoding = {
            "factored": {},
            "rows": {"patch_encoding": "rows"},
            "rows-nodedup": {"patch_encoding": "rows", "dedup": False},
        }[cell.protection]
        return base.replace(spreadfgl=encoding)  # fmt: skip
    kind, _, value = cell.protection.partition(":")
    if kind == "gaussian":
        return base.replace(spreadfgl={"h_mechanism": "gaussian", "h_noise": float(value)})
    if kind == "rr":
        return base.replace(spreadfgl={"h_mechanism": "rr", "h_epsilon": float(value)})
    if kind == "rows":
        return base.replace(spreadfgl={"h_rows": float(value)})
    if kind == "steps":
        return base.replace(fedsage=base.fedsage.replace(local_steps=int(value)))
    return base


def round_accuracies(history: list[dict[str, Any]]) -> dict[str, Any]:
    """For a run evaluated along the way (``best-round``): the round (1-based) of the best
    validation ACC (the first of equals) and the test ACC there, and the best test ACC of
    any evaluated round, in %; empty for a run evaluated only at its end."""
    evals = [h for h in history if "test_acc" in h]
    if len(evals) < 2:
        return {}
    at_val = max(evals, key=lambda h: h["val_acc"])
    return {"val_round": at_val["round"] + 1,
            "val_round_acc": round(100 * at_val["test_acc"], 2),
            "best_round_acc": round(100 * max(h["test_acc"] for h in evals), 2)}  # fmt: skip


def table1_cut(dataset: str, clients: int) -> float:
    """Table I's missing links as a fraction of its edges."""
    table = PAPER["table1"]
    missing = table["missing_links"][dataset][table["clients"].index(clients)]
    return missing / table["edges"][dataset]


def paper_value(cell: Cell) -> tuple[float | None, float | None, float | None]:
    """(ACC, F1, std) of the paper for a cell (None where it has none)."""
    if cell.setting in ("table2", "patcher", "hparams", *CAUSES):
        table = PAPER["table2"]
        values = table["values"].get(cell.dataset, {}).get(cell.method)
        if values is None or cell.clients not in table["clients"]:
            return None, None, None
        i = table["clients"].index(cell.clients)
        return values["acc"][i], values["f1"][i], None
    if cell.setting == "survey":
        survey = PAPER["fedsage_survey"]
        values = survey["values"].get(cell.dataset, {}).get(cell.method)
        if values is None or cell.clients not in survey["clients"]:
            return None, None, None
        mean, std = values[survey["clients"].index(cell.clients)]
        return mean, None, std
    return None, None, None
