"""FedGCN (Yao et al., NeurIPS 2023) with its neighbour sums done by secure sums.

:mod:`~securefgl.fedgcn.settings` (the ``[experiment.fedgcn]`` section),
:mod:`~securefgl.fedgcn.neighbour_sums` (the pre-training sums between client parties),
:mod:`~securefgl.fedgcn.algorithm` (FedAvg on the propagated features). See
``docs/algorithms/fedgcn.md`` for the deviations from the paper and what each party learns.
"""
