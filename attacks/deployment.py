"""The released model and where it answers queries (the "model holder" adversary's access).

After federated training every client holds the same global model and serves predictions
on its own subgraph (its deployment); ``central`` serves on the global graph. The model
holder (a third party with query access, or anyone the model is released to) sees
posteriors for the nodes it queries (He et al. 2021; LinkTeller's inference API), and may
query with features it chooses (LinkTeller). It never sees the deployment's edges.

The FedGLS family (Fu et al., TMLR) serves each client's model on the client's own graph; a
graphless client's deployment answers from its learned (or kNN) graph, never its true edges
(``Deployment.graphless``).

FedStruct (Aliakbari et al., ICLR 2025, Eq. 10) serves client i's nodes with
``f_θf(X_i; Â_loc) + Ā^[i] g_θs(S)``: the feature branch on the client's TRUE internal
edges (edge DP covers only Ā and the structural NSFs), the structure branch on its Ā rows;
:class:`FedStructServing` wraps that as a ``model(x, edge_index)`` oracle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import Data

from attacks.simulation import AuditRun
from securefgl.algorithms.fedstruct.model import AbarRows, FedStructModel
from securefgl.algorithms.fedstruct.parties import FedStructClient
from securefgl.models import set_flat

Logits = Callable[[torch.Tensor], torch.Tensor]  # node features -> logits (edges fixed)

#: the FedGLS family: each client serves its model on its own graph (a graphless client on
#: its learned or kNN graph,
#: :meth:`securefgl.algorithms.fedgls.clients.FederatedClient.serving_model`)
FEDGLS_FAMILY = (
    "fedgls", "fed-mlp", "fed-gnnmlp", "fedproto", "local-gnnk", "fed-gnnk", "fed-gnn-oracle",
)  # fmt: skip
#: algorithms whose released model answers ``model(x, edge_index)`` on a deployment
SUPPORTED = ("fedavg", "fedprox", "central", "fedstruct", *FEDGLS_FAMILY)


class FedStructServing(torch.nn.Module):
    """Client i's FedStruct predictor with its graph baked in; ``edge_index`` is ignored.

    ``x`` may stack ``b`` copies of the client's ``n_i`` rows (LinkTeller's batch): each
    copy is propagated over ``Â_loc`` separately and gets the same structure logits.
    """

    def __init__(
        self, model: FedStructModel, a_local: torch.Tensor, abar: AbarRows, s: torch.Tensor
    ) -> None:
        super().__init__()
        self.model = model
        self.a_local = a_local.coalesce()
        self.abar = abar.matrix.coalesce()
        self.rows = torch.from_numpy(np.asarray(abar.rows, np.int64))
        self.register_buffer("s_rows", s[torch.from_numpy(abar.cols)].detach().clone())

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor | None = None) -> torch.Tensor:
        del edge_index  # the deployment's edges are Â_loc and Ā^[i]
        n = self.a_local.shape[0]
        b = x.shape[0] // n
        a = self.a_local.to(x.dtype)
        h = self.model.feature_mlp(x)
        c = h.shape[1]
        h = h.view(b, n, c).permute(1, 0, 2).reshape(n, b * c)
        for _ in range(self.model.feature_hops):
            h = torch.sparse.mm(a, h)
        h = h.view(n, b, c).permute(1, 0, 2)[:, self.rows]
        z = self.model.structure_logits(self.abar.to(x.dtype), self.s_rows.to(x.dtype))
        return (h + z).reshape(-1, c)


@dataclass
class Deployment:
    """One place the released model answers queries."""

    name: str
    data: Data  # the deployment's own graph (features, labels, masks, edges)
    global_nodes: np.ndarray  # global index of each node (ground truth only)
    client: int | None  # None for the global graph (central)
    model: torch.nn.Module
    graphless: bool = False  # the model serves without the deployment's true edges (FedGLS)

    def logits(self, x: torch.Tensor | None = None) -> torch.Tensor:
        """Query the model (eval mode) on the deployment's graph with features ``x``."""
        self.model.eval()
        with torch.no_grad():
            return self.model(self.data.x if x is None else x, self.data.edge_index)

    def posteriors(self) -> np.ndarray:
        return torch.softmax(self.logits(), dim=-1).numpy().astype(np.float64)


def fedstruct_serving(client: FedStructClient) -> FedStructServing:
    """The global (θ ‖ S) as ``client`` holds it, serving its nodes."""
    if client.params is None or client.abar is None:
        raise RuntimeError(f"{client.party_id} holds no model or no Ā")
    params, theta_dim, s = client.params, client.theta_dim, client.s
    set_flat(client.model, params[:theta_dim])
    if client.settings.learnable_nsf:
        s = torch.from_numpy(np.asarray(params[theta_dim:], np.float32)).view_as(s)
    rows = AbarRows.of(client.abar, np.arange(client.view.num_nodes))
    return FedStructServing(client.model, client.a_local, rows, s)


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
        if name not in FEDGLS_FAMILY and client.params is None:
            raise RuntimeError(f"client {c} holds no model")
        graphless = bool(getattr(client, "graphless", False))
        if name in FEDGLS_FAMILY:
            model: torch.nn.Module = client.serving_model()
        elif name == "fedstruct":
            model = fedstruct_serving(client)
        else:
            set_flat(client.model, client.params)
            model = client.model
        data = view.to_data()  # the deployment's true graph (scoring); the model may ignore it
        out.append(Deployment(f"client-{c}", data, run.global_nodes(c), c, model, graphless))
    return out


def applicability(run: AuditRun) -> str | None:
    """``None`` if the run released a model this module can query, else the reason."""
    if run.result.algorithm not in SUPPORTED:
        return (
            f"{run.result.algorithm!r} does not release a model answering queries on a "
            f"deployment (model-holder attacks here support {SUPPORTED})"
        )
    return None
