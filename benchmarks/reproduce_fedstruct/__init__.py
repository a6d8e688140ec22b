"""FedStruct reproduction, ``python -m benchmarks.reproduce_fedstruct`` (``__main__``): the
grid and the report (the paper's numbers: :mod:`benchmarks.harness.fedstruct_paper`)."""
