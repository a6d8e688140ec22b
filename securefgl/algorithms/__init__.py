"""Algorithms: the base class and the baselines (the registry is :mod:`securefgl.registry`)."""

from securefgl.algorithms.base import Algorithm, Federation, SplitPredictions

__all__ = ["Algorithm", "Federation", "SplitPredictions"]
