"""securefgl's attack suite: each attack names its adversary and consumes that adversary's
view (transcript + own data + released artifacts); see ``attacks.base``.

Modules: ``link_stealing`` (He et al. 2021), ``linkteller`` (Wu et al. 2022),
``structure_reconstruction`` (FedStruct Ā messages), ``hop2vec_leakage`` (S-gradients),
``gradient_inversion`` (DLG/iDLG on FedAvg-GCN), ``neighbour_features`` (FedGCN sums),
``membership`` (node MIA), ``dp_audit`` (Steinke et al. 2023 one-run ε lower bound), and
``audit`` (the grid behind ``securefgl audit``).
"""

from attacks.base import AttackResult, not_applicable

__all__ = ["AttackResult", "not_applicable"]
