"""The graph-classification toolkit every graph-task family uses: GIN and FedStar's GIN_dc
(``models``), fast graph batches (``batching``), mini-batch training (``training``), a
client's graphs, model and optimizer and the server's initial model (``learner``), and the
task's settings section (``settings``, ``[experiment.graph]``)."""
