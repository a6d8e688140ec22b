"""GIN for graph classification (GPFL, TMLR 2025, §4.1 and its code's ``models.GIN``) and
FedStar's decoupled GIN with a structure encoder (Tan et al., AAAI 2023; ``models.GIN_dc``).

GIN: Linear(F, h) → L × [GINConv(MLP h-h-h) → ReLU → dropout] → sum pooling → Linear(h, h)
→ ReLU → dropout → Linear(h, C) → log-softmax (NLL loss). GIN_dc adds a structure channel:
random-walk and degree encodings → Linear → per layer a GCN (tanh) whose output is
concatenated to the feature channel's GIN input; FedStar shares only that channel (the
parameters whose name holds ``_s``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GCNConv, GINConv, global_add_pool


def _mlp(inp: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden))


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout with a ``torch.rand`` mask (same distribution as ``F.dropout``,
    about twice as fast on CPU)."""
    if not training or p == 0:
        return x
    return x * (torch.rand(x.shape) >= p) / (1 - p)


def sum_adjacency(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    """The 0/1 adjacency as a CSR tensor: ``A @ x`` sums each node's neighbours (the edges
    come in both directions, so ``A`` is symmetric)."""
    values = torch.ones(edge_index.shape[1])
    coo = torch.sparse_coo_tensor(edge_index, values, (n, n), check_invariants=False)
    with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return coo.coalesce().to_sparse_csr()


class _SymmetricMM(torch.autograd.Function):
    """``A @ x`` for a symmetric sparse ``A``: the backward is ``A @ grad`` (no transpose)."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        ctx.a = a
        return torch.sparse.mm(a, x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor]:
        return None, torch.sparse.mm(ctx.a, grad)


def symmetric_mm(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``A @ x`` for the symmetric sparse adjacency ``A`` (:func:`sum_adjacency`)."""
    return _SymmetricMM.apply(a, x)


class GIN(nn.Module):
    """GINConv (ε = 0) as ``MLP(x + A x)`` with a sparse matrix product (faster on CPU than
    PyG's scatter; same function and parameter order)."""

    def __init__(self, nfeat: int, hidden: int, nclass: int, layers: int, dropout: float):
        super().__init__()
        self.dropout = dropout
        self.pre = nn.Sequential(nn.Linear(nfeat, hidden))
        self.graph_convs = nn.ModuleList(_mlp(hidden, hidden) for _ in range(layers))
        self.post = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())
        self.readout = nn.Sequential(nn.Linear(hidden, nclass))

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
        x = self.pre(x)
        for mlp in self.graph_convs:
            x = dropout(F.relu(mlp(x + _SymmetricMM.apply(a, x))), self.dropout, self.training)
        x = global_add_pool(x, batch, size=num_graphs)
        x = dropout(self.post(x), self.dropout, self.training)
        return F.log_softmax(self.readout(x), dim=1)


class GINDC(nn.Module):
    """FedStar's GIN_dc: a feature channel (GIN) and a structure channel (GCN, ``_s``)."""

    def __init__(
        self, nfeat: int, n_se: int, hidden: int, nclass: int, layers: int, dropout: float
    ) -> None:
        super().__init__()
        self.dropout = dropout
        self.pre = nn.Sequential(nn.Linear(nfeat, hidden))
        self.embedding_s = nn.Linear(n_se, hidden)
        self.graph_convs = nn.ModuleList(
            GINConv(nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(),
                                  nn.Linear(hidden, hidden)))
            for _ in range(layers)
        )  # fmt: skip
        self.graph_convs_s_gcn = nn.ModuleList(GCNConv(hidden, hidden) for _ in range(layers))
        self.Whp = nn.Linear(2 * hidden, hidden)
        self.post = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())
        self.readout = nn.Sequential(nn.Linear(hidden, nclass))

    def forward(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        batch: torch.Tensor,
        num_graphs: int,
        s: torch.Tensor | None = None,
        adj: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if s is None:
            raise ValueError("GIN_dc needs the structure encodings s")
        x, s = self.pre(x), self.embedding_s(s)
        for conv, conv_s in zip(self.graph_convs, self.graph_convs_s_gcn, strict=True):
            x = dropout(F.relu(conv(torch.cat((x, s), -1), edge_index)), self.dropout,
                        self.training)  # fmt: skip
            s = torch.tanh(conv_s(s, edge_index))
        x = global_add_pool(self.Whp(torch.cat((x, s), -1)), batch, size=num_graphs)
        x = dropout(self.post(x), self.dropout, self.training)
        return F.log_softmax(self.readout(x), dim=1)


def shared_structure_index(model: nn.Module) -> np.ndarray:
    """Positions in the flat parameter vector of FedStar's shared parameters (``_s``)."""
    out, offset = [], 0
    for name, p in model.named_parameters():
        if "_s" in name:
            out.append(np.arange(offset, offset + p.numel()))
        offset += p.numel()
    return np.concatenate(out).astype(np.int64)


def unshared_index(model: nn.Module, local: tuple[type, ...]) -> np.ndarray:
    """Positions in the flat parameter vector of every parameter outside modules of the
    types ``local`` (FedBN: the batch norms stay with each client)."""
    kept = {id(p) for m in model.modules() if isinstance(m, local) for p in m.parameters()}
    out, offset = [], 0
    for p in model.parameters():
        if id(p) not in kept:
            out.append(np.arange(offset, offset + p.numel()))
        offset += p.numel()
    return np.concatenate(out).astype(np.int64)


def structure_encoding(edge_index: np.ndarray, num_nodes: int, n_rw: int, n_dg: int) -> np.ndarray:
    """FedStar's ``rw_dg`` encodings of one graph: the return probabilities of 1..n_rw random
    walk steps and a one-hot degree clipped to [1, n_dg] (``[num_nodes, n_rw + n_dg]``)."""
    src, dst = np.asarray(edge_index, dtype=np.int64)
    a = sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(num_nodes, num_nodes))
    deg = np.asarray(a.sum(axis=1)).ravel()
    with np.errstate(divide="ignore"):
        inv = np.where(deg > 0, 1.0 / deg, np.inf)  # the code's deg ** -1 (inf if isolated)
    m = sp.csr_matrix(a @ sp.diags(inv))
    rw, power = [], m
    for _ in range(n_rw):
        rw.append(power.diagonal())
        power = sp.csr_matrix(power @ m)
    dg = np.zeros((num_nodes, n_dg))
    dg[np.arange(num_nodes), np.clip(deg, 1, n_dg).astype(np.int64) - 1] = 1.0
    enc = np.concatenate([np.stack(rw, axis=1), dg], axis=1)
    return np.nan_to_num(enc, nan=0.0, posinf=0.0).astype(np.float32)
