"""FedStruct (Aliakbari et al., ICLR 2025): decoupled subgraph federated learning.

Import-light on purpose (numpy/scipy only here); model and training modules live in
their own submodules.
"""

from securefgl.fedstruct.adjacency import (
    AbarBuildReport,
    AdjacencyClient,
    AdjacencyRelay,
    HopContext,
    HopStats,
    HopSum,
    PlainHopSum,
    SparseRows,
    build_abar,
    central_abar,
    keep_top_values,
    normalized_adjacency,
    resolve_beta,
)

__all__ = [
    "AbarBuildReport",
    "AdjacencyClient",
    "AdjacencyRelay",
    "HopContext",
    "HopStats",
    "HopSum",
    "PlainHopSum",
    "SparseRows",
    "build_abar",
    "central_abar",
    "keep_top_values",
    "normalized_adjacency",
    "resolve_beta",
]
