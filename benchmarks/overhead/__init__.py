"""Parts of ``benchmarks/protocol_overhead.py``: the grid's cells, the primitive limits, the
cost model, one measured round and the report."""
