"""FedGLS (Fu et al., "Federated Graph Learning with Graphless Clients", TMLR) and its
baselines on securefgl's runtime.

:mod:`~securefgl.algorithms.fedgls.settings` (the ``[experiment.fedgls]`` section and the
paper's preset), :mod:`~securefgl.algorithms.fedgls.graphless` (which clients are graphless;
their edge-free views), :mod:`~securefgl.algorithms.fedgls.models` (GCN f, MLP h, sparse
propagation), :mod:`~securefgl.algorithms.fedgls.learner` (the attentive graph learner g),
:mod:`~securefgl.algorithms.fedgls.losses` (Eq. 8-11),
:mod:`~securefgl.algorithms.fedgls.clients` (Algorithm 1's local step and the baselines'),
:mod:`~securefgl.algorithms.fedgls.algorithm` (FedGLS and the FedAvg baselines),
:mod:`~securefgl.algorithms.fedgls.prototypes` (FedProto) and
:mod:`~securefgl.algorithms.fedgls.local` (Local-GNNk). See this folder's README.md."""

from collections.abc import Sequence

from securefgl.algorithms.fedgls.settings import FedGLSSettings, apply_preset
from securefgl.config.families import Family, Preset, Section


def _classes() -> Sequence[type]:
    from securefgl.algorithms.fedgls.algorithm import (
        FedGLS,
        FedGNNk,
        FedGNNMLP,
        FedGNNOracle,
        FedMLP,
    )
    from securefgl.algorithms.fedgls.local import LocalGNNk
    from securefgl.algorithms.fedgls.prototypes import FedProto

    return (FedGLS, FedMLP, FedGNNMLP, FedProto, LocalGNNk, FedGNNk, FedGNNOracle)


FAMILY = Family(
    name="fedgls",
    algorithms=(
        "fedgls", "fed-mlp", "fed-gnnmlp", "fedproto", "local-gnnk", "fed-gnnk", "fed-gnn-oracle",
    ),  # fmt: skip
    load=_classes,
    section=Section("fedgls", FedGLSSettings, "FedGLS family (Fu et al., TMLR)", "fedgls-"),
    presets=(
        Preset(
            "fedgls-preset",
            "FedGLS's set-up for the dataset: louvain-largest partition, 60/20/20 per client, "
            "hidden 16, lr 0.01, E = 5, the paper's K and rounds (flags still win)",
            apply_preset,
        ),
    ),
)
