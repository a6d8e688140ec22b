"""The released model and where it answers queries (the "model holder" adversary's access).

After federated training every client holds the same global model and serves predictions
on its own subgraph (its deployment); ``central`` serves on the global graph. The model
holder (a third party with query access, or anyone the model is released to) sees
posteriors for the nodes it queries (He et al. 2021; LinkTeller's inference API), and may
query with features it chooses (LinkTeller). It never sees the deployment's edges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import Data

from attacks.simulation import AuditRun
from securefgl.models import set_flat

Logits = Callable[[torch.Tensor], torch.Tensor]  # node features -> logits (edges fixed)

#: algorithms whose released model is one GNN ``model(x, edge_index)``
SUPPORTED = ("fedavg", "fedprox", "central")


@dataclass
class Deployment:
    """One place the released model answers queries."""

    name: str
    data: Data  # the deployment's own graph (features, labels, masks, edges)
    global_nodes: np.ndarray  # global index of each node (ground truth only)
    client: int | None  # None for the global graph (central)
    model: torch.nn.Module

    def logits(self, x: torch.Tensor | None = None) -> torch.Tensor:
        """Query the model (eval mode) on the deployment's graph with features ``x``."""
        self.model.eval()
        with torch.no_grad():
            return self.model(self.data.x if x is None else x, self.data.edge_index)

    def posteriors(self) -> np.ndarray:
        return torch.softmax(self.logits(), dim=-1).numpy().astype(np.float64)


def deployments(run: AuditRun) -> list[Deployment]:
    """Where the released model of ``run`` serves (one per client, or the global graph)."""
    algo = run.state.algorithm
    name = run.result.algorithm
    if name not in SUPPORTED:
        raise ValueError(f"no released-model deployment for {name!r}; supported {SUPPORTED}")
    if not run.result.federated:
        graph = run.state.graph
        return [Deployment("global", graph, np.arange(graph.num_nodes), None, algo.model)]
    out = []
    for c, view in enumerate(run.views):
        client = algo.clients[f"client-{view.client_id}"]
        if client.params is None:
            raise RuntimeError(f"client {c} holds no model")
        set_flat(client.model, client.params)
        out.append(Deployment(f"client-{c}", view.to_data(), run.global_nodes(c), c, client.model))
    return out


def applicability(run: AuditRun) -> str | None:
    """``None`` if the run released a model this module can query, else the reason."""
    if run.result.algorithm not in SUPPORTED:
        return (
            f"{run.result.algorithm!r} does not release one GNN model(x, edge_index) "
            f"(model-holder attacks here support {SUPPORTED})"
        )
    return None
