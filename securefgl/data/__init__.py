"""Data layer: datasets, generated graphs, splits, partitions and client views.

Flow: ``load_dataset`` / ``csbm`` -> ``random_split`` -> ``partition_graph``
-> ``build_client_views`` (each client receives only what it may see).
"""

from securefgl.data.datasets import (
    DATASETS,
    DatasetCorruptError,
    DatasetError,
    DatasetIntegrityError,
    DatasetNotAvailableError,
    available_datasets,
    cache_dir,
    data_root,
    load_dataset,
    resolve_name,
)
from securefgl.data.partition import (
    METHODS,
    Partition,
    PartitionReport,
    balance_communities,
    kmeans,
    partition_graph,
    partition_report,
)
from securefgl.data.splits import client_split, random_split
from securefgl.data.synthetic import csbm, edge_homophily
from securefgl.data.views import (
    CROSS_EDGE_MODES,
    ClientGraph,
    build_client_views,
    opaque_id_permutation,
)

__all__ = [
    "CROSS_EDGE_MODES",
    "DATASETS",
    "METHODS",
    "ClientGraph",
    "DatasetCorruptError",
    "DatasetError",
    "DatasetIntegrityError",
    "DatasetNotAvailableError",
    "Partition",
    "PartitionReport",
    "available_datasets",
    "balance_communities",
    "build_client_views",
    "cache_dir",
    "client_split",
    "csbm",
    "data_root",
    "edge_homophily",
    "kmeans",
    "load_dataset",
    "opaque_id_permutation",
    "partition_graph",
    "partition_report",
    "random_split",
    "resolve_name",
]
