"""GPFL (Graph Personalized Federated Learning, TMLR 2025) with a private server view.

Modules: :mod:`~securefgl.gpfl.settings` (``[experiment.gpfl]``),
:mod:`~securefgl.gpfl.properties` (graph properties, LDP release, rule-based selector),
:mod:`~securefgl.gpfl.network` (client features, A_t, the GAE, W),
:mod:`~securefgl.gpfl.parties` and :mod:`~securefgl.gpfl.algorithm`. The long form:
docs/algorithms/gpfl.md.
"""
