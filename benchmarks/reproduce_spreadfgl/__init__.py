"""SpreadFGL reproduction, ``python -m benchmarks.reproduce_spreadfgl`` (``__main__``): the
grid and the report."""
