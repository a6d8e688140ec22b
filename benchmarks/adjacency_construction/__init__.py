"""``python -m benchmarks.adjacency_construction`` (``__main__``) and its parts: the grid's
cells, the cost model and budget guard, and the report."""
