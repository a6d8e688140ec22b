"""Every algorithm by name: an explicit table (adding an algorithm is one line here).

Each algorithm class declares what it needs (``federated``, ``needs_cross_edges``,
``needs_global_graph``); :func:`check_config` checks a configuration against them.
"""

from __future__ import annotations

from securefgl.algorithms.base import Algorithm
from securefgl.algorithms.central import Central
from securefgl.algorithms.fedavg import FedAvg, FedProx
from securefgl.algorithms.local import Local
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.fedgcn.algorithm import FedGCN, FedGCN1Hop
from securefgl.fedgls.algorithm import FedGLS, FedGNNk, FedGNNMLP, FedGNNOracle, FedMLP
from securefgl.fedgls.local import LocalGNNk
from securefgl.fedgls.prototypes import FedProto
from securefgl.fedsage.algorithm import FedSage, FedSagePlus
from securefgl.fedstruct.algorithm import FedStruct
from securefgl.gpfl.algorithm import GPFL
from securefgl.graphcls.fedavg import FedStar, GraphFedAvg, GraphFedProx, SelfTrain
from securefgl.graphcls.gcfl import GCFLPlus
from securefgl.spreadfgl.algorithm import FedAvgFusion, FedGL, LocalFGL, SpreadFGL

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls
    for cls in (
        *(FedAvg, FedProx, Local, Central, FedGCN, FedGCN1Hop, FedStruct),
        *(FedGLS, FedMLP, FedGNNMLP, FedProto, LocalGNNk, FedGNNk, FedGNNOracle),
        *(SpreadFGL, FedGL, FedAvgFusion, LocalFGL, FedSage, FedSagePlus),
    )
}


#: Graph-classification algorithms (``task = "graph"``): names may repeat node-task names.
GRAPH_ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls for cls in (SelfTrain, GraphFedAvg, GraphFedProx, GCFLPlus, FedStar, GPFL)
}
TASK_ALGORITHMS: dict[str, dict[str, type[Algorithm]]] = {
    "node": ALGORITHMS,
    "graph": GRAPH_ALGORITHMS,
}


def algorithm_class(name: str, task: str = "node") -> type[Algorithm]:
    """The class of algorithm ``name`` for ``task`` (each class declares its ``task``)."""
    table = TASK_ALGORITHMS[task]
    if name not in table:
        what = "algorithms value" if task == "node" else f"algorithm for task {task!r}"
        raise ConfigError(f"unknown {what} {name!r}; choose from {sorted(table)}")
    return table[name]


def cross_edge_mode(config: ExperimentConfig) -> str:
    """``config.cross_edges``, or when unset: ``known`` iff an algorithm needs it."""
    if config.cross_edges is not None:
        return config.cross_edges
    if config.task == "graph":
        return "hidden"  # whole graphs per client: no cross-client edges
    needs = any(algorithm_class(a).needs_cross_edges for a in config.algorithms)
    return "known" if needs else "hidden"


def check_config(config: ExperimentConfig) -> ExperimentConfig:
    """The algorithms exist and their needs are met (raises :class:`ConfigError`)."""
    for name in config.algorithms:
        cls = algorithm_class(name, config.task)
        if cls.needs_cross_edges and cross_edge_mode(config) != "known":
            raise ConfigError(
                f"{name} needs cross_edges = 'known' (its clients know their edges to other "
                "clients' nodes)"
            )
    return config
