"""FedGLS (Fu et al., "Federated Graph Learning with Graphless Clients", TMLR) and its
baselines on securefgl's runtime.

:mod:`~securefgl.fedgls.settings` (the ``[experiment.fedgls]`` section and the paper's
preset), :mod:`~securefgl.fedgls.graphless` (which clients are graphless; their edge-free
views), :mod:`~securefgl.fedgls.models` (GCN f, MLP h, sparse propagation),
:mod:`~securefgl.fedgls.learner` (the attentive graph learner g), :mod:`~securefgl.fedgls.losses`
(Eq. 8-11), :mod:`~securefgl.fedgls.clients` (Algorithm 1's local step and the baselines'),
:mod:`~securefgl.fedgls.algorithm` (FedGLS and the FedAvg baselines),
:mod:`~securefgl.fedgls.prototypes` (FedProto) and :mod:`~securefgl.fedgls.local` (Local-GNNk).
See ``docs/algorithms/fedgls.md``.
"""
