"""Data layer: datasets, generated graphs, splits, partitions and client views.

Flow: ``load_dataset`` / ``csbm`` -> ``random_split`` -> ``partition_graph``
-> ``build_client_views`` (each client receives only what it may see). The names below
are imported on first use: :mod:`securefgl.data.catalog` (every dataset's name, no torch)
can be read without loading torch and PyG.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    **dict.fromkeys(
        (
            "DATASETS", "available_datasets", "cache_dir", "data_root", "resolve_name",
        ),
        "securefgl.data.catalog",
    ),
    **dict.fromkeys(
        (
            "DatasetCorruptError", "DatasetError", "DatasetIntegrityError",
            "DatasetNotAvailableError",
        ),
        "securefgl.data.integrity",
    ),
    "load_dataset": "securefgl.data.datasets",
    **dict.fromkeys(
        (
            "METHODS", "Partition", "PartitionReport", "balance_communities", "kmeans",
            "partition_graph", "partition_report",
        ),
        "securefgl.data.partition",
    ),
    "client_split": "securefgl.data.splits",
    "random_split": "securefgl.data.splits",
    "csbm": "securefgl.data.synthetic",
    "edge_homophily": "securefgl.data.synthetic",
    **dict.fromkeys(
        ("CROSS_EDGE_MODES", "ClientGraph", "build_client_views", "opaque_id_permutation"),
        "securefgl.data.views",
    ),
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'securefgl.data' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
