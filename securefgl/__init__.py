"""securefgl: privacy-hardened federated graph learning (``docs/architecture.md``).

The front door::

    from securefgl import ExperimentConfig, run_experiment, save_result

    result = run_experiment(ExperimentConfig(dataset="csbm", clients=5, rounds=50))
    save_result(result, "results")

Lower-level pieces live in ``securefgl.data`` (datasets, partitions, client views),
``securefgl.federation`` (Channel, Transcript, parties, executors), ``securefgl.registry``
(algorithms by name) and the ``protocols`` package.
"""

from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data import load_dataset
from securefgl.experiment import ExperimentResult, RunResult, run_experiment
from securefgl.experiment.results import save_result
from securefgl.federation import Channel, Transcript
from securefgl.registry import ALGORITHMS

__version__ = "0.1.0"

__all__ = [
    "ALGORITHMS",
    "Channel",
    "ConfigError",
    "ExperimentConfig",
    "ExperimentResult",
    "RunResult",
    "Transcript",
    "__version__",
    "load_dataset",
    "run_experiment",
    "save_result",
]
