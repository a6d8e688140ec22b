"""securefgl: privacy-hardened federated graph learning (``docs/architecture.md``).

The front door::

    from securefgl import ExperimentConfig, run_experiment, save_result

    result = run_experiment(ExperimentConfig(dataset="csbm", clients=5, rounds=50))
    save_result(result, "results")

Lower-level pieces live in ``securefgl.data`` (datasets, partitions, client views),
``securefgl.federation`` (Channel, Transcript, parties, executors),
``securefgl.algorithms`` (one folder per family; ``registry`` finds them by name) and the
``protocols`` package. Names are imported on first use, so ``securefgl --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "ConfigError": "securefgl.config",
    "ExperimentConfig": "securefgl.config",
    "ExperimentResult": "securefgl.experiment.runner",
    "RunResult": "securefgl.experiment.runner",
    "run_experiment": "securefgl.experiment.runner",
    "save_result": "securefgl.experiment.results",
    "load_dataset": "securefgl.data",
    "Channel": "securefgl.federation",
    "Transcript": "securefgl.federation",
}
__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'securefgl' has no attribute {name!r}")
