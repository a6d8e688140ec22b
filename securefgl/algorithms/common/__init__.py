"""Building blocks that several families share: training loops and the server optimizer
(``training``, ``server_optimizer``), the edge runtime (``edge``: edge clients and servers,
SAGE nets) and the graph-classification toolkit (``graph``: GIN models, batches, learners,
the graph task's settings)."""
