"""Benchmarks, reproductions and audits of securefgl, run from the repository root as
``python -m benchmarks.<name>`` (``benchmarks.harness`` is the shared infrastructure; a
script with helpers is a folder, ``benchmarks/<name>/__main__.py`` beside its modules).
Every import here is absolute (``from benchmarks.harness.results import ...``); nothing
here imports from ``tests`` (tests may import from here). Results go to
``benchmarks/results/``, reference numbers are read from ``benchmarks/data/`` and prose
from ``benchmarks/notes/``.
"""
