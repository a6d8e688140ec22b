"""Experiment configuration (:class:`ExperimentConfig`), the errors it raises, and the
algorithm families and settings sections it knows (:mod:`securefgl.config.families`)."""

from securefgl.config.experiment import ExperimentConfig, check_run_name
from securefgl.config.families import Family, Preset, Section, families, sections
from securefgl.config.fields import ConfigError

__all__ = [
    "ConfigError",
    "ExperimentConfig",
    "Family",
    "Preset",
    "Section",
    "check_run_name",
    "families",
    "sections",
]
