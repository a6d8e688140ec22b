"""FedStruct (Aliakbari et al., ICLR 2025): decoupled subgraph federated learning.

Modules: ``settings`` (options, Table 5 presets), ``abar_central`` (Ā on the global
graph, the simulator's reference), ``abar_client`` / ``abar_build`` / ``abar_secure`` (the
federated Ā of Algorithm 3, plain or by secure sums), ``edge_dp`` (edge DP on Ā's inputs),
``nsf`` and ``model`` (the predictor), ``parties`` (client and server), ``algorithm``
(training). Import-light on purpose: the algorithm is imported by :mod:`securefgl.registry`.
"""

from securefgl.fedstruct.abar_build import (
    AbarBuildReport,
    HopContext,
    HopStats,
    HopSum,
    PlainHopSum,
    build_abar,
)
from securefgl.fedstruct.abar_central import (
    central_abar,
    keep_top_values,
    normalized_adjacency,
    resolve_beta,
)
from securefgl.fedstruct.abar_client import AdjacencyClient, AdjacencyRelay, SparseRows

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
