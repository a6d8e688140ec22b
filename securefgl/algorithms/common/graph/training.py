"""One client's training and evaluation of a graph classifier, and the per-client metric.

GPFL (TMLR 2025, §4.1; its code's ``train_gc``) trains every local model with mini-batch
Adam whose state persists across rounds (the optimizer is created once per client) and
reports "the average over clients of local-model accuracy on local test sets"
(:func:`securefgl.experiment.graph_world.client_mean_metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from securefgl.algorithms.common.graph.batching import Batch, GraphBatches

SplitPredictions = dict[str, tuple[np.ndarray, np.ndarray]]


def forward(model: nn.Module, b: Batch) -> torch.Tensor:
    return model(b.x, b.edge_index, b.batch, b.num_graphs, b.s, b.adj)


def train_epochs(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    data: GraphBatches,
    batch_size: int,
    rng: np.random.Generator,
    epochs: int = 1,
    center: Sequence[torch.Tensor] | None = None,
    mu: float = 0.0,
) -> float:
    """``epochs`` passes of shuffled mini-batches; FedProx adds ``mu/2 ||w − center||²``.
    Returns the mean NLL over the graphs of the last epoch."""
    model.train()
    total, count = 0.0, 0
    for _ in range(epochs):
        total, count = 0.0, 0
        for b in data.iterate(batch_size, rng):
            opt.zero_grad()
            loss = F.nll_loss(forward(model, b), b.y)
            objective = loss
            if center is not None and mu > 0:
                prox = sum(((p - c) ** 2).sum() for p, c in zip(model.parameters(), center,
                                                                 strict=True))  # fmt: skip
                objective = loss + 0.5 * mu * prox
            objective.backward()
            opt.step()
            total += loss.item() * b.num_graphs
            count += b.num_graphs
    return total / max(count, 1)


@torch.no_grad()
def predict(
    model: nn.Module, data: GraphBatches, batch_size: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(y_true, y_pred)`` of every graph of ``data`` (eval mode), all at once or in
    batches of ``batch_size`` in order (a model whose batch norm uses batch statistics
    depends on the batches: FedVN's code evaluates in batches of 32)."""
    if len(data) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    model.eval()
    if batch_size is None:
        b = data.all()
        return b.y.numpy(), forward(model, b).argmax(1).numpy()
    preds = [forward(model, b).argmax(1) for b in data.in_order(batch_size)]
    return data.y.numpy(), torch.cat(preds).numpy()
