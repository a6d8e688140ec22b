"""GPFL (Graph Personalized Federated Learning, TMLR 2025) with a private server view.

Modules: :mod:`~securefgl.algorithms.gpfl.settings` (``[experiment.gpfl]``),
:mod:`~securefgl.algorithms.gpfl.properties` (graph properties, LDP release, rule-based
selector), :mod:`~securefgl.algorithms.gpfl.network` (client features, A_t, the GAE, W),
:mod:`~securefgl.algorithms.gpfl.parties` and :mod:`~securefgl.algorithms.gpfl.algorithm`. The
long form: securefgl/algorithms/gpfl/README.md."""

from collections.abc import Sequence

from securefgl.algorithms.gpfl.settings import GPFLSettings
from securefgl.config.families import Family, Section


def _classes() -> Sequence[type]:
    from securefgl.algorithms.gpfl.algorithm import GPFL

    return (GPFL,)


FAMILY = Family(
    name="gpfl",
    algorithms=("gpfl",),
    load=_classes,
    task="graph",
    section=Section(
        "gpfl", GPFLSettings, "GPFL (TMLR 2025): client network, private similarity and sums",
        "gpfl-",
    ),  # fmt: skip
)
