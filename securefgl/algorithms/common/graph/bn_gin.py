"""FedVN's GIN backbone (Fu et al., AAAI 2025, §5.1: "a three-layer GIN as the encoder and
a two-layer MLP as the prediction head", hidden 100; layer details from its code, which
follows GOOD's GIN, Gui et al., NeurIPS 2022).

Encoder: Linear(F, d), then per layer ``l``: GINConv with ε = 0, ``MLP(h + Σ_{u∈N(v)} h_u)``
where the MLP is Linear(d, 2d) → BN(2d) → ReLU → Linear(2d, d), then BN(d) → ReLU (not after
the last layer) → dropout. Readout: mean pooling. Head: Linear(d, d) → ReLU → dropout →
Linear(d, C). Every batch norm normalises with the current batch's statistics, in training
and in evaluation alike (``track_running_stats=False``, as the code), so predictions depend
on the evaluation batch. Output: log-probabilities (cross-entropy = NLL of them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import global_mean_pool

from securefgl.algorithms.common.graph.models import dropout, sum_adjacency, symmetric_mm


def batch_norm(width: int) -> nn.BatchNorm1d:
    """Batch norm on the current batch's statistics (no running averages)."""
    return nn.BatchNorm1d(width, track_running_stats=False)


class GINMLP(nn.Module):
    """Linear(d, 2d) → BN → ReLU → Linear(2d, d)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.l1 = nn.Linear(width, 2 * width)
        self.bn = batch_norm(2 * width)
        self.l2 = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(F.relu(self.bn(self.l1(x))))


class BNGINEncoder(nn.Module):
    """The encoder, layer by layer (FedVN's VN model adds its virtual nodes between
    layers): :meth:`embed`, then :meth:`layer` for ``l = 0 .. layers − 1``."""

    def __init__(self, nfeat: int, width: int, layers: int, p_drop: float) -> None:
        super().__init__()
        self.p_drop = p_drop
        self.lin = nn.Linear(nfeat, width)
        self.convs = nn.ModuleList(GINMLP(width) for _ in range(layers))
        self.bns = nn.ModuleList(batch_norm(width) for _ in range(layers))

    @property
    def layers(self) -> int:
        return len(self.convs)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)

    def layer(self, i: int, h: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = self.bns[i](self.convs[i](h + symmetric_mm(adj, h)))
        if i < self.layers - 1:
            h = F.relu(h)
        return dropout(h, self.p_drop, self.training)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for i in range(self.layers):
            h = self.layer(i, h, adj)
        return h


class Head(nn.Module):
    """Linear(d, d) → ReLU → dropout → Linear(d, C)."""

    def __init__(self, width: int, out: int, p_drop: float) -> None:
        super().__init__()
        self.p_drop = p_drop
        self.l1 = nn.Linear(width, width)
        self.l2 = nn.Linear(width, out)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.l2(dropout(F.relu(self.l1(h)), self.p_drop, self.training))


class BNGIN(nn.Module):
    """Encoder → mean pooling → head → log-softmax (the FedAvg model of FedVN's code)."""

    def __init__(self, nfeat: int, hidden: int, nclass: int, layers: int, p_drop: float):
        super().__init__()
        self.encoder = BNGINEncoder(nfeat, hidden, layers, p_drop)
        self.head = Head(hidden, nclass, p_drop)

    def forward(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        batch: torch.Tensor,
        num_graphs: int,
        s: torch.Tensor | None = None,
        adj: torch.Tensor | None = None,
    ) -> torch.Tensor:
        a = sum_adjacency(edge_index, x.shape[0]) if adj is None else adj
        h = global_mean_pool(self.encoder(x, a), batch, size=num_graphs)
        return F.log_softmax(self.head(h), dim=1)
