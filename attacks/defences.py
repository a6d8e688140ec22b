"""Client-side edge-DP on a client's own graph (LinkTeller's DP-GCN defence, federated).

Each client perturbs its internal adjacency with EdgeRand or LapGraph
(:mod:`protocols.dp.graph_dp`, Wu et al. S&P'22) before training and serves its model on
the perturbed graph. ε is edge-level for the client's internal edges only: cross-client
edges (known to both owners) are left as they are, and node features are not protected.
FedStruct's Ā inputs, cross blocks included, are perturbed by
:mod:`securefgl.algorithms.fedstruct.edge_dp` instead (the audit and the structure attack use it).
Used by the audit as a ``views_hook`` (:func:`securefgl.experiment.runner.run_single`) and
by the structure attacks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import torch

from protocols.dp.rng import make_rng
from securefgl.algorithms.fedstruct.settings import EdgeDP
from securefgl.data import ClientGraph


def perturb_view(
    view: ClientGraph, mechanism: str, epsilon: float, noise_seed: int | None = None
) -> ClientGraph:
    """``view`` with its internal edges replaced by an ε-edge-DP release of them; the noise
    is the client's own secret (``noise_seed``: reproducible, NOT private, tests only)."""
    n = view.num_nodes
    src, dst = view.edge_index.numpy()
    adj = sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(n, n))
    rng = make_rng(noise_seed, "edge-dp-defence", view.client_id)
    out = EdgeDP(mechanism, epsilon).perturb(adj, symmetric=True, rng=rng)
    coo = sp.coo_matrix(out)
    edge_index = torch.as_tensor(np.stack([coo.row, coo.col]), dtype=torch.long)
    return dataclasses.replace(view, edge_index=edge_index)


def edge_dp_hook(
    mechanism: str, epsilon: float, noise_seed: int | None = None
) -> Callable[[list[ClientGraph]], list[ClientGraph]]:
    """A ``views_hook`` applying :func:`perturb_view` to every client."""

    def hook(views: list[ClientGraph]) -> list[ClientGraph]:
        return [perturb_view(v, mechanism, epsilon, noise_seed) for v in views]

    return hook
