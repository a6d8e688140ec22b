"""Federated recommendation reproduction, ``python -m benchmarks.reproduce_recommendation``
(``__main__``): the runs and the report."""
