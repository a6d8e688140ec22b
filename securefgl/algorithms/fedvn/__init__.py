"""FedVN (Fu et al., AAAI 2025): shared virtual nodes, a personal edge generator.

Modules: :mod:`~securefgl.algorithms.fedvn.settings` (``[experiment.fedvn]``),
:mod:`~securefgl.algorithms.fedvn.model` (the VN-augmented GIN θ, the edge generator ω, the
losses), :mod:`~securefgl.algorithms.fedvn.parties` and
:mod:`~securefgl.algorithms.fedvn.algorithm`. The long form:
securefgl/algorithms/fedvn/README.md."""

from collections.abc import Sequence
from typing import Any

from securefgl.algorithms.common.graph.settings import FEDVN_SETUP
from securefgl.algorithms.fedvn.settings import FedVNSettings
from securefgl.config.families import Family, Preset, Section


def _classes() -> Sequence[type]:
    from securefgl.algorithms.fedvn.algorithm import FedVN

    return (FedVN,)


def apply_setup(config: Any, dataset: str | None = None) -> Any:
    """FedVN's set-up (§5.1 and its code): GIN-BN of width 100, SGD lr 10⁻³ without weight
    decay, batches of 32 (evaluated in batches of 32), 100 rounds of one local epoch, every
    round evaluated, the best of all rounds reported beside the last (the code's metric)."""
    rounds = 100
    return config.replace(
        task="graph", rounds=rounds, local_epochs=1, eval_every=1,
        graph={**FEDVN_SETUP, "best_of_last": rounds},
    )  # fmt: skip


FAMILY = Family(
    name="fedvn",
    algorithms=("fedvn",),
    load=_classes,
    task="graph",
    section=Section(
        "fedvn", FedVNSettings,
        "FedVN (AAAI 2025): shared virtual nodes, personal edge generator, s_global sums",
        "fedvn-",
    ),  # fmt: skip
    presets=(
        Preset(
            "fedvn-setup",
            "FedVN's backbone and budget for [experiment.graph] (GIN-BN width 100, SGD lr "
            "1e-3, batch 32, 100 rounds evaluated every round; explicit flags still win)",
            apply_setup,
        ),
    ),
)
