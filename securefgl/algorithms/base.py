"""What every algorithm implements, and the simulation context it runs in."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from torch_geometric.data import Data

from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import Channel, Executor, LocalExecutor, Party
from securefgl.federation.recipes import Recipe
from securefgl.federation.stack import ProtocolStack

SplitPredictions = dict[str, tuple[np.ndarray, np.ndarray]]  # split -> (y_true, y_pred)


@dataclass
class Federation:
    """What a federated algorithm may use: the client views and the wiring between parties.

    There is no global graph here: only the simulator (and ``central``) holds it.
    """

    views: list[ClientGraph]
    channel: Channel
    stack: ProtocolStack
    seed: int
    progress: bool = False  # long set-up steps (e.g. FedStruct's Ā hops) may show a bar
    noise_seed: int | None = None  # privacy noise: None = secret (never the public seed)
    executor: str = "local"  # or "ray" (securefgl.federation.ray_executor)
    executor_options: dict[str, Any] = field(default_factory=dict)  # RayExecutor's keywords
    _made: list[Executor] = field(default_factory=list, repr=False)

    def make_executor(
        self, parties: Mapping[str, Party | Recipe], stacks: Sequence[ProtocolStack] = ()
    ) -> Executor:
        """An executor for ``parties``; ``stacks``: the protocol stacks they run (default:
        the federation's), whose PKIs (malicious-server model) reach each party's worker
        as that party's own keys only."""
        if self.executor == "ray":
            from securefgl.federation.ray_executor import RayExecutor

            pkis = [s.pki for s in stacks or [self.stack] if s.pki is not None]
            made: Executor = RayExecutor(
                parties,  # type: ignore[arg-type]
                keys=[pki.provisioning(parties) for pki in pkis],
                **self.executor_options,
            )
        else:
            made = LocalExecutor(parties)
        self._made.append(made)
        return made

    def close(self) -> None:
        """End the executors' remote workers (if any)."""
        for executor in self._made:
            executor.shutdown()
        self._made.clear()


class Algorithm(ABC):
    """One training method. ``federated`` is False for methods that are not (central)."""

    name: ClassVar[str]
    task: ClassVar[str] = "node"  # "graph": graph classification (securefgl.registry)
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

    def privacy(self) -> dict[str, Any]:
        """Guarantees the algorithm adds beyond its protocol stack (e.g. FedStruct's edge DP
        on Ā's inputs: ``{"edge_dp": ..., "edge_epsilon": ...}``)."""
        return {}

    @abstractmethod
    def predict(self) -> list[SplitPredictions]:
        """Predictions of the current model(s) for each client's nodes (or the global graph).

        This is the simulator's evaluation oracle, not a protocol message.
        """
