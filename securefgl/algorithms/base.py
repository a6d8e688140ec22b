"""What every algorithm implements (its parties run in a
:class:`~securefgl.federation.federation.Federation`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from torch_geometric.data import Data

from securefgl.config import ExperimentConfig
from securefgl.federation.federation import Federation

SplitPredictions = dict[str, tuple[np.ndarray, np.ndarray]]  # split -> (y_true, y_pred)


class Algorithm(ABC):
    """One training method. ``federated`` is False for methods that are not (central)."""

    name: ClassVar[str]
    task: ClassVar[str] = "node"  # "graph": graph classification (securefgl.algorithms.registry)
    federated: ClassVar[bool] = True
    needs_global_graph: ClassVar[bool] = False
    needs_cross_edges: ClassVar[bool] = False  # clients must know their cross-client edges
    server_ids: ClassVar[frozenset[str]] = frozenset({"server"})

    def __init__(self, config: ExperimentConfig) -> None:
        self.config = config

    @abstractmethod
    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        """Build the parties; ``global_data`` is given only when ``needs_global_graph``."""

    @abstractmethod
    def train_round(self, round_idx: int) -> float:
        """One round; returns the mean training loss."""

    def protection(self) -> dict[str, str]:
        """How each family of this algorithm's messages travels (``{"model updates":
        "secagg", ...}``), as applied: recorded in result.json."""
        return {}

    def model_label(self) -> str:
        """The model as it is (e.g. ``"GCN"``, ``"MLP on ÂᴸX"``) for result tables."""
        return str(self.config.model).upper()

    def aggregate_error(self) -> float | None:
        """The largest absolute error of any aggregate of the run (max over rounds and
        coordinates) against the float64 weighted mean of the inputs the clients handed to
        the transport: the secure transport's quantisation (fixed point, CKKS noise).
        Measured by the simulator where it holds the parties; None when not measured."""
        return None

    def privacy(self) -> dict[str, Any]:
        """Guarantees the algorithm adds beyond its protocol stack (e.g. FedStruct's edge DP
        on Ā's inputs: ``{"edge_dp": ..., "edge_epsilon": ...}``)."""
        return {}

    @abstractmethod
    def predict(self) -> list[SplitPredictions]:
        """Predictions of the current model(s) for each client's nodes (or the global graph).

        This is the simulator's evaluation oracle, not a protocol message.
        """
