"""Graph classification: GIN clients, fast graph batches and the baselines of GPFL's Table 2.

Modules: :mod:`~securefgl.algorithms.common.graph.settings` (the ``[experiment.graph]``
section), :mod:`~securefgl.algorithms.common.graph.models` (GIN, FedStar's GIN_dc),
:mod:`~securefgl.algorithms.common.graph.batching`,
:mod:`~securefgl.algorithms.common.graph.training`,
:mod:`~securefgl.algorithms.graphcls.parties` (what a client holds),
:mod:`~securefgl.algorithms.graphcls.fedavg` (self-train, FedAvg, FedProx, FedBN, FedStar),
:mod:`~securefgl.algorithms.graphcls.ditto` (Ditto) and
:mod:`~securefgl.algorithms.graphcls.gcfl` (GCFL+). GPFL itself:
:mod:`securefgl.algorithms.gpfl`."""

from collections.abc import Sequence

from securefgl.algorithms.common.graph.settings import GraphTaskSettings
from securefgl.config.families import Family, Section


def _classes() -> Sequence[type]:
    from securefgl.algorithms.graphcls.ditto import Ditto
    from securefgl.algorithms.graphcls.fedavg import (
        FedBN,
        FedStar,
        GraphFedAvg,
        GraphFedProx,
        SelfTrain,
    )
    from securefgl.algorithms.graphcls.gcfl import GCFLPlus

    return (SelfTrain, GraphFedAvg, GraphFedProx, FedBN, Ditto, GCFLPlus, FedStar)


FAMILY = Family(
    name="graphcls",
    algorithms=("self-train", "fedavg", "fedprox", "fedbn", "ditto", "gcfl", "fedstar"),
    load=_classes,
    task="graph",
    section=Section(
        "graph", GraphTaskSettings,
        "graph classification (--task graph; defaults: GPFL's set-up)", "graph-",
        task_wide=True,
    ),  # fmt: skip
    defaults=("self-train", "fedavg"),
)
