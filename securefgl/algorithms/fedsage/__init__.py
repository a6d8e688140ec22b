"""FedSage and FedSage+ (Zhang et al., "Subgraph federated learning with missing neighbor
generation", NeurIPS 2021) on the edge runtime (:mod:`securefgl.algorithms.common.edge`).

:mod:`~securefgl.algorithms.fedsage.settings` (the ``[experiment.fedsage]`` section),
:mod:`~securefgl.algorithms.fedsage.neighgen` (impaired graph, NeighGen, losses),
:mod:`~securefgl.algorithms.fedsage.clients` (the cross-client fGen training through the channel),
:mod:`~securefgl.algorithms.fedsage.algorithm`. See ``securefgl/algorithms/fedsage/README.md``.
"""

from collections.abc import Sequence

from securefgl.algorithms.fedsage.settings import FedSageSettings
from securefgl.config.families import Family, Section


def _classes() -> Sequence[type]:
    from securefgl.algorithms.fedsage.algorithm import FedSage, FedSagePlus

    return (FedSage, FedSagePlus)


FAMILY = Family(
    name="fedsage",
    algorithms=("fedsage", "fedsage+"),
    load=_classes,
    section=Section(
        "fedsage", FedSageSettings, "FedSage+ (Zhang et al., NeurIPS 2021)", "fedsage-"
    ),
)
