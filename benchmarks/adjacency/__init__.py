"""Parts of ``benchmarks/adjacency_construction.py``: the grid's cells, the cost model and
budget guard, and the report."""
