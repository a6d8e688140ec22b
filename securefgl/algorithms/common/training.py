"""Full-batch training and prediction on one graph, shared by every algorithm."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn
from torch_geometric.data import Data

from protocols.dp.rng import make_rng

SPLITS = ("train", "val", "test")


@contextmanager
def party_torch_rng(seed: int, *key: str | int) -> Iterator[None]:
    """Run the block on torch's global generator seeded from ``(seed, *key)`` (e.g. a party
    id and a round), restoring the previous state after: a party's dropout and
    initialisation then do not depend on which process it lives in or on the other
    parties' calls. Not for privacy noise (that comes from :func:`protocols.dp.rng.make_rng`
    with a secret seed). Seeds the CPU generator only, the one the block forks:
    ``torch.manual_seed`` would also queue a lazy seeding of every accelerator backend, each
    recording a formatted stack (about 2 ms a call, paid once per party and round)."""
    derived = int(make_rng(seed, "torch", *key).integers(2**63 - 1))
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(derived)
        yield


def make_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)


def train_epochs(
    model: nn.Module,
    data: Data,
    optimizer: torch.optim.Optimizer,
    epochs: int,
    prox_center: list[torch.Tensor] | None = None,
    mu: float = 0.0,
) -> float:
    """``epochs`` full-batch steps of cross-entropy on ``data.train_mask``; mean loss.

    With ``prox_center`` adds FedProx's ``mu/2 ||w - w_global||^2`` (Li et al. 2020).
    A graph without training nodes is left untouched (loss 0).
    """
    if int(data.train_mask.sum()) == 0:
        return 0.0
    model.train()
    losses = []
    for _ in range(epochs):
        optimizer.zero_grad()
        out = model(data.x, data.edge_index)
        loss = nn.functional.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        total = loss
        if prox_center is not None and mu > 0:
            total = total + 0.5 * mu * sum(
                (p - c).pow(2).sum() for p, c in zip(model.parameters(), prox_center, strict=True)
            )
        total.backward()
        optimizer.step()
        losses.append(loss.item())
    return float(np.mean(losses))


def unlinked(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (label, prediction) pairs sorted: what the metrics need (the confusion counts),
    not which node has which label (a client's evaluation reply crosses the channel)."""
    order = np.lexsort((y_pred, y_true))
    return y_true[order], y_pred[order]


@torch.no_grad()
def predict_splits(model: nn.Module, data: Data) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(true labels, predicted labels) of each split's nodes, :func:`unlinked`."""
    model.eval()
    pred = model(data.x, data.edge_index).argmax(dim=-1)
    return {
        s: unlinked(data.y[m].numpy(), pred[m].numpy())
        for s in SPLITS
        if (m := getattr(data, f"{s}_mask")) is not None
    }
