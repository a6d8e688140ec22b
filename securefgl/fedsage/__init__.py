"""FedSage and FedSage+ (Zhang et al., "Subgraph federated learning with missing neighbor
generation", NeurIPS 2021) on the edge runtime of :mod:`securefgl.spreadfgl`.

:mod:`~securefgl.fedsage.settings` (the ``[experiment.fedsage]`` section),
:mod:`~securefgl.fedsage.neighgen` (impaired graph, NeighGen, losses),
:mod:`~securefgl.fedsage.clients` (the cross-client fGen training through the channel),
:mod:`~securefgl.fedsage.algorithm`. See ``docs/algorithms/fedsage.md``.
"""
