"""GPFL reproduction, ``python -m benchmarks.reproduce_gpfl`` (``__main__``): the grid, the
authors' code log and the report."""
