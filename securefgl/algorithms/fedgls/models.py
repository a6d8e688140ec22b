"""FedGLS's models (Fu et al., TMLR, Sec. 4.2, App. C): the GCN f(θ = θ_z, θ_c), the MLP
feature encoder h(φ), and the sparse propagation both graphs use.

``split = "A"`` (default): θ_z = GCN(d → m) → ReLU → GCN(m → m), so Z ∈ R^{n×m} (Eq. 19),
θ_c = Linear(m → p); h = Linear(d → m) → ReLU → Linear(m → m) (Eq. 20). ``split = "C"``:
θ_z = GCN(d → m) → ReLU → GCN(m → p) (Z are logits), θ_c = the softmax (no parameters), h
ends in p. The predictor θ_c is graph-free, as Eq. 11 needs. A GCN layer is ``P(XW) + b``
(PyG's GCNConv order) with dropout before each layer (on the input drawn for the non-zero
entries only); the MLP baseline is h followed by the same head. Propagation is an edge list
(rows, cols, weights): sparse where the graph is.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class Propagation:
    """``P`` as an edge list: ``(P H)_r = Σ_{(r, c, w)} w · H_c`` (differentiable in ``w``)."""

    rows: torch.Tensor  # [e] long
    cols: torch.Tensor  # [e] long
    weights: torch.Tensor  # [e] float
    num_nodes: int

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """``P h`` along the first axis (``h`` may carry further axes, e.g. a batch)."""
        w = self.weights.to(h.dtype).view(-1, *([1] * (h.dim() - 1)))
        out = h.new_zeros((self.num_nodes, *h.shape[1:]))
        return out.index_add_(0, self.rows, w * h[self.cols])

    def detach(self) -> Propagation:
        return Propagation(self.rows, self.cols, self.weights.detach(), self.num_nodes)

    def edge_pairs(self) -> torch.Tensor:
        """``[2, e]`` (row, col) of the non-zero entries."""
        return torch.stack([self.rows, self.cols])


def gcn_propagation(edge_index: torch.Tensor, num_nodes: int) -> Propagation:
    """GCN's ``D̃^-1/2 (A + I) D̃^-1/2`` (Kipf & Welling 2017) of an undirected graph."""
    loops = torch.arange(num_nodes)
    ei = edge_index[:, edge_index[0] != edge_index[1]]
    rows, cols = torch.cat([ei[0], loops]), torch.cat([ei[1], loops])
    deg = torch.zeros(num_nodes).index_add_(0, rows, torch.ones(rows.numel()))
    inv = deg.pow(-0.5)
    return Propagation(rows, cols, inv[rows] * inv[cols], num_nodes)


def identity_propagation(num_nodes: int) -> Propagation:
    idx = torch.arange(num_nodes)
    return Propagation(idx, idx, torch.ones(num_nodes), num_nodes)


def sparse_dropout(x: torch.Tensor, p: float, nz: torch.Tensor | None = None) -> torch.Tensor:
    """Inverted dropout (each entry kept with probability 1 − p, scaled by 1/(1 − p)),
    drawing only for the non-zero entries (``nz``: their flat positions): zeros stay zero
    either way, and bag-of-words inputs are ~1 % non-zero (``F.dropout`` draws for all n·d
    entries)."""
    if p <= 0:
        return x
    flat = x.reshape(-1)
    nz = flat.nonzero().flatten() if nz is None else nz
    keep = (torch.rand(nz.numel()) >= p).to(x.dtype) / (1 - p)
    return torch.zeros_like(flat).index_put((nz,), flat[nz] * keep).view_as(x)


class GCNLayer(nn.Module):
    """``P(XW) + b`` with Glorot weights and a zero bias (as PyG's GCNConv)."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        nn.init.xavier_uniform_(self.lin.weight)
        self.bias = nn.Parameter(torch.zeros(out_dim))

    def forward(self, x: torch.Tensor, prop: Propagation) -> torch.Tensor:
        return prop(self.lin(x)) + self.bias


class Net(nn.Module):
    """An encoder (``"gcn"``: θ_z; ``"mlp"``: φ) and the head θ_c (Linear for split A,
    none for split C, or ``head=False``: FedGLS's h, whose head is the GCN's θ_c).
    ``forward = head ∘ encode``; the MLP ignores the propagation."""

    def __init__(
        self,
        kind: str,
        in_dim: int,
        hidden: int,
        classes: int,
        split: str,
        dropout: float,
        head: bool = True,
    ) -> None:
        super().__init__()
        if kind not in ("gcn", "mlp") or split not in ("A", "C"):
            raise ValueError(f"unknown encoder {kind!r} or split {split!r}")
        self.kind, self.dropout = kind, dropout
        out = hidden if split == "A" else classes
        layer = GCNLayer if kind == "gcn" else nn.Linear
        self.layers = nn.ModuleList([layer(in_dim, hidden), layer(hidden, out)])
        self.head = nn.Linear(hidden, classes) if split == "A" and head else None

    def encode(self, x: torch.Tensor, prop: Propagation | None = None) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            if self.training:  # the input is sparse (bag of words), the hidden layers not
                x = self._input_dropout(x) if i == 0 else F.dropout(x, self.dropout)
            x = layer(x, prop) if self.kind == "gcn" else layer(x)
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x

    def _input_dropout(self, x: torch.Tensor) -> torch.Tensor:
        """:func:`sparse_dropout` with the non-zeros of the last input remembered (the same
        tensor object, unmodified: a client's own features, round after round)."""
        cached = getattr(self, "_nonzero", None)
        if cached is None or cached[0]() is not x or cached[1] != x._version:
            cached = (weakref.ref(x), x._version, x.reshape(-1).nonzero().flatten().clone())
            self._nonzero = cached
        return sparse_dropout(x, self.dropout, cached[2])

    def classify(self, z: torch.Tensor, frozen: bool = False) -> torch.Tensor:
        """θ_c on embeddings ``z`` (logits); ``frozen``: θ_c receives no gradient (Eq. 11)."""
        if self.head is None:
            return z
        if frozen:
            return F.linear(z, self.head.weight.detach(), self.head.bias.detach())
        return self.head(z)

    def forward(self, x: torch.Tensor, prop: Propagation | None = None) -> torch.Tensor:
        return self.classify(self.encode(x, prop))
