"""``python -m benchmarks.protocol_overhead`` (``__main__``) and its parts: the grid's
cells, the primitive limits, the cost model, one measured round and the report."""
