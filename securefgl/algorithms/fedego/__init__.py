"""FedEgo (Zhang et al., ACM TKDD 2023): ego-graph embedding, ego-graph mixup and a server
that trains the personalised layers on the mixed graphs, with the shared layers averaged
through the protocol stack and optional DP on the mixed graphs; and the baselines of its
Tables 2-3 (FedAvg, FedProx, Local) on the same model.

Modules: :mod:`~securefgl.algorithms.fedego.settings` (``[experiment.fedego]``),
:mod:`~securefgl.algorithms.fedego.model` (ego-graph trees, EgoNet),
:mod:`~securefgl.algorithms.fedego.parties`, :mod:`~securefgl.algorithms.fedego.algorithm`.
The label-skew clients: :mod:`securefgl.data.label_skew`. The long form:
securefgl/algorithms/fedego/README.md."""

from collections.abc import Sequence

from securefgl.algorithms.fedego.settings import FedEgoSettings
from securefgl.config.families import Family, Section


def _classes() -> Sequence[type]:
    from securefgl.algorithms.fedego.algorithm import EgoFedAvg, EgoFedProx, EgoLocal, FedEgo

    return (FedEgo, EgoFedAvg, EgoFedProx, EgoLocal)


FAMILY = Family(
    name="fedego",
    algorithms=("fedego", "fedego-fedavg", "fedego-fedprox", "fedego-local"),
    load=_classes,
    section=Section(
        "fedego", FedEgoSettings, "FedEgo (TKDD 2023): ego-graph mixup, shared layers", "fedego-"
    ),
)
