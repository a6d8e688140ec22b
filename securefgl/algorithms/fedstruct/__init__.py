"""FedStruct (Aliakbari et al., ICLR 2025): decoupled subgraph federated learning.

Modules: ``settings`` (the section, Table 5 presets), ``abar_central`` (Ā on the global
graph, the simulator's reference), ``abar_client`` / ``abar_build`` / ``abar_secure`` (the
federated Ā of Algorithm 3, plain or by secure sums), ``edge_dp`` (edge DP on Ā's inputs),
``nsf`` and ``model`` (the predictor), ``parties`` (client and server), ``algorithm``
(training).
"""

from collections.abc import Sequence

from securefgl.algorithms.fedstruct.settings import FedStructSettings, apply_preset
from securefgl.config.families import Family, Preset, Section


def _classes() -> Sequence[type]:
    from securefgl.algorithms.fedstruct.algorithm import FedStruct

    return (FedStruct,)


FAMILY = Family(
    name="fedstruct",
    algorithms=("fedstruct",),
    load=_classes,
    section=Section(
        "fedstruct", FedStructSettings,
        "FedStruct (Aliakbari et al. 2025; default: the dataset's Table 5 preset)",
    ),  # fmt: skip
    presets=(
        Preset(
            "preset",
            "FedStruct Table 5 lr / weight decay / dropout / rounds for the dataset (explicit "
            "flags still win)",
            apply_preset,
        ),
    ),
)
