"""The reproduction scripts' graph cache: one dataset in memory, keyed by what
:func:`~securefgl.experiment.runner.load_graph` reads (a variant such as row-normalised
features gets its own copy)."""

from __future__ import annotations

from typing import Any

from securefgl.config import ExperimentConfig
from securefgl.experiment.runner import data_identity, load_graph


class OneGraphCache:
    """The graph of the last configuration asked for; another dataset replaces it."""

    def __init__(self) -> None:
        self._key: Any = None
        self._graph: Any = None

    def get(self, cfg: ExperimentConfig) -> Any:
        key = data_identity(cfg)
        if self._graph is None or key != self._key:
            self._key, self._graph = key, load_graph(cfg)
        return self._graph
