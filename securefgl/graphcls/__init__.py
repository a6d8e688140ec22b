"""Graph classification: GIN clients, fast graph batches and the baselines of GPFL's Table 2.

Modules: :mod:`~securefgl.graphcls.settings` (the ``[experiment.graph]`` section),
:mod:`~securefgl.graphcls.models` (GIN, FedStar's GIN_dc), :mod:`~securefgl.graphcls.batching`,
:mod:`~securefgl.graphcls.training`, :mod:`~securefgl.graphcls.parties` (what a client holds),
:mod:`~securefgl.graphcls.fedavg` (self-train, FedAvg, FedProx, FedStar) and
:mod:`~securefgl.graphcls.gcfl` (GCFL+). GPFL itself: :mod:`securefgl.gpfl`.
"""
