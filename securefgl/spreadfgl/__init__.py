"""SpreadFGL and FedGL (Zhong et al., edge-client collaborative FGL with adaptive neighbour
generation) and their baselines FedAvg-fusion and LocalFGL.

:mod:`~securefgl.spreadfgl.settings` (the ``[experiment.spreadfgl]`` section),
:mod:`~securefgl.spreadfgl.model` (GraphSAGE-GCN on sparse and generated rows),
:mod:`~securefgl.spreadfgl.client` (a client and its patcher),
:mod:`~securefgl.spreadfgl.h_release` (protections of the H uploads),
:mod:`~securefgl.spreadfgl.server` (an edge server), :mod:`~securefgl.spreadfgl.imputation`
(potential links, autoencoder and assessor), :mod:`~securefgl.spreadfgl.patch` (the
repaired-subgraph message), :mod:`~securefgl.spreadfgl.algorithm` (the round loop). See
``docs/algorithms/spreadfgl.md``.
"""
