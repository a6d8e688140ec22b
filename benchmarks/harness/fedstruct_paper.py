"""The FedStruct paper's numbers for a cell, read from ``benchmarks/data/fedstruct_paper.json``
(FedStruct, Aliakbari et al., ICLR 2025, Tables 2 and 6). Shared by two scripts: the
FedStruct reproduction (``python -m benchmarks.reproduce_fedstruct``) and the baselines
(``python -m benchmarks.baselines``)."""

from __future__ import annotations

from benchmarks.harness.notes import load_data

# Diagnostic: H2V with Ā computed as the official code does (server side from the global
# graph, global top-p·n pruning; abar="oracle", not private), scored against H2V's numbers.
SERVER_ABAR_METHODS = {"fedstruct-h2v-server-abar": "fedstruct-h2v"}
PAPER = load_data("fedstruct_paper")
PAPER_RUNS = PAPER["runs"]  # the paper reports mean ± std over 10 runs

Paper = tuple[float, float] | None


def _pair(value: list[float] | None) -> Paper:
    return None if value is None else (value[0], value[1])


def paper_value(dataset: str, partition: str | None, clients: int | None, method: str) -> Paper:
    """The paper's (mean, std) for a cell, or None (not reported)."""
    method = SERVER_ABAR_METHODS.get(method, method)
    if method == "central":
        return _pair(PAPER["central"]["values"].get(dataset))
    table2, table6 = PAPER["table2"], PAPER["table6"]
    if partition == "random" and clients in table2["clients"]:
        row = table2["values"].get(dataset, {}).get(method)
        if row is not None:
            return _pair(row[table2["clients"].index(clients)])
    if clients == 10 and partition in table6["partitions"]:
        row = table6["values"].get(dataset, {}).get(method)
        if row is not None:
            return _pair(row[table6["partitions"].index(partition)])
    return None
