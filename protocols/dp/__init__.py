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

import importlib
from typing import Any

_EXPORTS = {
    **dict.fromkeys(
        ("AccountantKind", "PrivacyAccountant", "PureDPAccountant", "noise_for_budget"),
        "protocols.dp.accounting",
    ),
    **dict.fromkeys(
        ("DPAggregation", "DPClient", "DPServer", "UpdateMechanism"), "protocols.dp.aggregation"
    ),
    **dict.fromkeys(
        ("ClipNoiseMechanism", "clip_l2", "enforced_noise_multiplier"), "protocols.dp.clip_noise"
    ),
    **dict.fromkeys(
        ("edge_rand", "edge_rand_flip_probability", "lap_graph"), "protocols.dp.graph_dp"
    ),
    **dict.fromkeys(
        ("GaussianLDP", "HeuristicLDP", "LaplaceLDP", "clip_coordinates", "fedgnn_epsilon"),
        "protocols.dp.ldp",
    ),
    "make_rng": "protocols.dp.rng",
    # DP-SGD needs torch
    **dict.fromkeys(
        ("make_private", "make_private_with_epsilon", "PrivateTraining"), "protocols.dp.dpsgd"
    ),
}


def _mechanisms() -> dict[str, type]:
    """Stack names → mechanism classes, for building ``DPAggregation`` from a config."""
    from protocols.dp.clip_noise import ClipNoiseMechanism
    from protocols.dp.ldp import GaussianLDP, HeuristicLDP, LaplaceLDP

    return {
        ClipNoiseMechanism.name: ClipNoiseMechanism,
        LaplaceLDP.name: LaplaceLDP,
        GaussianLDP.name: GaussianLDP,
        HeuristicLDP.name: HeuristicLDP,
    }


def __getattr__(name: str) -> Any:
    """The names of the submodules, imported on first use (``import protocols.dp.accounting``
    stays cheap)."""
    if name == "MECHANISMS":
        return _mechanisms()
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
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
