"""FedGLS reproduction (Fu et al., TMLR), ``python -m benchmarks.reproduce_fedgls``
(``__main__``): the grid, the graph drift and the report."""
