"""Running experiments: one algorithm × seed, or a whole comparison, with saved results."""

from securefgl.experiment.runner import ExperimentResult, RunResult, run_experiment, run_single

__all__ = ["ExperimentResult", "RunResult", "run_experiment", "run_single"]
