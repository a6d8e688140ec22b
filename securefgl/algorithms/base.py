"""What every algorithm implements (its parties run in a
:class:`~securefgl.federation.federation.Federation`)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from torch_geometric.data import Data

from securefgl.config import ConfigError, ExperimentConfig
from securefgl.federation.audit import AggregateAudit
from securefgl.federation.executor import Executor
from securefgl.federation.federation import Federation
from securefgl.federation.party import SERVER

SplitPredictions = dict[str, tuple[np.ndarray, np.ndarray]]  # split -> (y_true, y_pred)


@dataclass(frozen=True)
class Evaluators:
    """Who evaluates: the client parties, the method each answers with its
    :data:`SplitPredictions`, and the party that learns only the pooled counts under
    ``secure_evaluation`` (a federated method's server, or its first edge server)."""

    clients: list[str]
    predict: Callable[..., SplitPredictions]
    server: str = SERVER


#: How an algorithm trains: ``federated``; ``local``: each client alone, no message (the
#: lower reference); ``central``: one model on the whole graph, not federated (the upper one)
SETTINGS = ("federated", "local", "central")


class Algorithm(ABC):
    """One training method; ``setting`` says whether it is federated (:data:`SETTINGS`)."""

    name: ClassVar[str]
    task: ClassVar[str] = "node"  # "graph": graph classification (securefgl.algorithms.registry)
    setting: ClassVar[str] = "federated"
    needs_global_graph: ClassVar[bool] = False
    needs_cross_edges: ClassVar[bool] = False  # clients must know their cross-client edges
    #: it makes up for the cross-client edges its clients lack (generated neighbours or
    #: links): giving them those edges (cross_edges = "known") contradicts the method
    repairs_cross_edges: ClassVar[bool] = False
    server_ids: ClassVar[frozenset[str]] = frozenset({"server"})
    #: why this method's server must read every client's update in the clear (it then
    #: refuses any protocol stack, :meth:`check_stack`); None: it runs under the stack
    clear_updates: ClassVar[str | None] = None
    #: generic training fields it does not read, each with what it uses instead (a run that
    #: sets one is warned: the field may still serve the other algorithms of the run)
    instead_of: ClassVar[Mapping[str, str]] = {}
    #: it runs ``edge_servers`` edge servers on ``server_topology`` (others run one server)
    multi_server: ClassVar[bool] = False
    #: it trains every client every round (refuses client_fraction < 1)
    all_clients: ClassVar[bool] = False
    #: where its privacy settings are when it takes no DP mechanism on the updates
    #: (e.g. ``"[experiment.gpfl]"``); None: the stack's mechanism applies
    own_privacy: ClassVar[str | None] = None
    #: the simulator's audit of the run's aggregates (:meth:`aggregate_error`), made by the
    #: families that aggregate through the stack
    audit: AggregateAudit | None = None
    executor: Executor  # its parties, once set up

    def __init__(self, config: ExperimentConfig) -> None:
        self.config = config

    @classmethod
    def check_stack(cls, config: ExperimentConfig) -> None:
        """Refuse (:class:`ConfigError`) a protocol stack or client sampling this method
        cannot honour; run by the registry's check before any data is loaded."""
        protocol = config.protocol
        if cls.clear_updates and (protocol.transport != "plain" or protocol.mechanism is not None):
            raise ConfigError(f"{cls.name}: {cls.clear_updates}; it takes no protocol stack "
                              f"(got {protocol.label}): run it with --protocol plain")  # fmt: skip
        if cls.all_clients and config.client_fraction < 1:
            raise ConfigError(f"{cls.name} trains every client every round: client_fraction "
                              f"must be 1, got {config.client_fraction}")  # fmt: skip
        if cls.own_privacy and protocol.mechanism is not None:
            raise ConfigError(f"{cls.name} takes no DP mechanism on its updates (got "
                              f"{protocol.label}); its privacy settings are in "
                              f"{cls.own_privacy}")  # fmt: skip

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

    @property
    def federated(self) -> bool:
        """False for the local and central references (:data:`SETTINGS`)."""
        return self.setting == "federated"

    def model_label(self) -> str:
        """The model as it is (e.g. ``"GCN"``, ``"MLP on ÂᴸX"``) for result.md."""
        return str(self.config.model).upper()

    def local_work(self) -> str:
        """What each client (or the central model) trains per round, for result headers."""
        n = int(self.config.local_epochs)
        return f"{n} local epoch{'s' * (n != 1)}"

    def model_short(self) -> str:
        """A short name of the model for the printed table (``"MLP"``): by default the
        label up to its first parenthesis, comma or `` on ``."""
        return re.split(r" \(|, | on ", self.model_label(), maxsplit=1)[0]

    def aggregate_error(self) -> float | None:
        """The largest absolute error of any aggregate of the run (max over rounds and
        coordinates) against the float64 weighted mean of the inputs the clients handed to
        the transport: the secure transport's quantisation (fixed point, CKKS noise).
        Measured by the simulator where it holds the parties; None when not measured."""
        return self.audit.max_error() if self.audit is not None else None

    def privacy(self) -> dict[str, Any]:
        """Guarantees the algorithm adds beyond its protocol stack (e.g. FedStruct's edge DP
        on Ā's inputs: ``{"edge_dp": ..., "edge_epsilon": ...}``)."""
        return {}

    def silent_parties(self) -> frozenset[str]:
        """Its parties that went silent (a worker died, a deadline passed): the rounds and
        evaluations after go on without them."""
        executor = self.__dict__.get("executor")
        return executor.silent if executor is not None else frozenset()

    def evaluators(self) -> Evaluators | None:
        """Its evaluating parties once set up (None: no parties, e.g. the central model)."""
        return None

    def predict(self) -> list[SplitPredictions]:
        """Predictions of the current model(s) for each client's nodes (or the global graph),
        each client's reply to the driver (:meth:`evaluators`)."""
        found = self.evaluators()
        if found is None:
            raise NotImplementedError(f"{self.name} names no evaluators")
        return self.executor.map(found.clients, found.predict)
