"""Algorithms by name."""

from securefgl.algorithms.base import Algorithm, Federation, SplitPredictions
from securefgl.algorithms.central import Central
from securefgl.algorithms.fedavg import FedAvg, FedProx
from securefgl.algorithms.local import Local

ALGORITHMS: dict[str, type[Algorithm]] = {a.name: a for a in (FedAvg, FedProx, Local, Central)}

__all__ = ["ALGORITHMS", "Algorithm", "Federation", "SplitPredictions"]

# FedStruct subclasses FedAvg and registers itself into ALGORITHMS when its module loads;
# importing it here (last) avoids a circular import.
import securefgl.algorithms.fedgcn  # noqa: E402, F401  (FedGCN registers itself likewise)
import securefgl.fedstruct.algorithm  # noqa: E402, F401
