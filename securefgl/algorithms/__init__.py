"""Algorithms: the base class, shared building blocks (``common``) and one folder per
family; :mod:`securefgl.algorithms.registry` finds them by name."""
