"""FedGCN (Yao et al., NeurIPS 2023): pre-training neighbour sums, then FedAvg on the
propagated features.

Modules: ``settings``, ``neighbour_sums`` (the secure pre-training sums), ``parties``,
``algorithm``.
"""

from collections.abc import Sequence

from securefgl.algorithms.fedgcn.settings import FedGCNSettings
from securefgl.config.families import Family, Section


def _classes() -> Sequence[type]:
    from securefgl.algorithms.fedgcn.algorithm import FedGCN, FedGCN1Hop

    return (FedGCN, FedGCN1Hop)


FAMILY = Family(
    name="fedgcn",
    algorithms=("fedgcn", "fedgcn-1hop"),
    load=_classes,
    section=Section("fedgcn", FedGCNSettings, "FedGCN (Yao et al. 2023)", "fedgcn-"),
)
