"""FED-PUB's masked GCN and its random proxy graph (Baek et al., ICML 2023, §4.1-4.2).

The network is two GCN layers (F → h → h) and a linear classifier, ReLU and dropout 0.5
between them; every weight matrix W has a real-valued mask μ of its shape, initialised to
ones (the official scripts' ``--laye-mask-one --clsf-mask-one``), and the layer uses
W ⊙ μ. In evaluation mode entries with |μ| < ``prune`` are zeroed (the code's eval-time
pruning). Biases are not masked. The functional embedding h̃ of a client is the mean over
the proxy graph's nodes of the second GCN layer's output before its ReLU (§4.1, Eq. 2).

Pure torch: Â = D^-½(A + I)D^-½ as a sparse matrix built once per graph (the official
``MaskedGCNConv`` is PyG's GCNConv with a mask; same maths, no torch_sparse).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MaskedGCN", "normalized_adjacency", "proxy_graph"]


def normalized_adjacency(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    """Â = D^-½(A + I)D^-½ (self-loops added where missing) as a sparse CSR tensor."""
    ei = edge_index[:, edge_index[0] != edge_index[1]]
    loops = torch.arange(n, dtype=torch.long)
    row = torch.cat([ei[0], loops])
    col = torch.cat([ei[1], loops])
    deg = torch.bincount(col, minlength=n).to(torch.float32)
    inv = deg.pow(-0.5)
    val = inv[row] * inv[col]
    a = torch.sparse_coo_tensor(torch.stack([col, row]), val, (n, n), check_invariants=False)
    a = a.coalesce()
    return a.to_sparse_csr()


def _glorot(rows: int, cols: int) -> torch.Tensor:
    bound = math.sqrt(6.0 / (rows + cols))
    return torch.empty(rows, cols).uniform_(-bound, bound)


class MaskedGCN(nn.Module):
    """GCN(F→h) → ReLU → dropout → GCN(h→h) → [h̃] → ReLU → dropout → masked Linear(h→C)."""

    WEIGHTS = ("w1", "w2", "w3")

    def __init__(self, in_dim: int, hidden: int, classes: int, dropout: float = 0.5,
                 masks: bool = True, prune: float = 1e-3) -> None:  # fmt: skip
        super().__init__()
        self.dropout, self.prune, self.use_masks = dropout, prune, masks
        self.w1 = nn.Parameter(_glorot(hidden, in_dim))
        self.b1 = nn.Parameter(torch.zeros(hidden))
        self.w2 = nn.Parameter(_glorot(hidden, hidden))
        self.b2 = nn.Parameter(torch.zeros(hidden))
        self.w3 = nn.Parameter(_glorot(classes, hidden))  # xavier_uniform as the code
        bound = math.sqrt(6.0 / (1 + classes))
        self.b3 = nn.Parameter(torch.empty(classes).uniform_(-bound, bound))
        for w in self.WEIGHTS:
            mask = nn.Parameter(torch.ones_like(getattr(self, w)), requires_grad=masks)
            setattr(self, f"mask_{w}", mask)

    def shared_names(self, classifier: bool = True) -> list[str]:
        """Names of the parameters that may be aggregated (never the masks)."""
        names = ["w1", "b1", "w2", "b2"]
        return names + ["w3", "b3"] if classifier else names

    def masked(self, w: str) -> torch.Tensor:
        weight = getattr(self, w)
        if not self.use_masks:
            return weight
        mask = getattr(self, f"mask_{w}")
        if not self.training:
            mask = torch.where(mask.abs() < self.prune, torch.zeros_like(mask), mask)
        return weight * mask

    def embed(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        """The second GCN layer's output (before its ReLU): FED-PUB's ``is_proxy`` path."""
        h = torch.sparse.mm(adj, x @ self.masked("w1").T) + self.b1
        h = F.dropout(F.relu(h), self.dropout, self.training)
        return torch.sparse.mm(adj, h @ self.masked("w2").T) + self.b2

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = F.dropout(F.relu(self.embed(x, adj)), self.dropout, self.training)
        return h @ self.masked("w3").T + self.b3

    def mask_l1(self) -> torch.Tensor:
        return sum(getattr(self, f"mask_{w}").abs().sum() for w in self.WEIGHTS)  # type: ignore[return-value]


def proxy_graph(blocks: int, nodes: int, p: float, features: int,
                seed: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """FED-PUB's random graph G̃ (§4.1; the code's ``random_partition_graph([nodes]·blocks,
    p_in=p, p_out=0)``): ``blocks`` disjoint Erdős–Rényi G(nodes, p) graphs, features
    N(0, 1). Returns (x [blocks·nodes, features] float32, edge_index [2, E] both ways).
    Public: every party can build it from the seed the server announces."""
    rng = np.random.default_rng([seed, 0xF9B])
    edges = []
    iu = np.triu_indices(nodes, k=1)
    for b in range(blocks):
        keep = rng.random(iu[0].size) < p
        src, dst = iu[0][keep] + b * nodes, iu[1][keep] + b * nodes
        edges.append(np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])]))
    x = rng.standard_normal((blocks * nodes, features)).astype(np.float32)
    return x, np.concatenate(edges, axis=1).astype(np.int64)
