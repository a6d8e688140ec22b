"""Differential privacy for the protocol layer.

* :mod:`~protocols.dp.accounting` — Opacus RDP/PRV accountants (:class:`PrivacyAccountant`,
  :func:`noise_for_budget`) and pure-DP composition for LDP (:class:`PureDPAccountant`).
* :mod:`~protocols.dp.clip_noise` — DP-FedAvg clip + Gaussian noise, central or distributed
  (:class:`ClipNoiseMechanism`).
* :mod:`~protocols.dp.aggregation` — :class:`DPAggregation`, any mechanism over any
  aggregation protocol (``["clip_noise", "secagg"]``).
* :mod:`~protocols.dp.ldp` — Laplace / Gaussian LDP for per-user updates (FedGNN, FeSoG),
  and FeSoG's heuristic noise (no guarantee).
* :mod:`~protocols.dp.graph_dp` — edge-level DP on adjacency blocks: EdgeRand, LapGraph.
* :mod:`~protocols.dp.dpsgd` — DP-SGD via Opacus (row-level DP only; imported lazily
  because it needs torch).
"""

from __future__ import annotations

from typing import Any

from protocols.dp.accounting import (
    AccountantKind,
    PrivacyAccountant,
    PureDPAccountant,
    noise_for_budget,
)
from protocols.dp.aggregation import DPAggregation, DPClient, DPServer, UpdateMechanism
from protocols.dp.clip_noise import ClipNoiseMechanism, clip_l2, enforced_noise_multiplier
from protocols.dp.graph_dp import edge_rand, edge_rand_flip_probability, lap_graph
from protocols.dp.ldp import (
    GaussianLDP,
    HeuristicLDP,
    LaplaceLDP,
    clip_coordinates,
    fedgnn_epsilon,
)
from protocols.dp.rng import make_rng

#: Stack names → mechanism classes, for building ``DPAggregation`` from a config.
MECHANISMS: dict[str, type] = {
    ClipNoiseMechanism.name: ClipNoiseMechanism,
    LaplaceLDP.name: LaplaceLDP,
    GaussianLDP.name: GaussianLDP,
    HeuristicLDP.name: HeuristicLDP,
}

_LAZY = {"make_private", "make_private_with_epsilon", "PrivateTraining"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from protocols.dp import dpsgd

        return getattr(dpsgd, name)
    raise AttributeError(f"module 'protocols.dp' has no attribute {name!r}")


__all__ = [
    "MECHANISMS",
    "AccountantKind",
    "ClipNoiseMechanism",
    "DPAggregation",
    "DPClient",
    "DPServer",
    "GaussianLDP",
    "HeuristicLDP",
    "LaplaceLDP",
    "PrivacyAccountant",
    "PrivateTraining",
    "PureDPAccountant",
    "UpdateMechanism",
    "clip_coordinates",
    "clip_l2",
    "edge_rand",
    "edge_rand_flip_probability",
    "enforced_noise_multiplier",
    "fedgnn_epsilon",
    "lap_graph",
    "make_private",
    "make_private_with_epsilon",
    "make_rng",
    "noise_for_budget",
]
