"""Parts of ``benchmarks/reproduce_fedstruct.py``: the grid with the paper's numbers
(``benchmarks/data/fedstruct_paper.json``) and the report."""
