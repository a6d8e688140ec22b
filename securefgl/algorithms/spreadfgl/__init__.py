"""SpreadFGL and FedGL (Zhong et al., edge-client collaborative FGL with adaptive neighbour
generation) and their baselines FedAvg-fusion and LocalFGL.

:mod:`~securefgl.algorithms.spreadfgl.settings` (the ``[experiment.spreadfgl]`` section),
:mod:`~securefgl.algorithms.common.edge.model` (GraphSAGE-GCN on sparse and generated rows),
:mod:`~securefgl.algorithms.spreadfgl.client` (a client and its patcher),
:mod:`~securefgl.algorithms.spreadfgl.h_release` (protections of the H uploads),
:mod:`~securefgl.algorithms.spreadfgl.server` (an edge server),
:mod:`~securefgl.algorithms.spreadfgl.imputation` (potential links, autoencoder and assessor),
:mod:`~securefgl.algorithms.spreadfgl.patch` (the repaired-subgraph message),
:mod:`~securefgl.algorithms.spreadfgl.algorithm` (the round loop). See
``securefgl/algorithms/spreadfgl/README.md``."""

from collections.abc import Sequence

from securefgl.algorithms.spreadfgl.settings import SpreadFGLSettings
from securefgl.config.families import Family, Section


def _classes() -> Sequence[type]:
    from securefgl.algorithms.spreadfgl.algorithm import FedAvgFusion, FedGL, LocalFGL, SpreadFGL

    return (SpreadFGL, FedGL, FedAvgFusion, LocalFGL)


FAMILY = Family(
    name="spreadfgl",
    algorithms=("spreadfgl", "fedgl", "fedavg-fusion", "localfgl"),
    load=_classes,
    section=Section(
        "spreadfgl", SpreadFGLSettings, "SpreadFGL / FedGL (Zhong et al.) and their baselines",
        "spreadfgl-",
    ),  # fmt: skip
)
