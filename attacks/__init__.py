"""securefgl's attack suite: each attack names its adversary and consumes that adversary's
view (transcript + own data + released artifacts); see ``attacks.base``.

Modules: ``link_stealing`` (He et al. 2021), ``linkteller`` (Wu et al. 2022),
``structure_reconstruction`` (FedStruct Ā messages), ``hop2vec_leakage`` (S-gradients),
``gradient_inversion`` (DLG/iDLG on FedAvg-GCN), ``neighbour_features`` (FedGCN sums),
``membership`` (node MIA), ``dp_audit`` (Steinke et al. 2023 one-run ε lower bound), and
``audit`` (the grid behind ``securefgl audit``), ``sweep`` (the privacy–utility frontier
behind ``securefgl sweep``). On a run you trained: ``attacks.run(result, name)``
(:mod:`attacks.api`).
"""

from typing import Any

from attacks.base import AttackResult, not_applicable

__all__ = ["AttackResult", "keep_tags", "not_applicable", "run"]


def __getattr__(name: str) -> Any:
    """``run`` and ``keep_tags`` load the attack registry (torch, PyG) on first use."""
    if name in ("run", "keep_tags"):
        from attacks import api

        return getattr(api, name)
    raise AttributeError(f"module 'attacks' has no attribute {name!r}")
