"""The client's node classifier on a (patched) local graph, sparse throughout.

SpreadFGL (Zhong et al., §III-B, §IV-A): "GraphSAGE with two layers and the GCN
aggregator", i.e. ``h'_u = W · mean(h_u, h_v : v ∈ N(u)) + b`` (DGL's ``gcn`` aggregator:
one weight, no concatenation; ``aggregator="gcn"``). ``aggregator="sage"`` is Eq. 3's
concatenation ``W [h_u ‖ mean_v h_v]`` written as ``W_s h_u + W_n mean_v h_v`` (GraphSAGE,
Hamilton et al. 2017, also FedSage+'s classifier). Both layers are linear before the
aggregation, so ``P (X W) = (P X) W`` is used to keep the features sparse: own features are
a CSR matrix, generated (virtual) rows are dense or, for SpreadFGL's linear encoder output,
factored ``X̄ = Z Wₑ + bₑ`` (:class:`Factored`), never materialised.

Deviation: dropout acts on the hidden layer only (not on the input features, which stay
sparse).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

AGGREGATORS = ("gcn", "sage")


class _SparseMM(torch.autograd.Function):
    """``A @ W`` for a constant sparse ``A`` (CSR) with its transpose precomputed."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, a_t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.a_t = a_t
        return a @ w

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[None, None, torch.Tensor]:  # type: ignore[override]
        return None, None, ctx.a_t @ grad


@dataclass
class SparseMatrix:
    """A constant sparse matrix usable in autograd products (``M @ dense``)."""

    a: torch.Tensor
    a_t: torch.Tensor
    shape: tuple[int, int]

    @classmethod
    def from_scipy(cls, m: sp.spmatrix) -> SparseMatrix:
        m = sp.csr_matrix(m, dtype=np.float32)
        m.sort_indices()
        return cls(_csr(m), _csr(sp.csr_matrix(m.T)), (int(m.shape[0]), int(m.shape[1])))

    def __matmul__(self, dense: torch.Tensor) -> torch.Tensor:
        if self.shape[0] == 0 or self.shape[1] == 0:
            return dense.new_zeros((self.shape[0], dense.shape[1]))
        return _SparseMM.apply(self.a, self.a_t, dense)


def _csr(m: sp.csr_matrix) -> torch.Tensor:
    with warnings.catch_warnings():  # "CSR support is in beta": only products are used
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            torch.from_numpy(m.indptr.astype(np.int64)),
            torch.from_numpy(m.indices.astype(np.int64)),
            torch.from_numpy(m.data.astype(np.float32)),
            size=m.shape,
            check_invariants=False,
        )


@dataclass
class Factored:
    """Rows ``Z Wₑ + bₑ`` (SpreadFGL's encoder output with a linear last layer)."""

    z: np.ndarray  # [r, h]
    w: np.ndarray  # [h, d]
    b: np.ndarray  # [d]

    @property
    def rows(self) -> int:
        return int(self.z.shape[0])

    def dense(self) -> np.ndarray:
        return self.z @ self.w + self.b


Block = np.ndarray | Factored | torch.Tensor


class Features:
    """A client's node features: its own rows (sparse), then blocks of virtual rows (dense
    arrays or tensors, or :class:`Factored`). ``project(W)`` is ``X Wᵀ`` for a ``Linear``
    weight ``W``."""

    def __init__(self, own: np.ndarray | sp.spmatrix, virtual: list[Block] | None = None):
        self.own = SparseMatrix.from_scipy(sp.csr_matrix(own, dtype=np.float32))
        self.num_own = self.own.shape[0]
        self.dim = self.own.shape[1]
        self.blocks: list[torch.Tensor | tuple[torch.Tensor, ...]] = []
        self.num_virtual = 0
        for block in virtual or []:
            if isinstance(block, Factored):
                arrays = (block.z, block.w, block.b)
                self.blocks.append(
                    tuple(torch.as_tensor(np.asarray(a, np.float32)) for a in arrays)
                )
                self.num_virtual += block.rows
            elif isinstance(block, torch.Tensor):  # e.g. FedSage+'s generator output (grad)
                self.blocks.append(block)
                self.num_virtual += int(block.shape[0])
            elif len(block):
                self.blocks.append(torch.as_tensor(np.asarray(block, np.float32)))
                self.num_virtual += len(block)

    @property
    def num_rows(self) -> int:
        return self.num_own + self.num_virtual

    def project(self, weight: torch.Tensor) -> torch.Tensor:
        parts = [self.own @ weight.t()]
        for block in self.blocks:
            if isinstance(block, tuple):
                z, w, b = block
                parts.append(z @ (w @ weight.t()) + b @ weight.t())
            else:
                parts.append(block @ weight.t())
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)


def propagation(edge_index: np.ndarray, num_nodes: int, aggregator: str) -> SparseMatrix:
    """``gcn``: ``D̃⁻¹(A + I)``; ``sage``: ``D⁻¹A`` (mean over neighbours, 0 for none)."""
    src, dst = np.asarray(edge_index, dtype=np.int64).reshape(2, -1)
    keep = src != dst
    a = sp.csr_matrix((np.ones(int(keep.sum())), (dst[keep], src[keep])), shape=(num_nodes,) * 2)
    a.data[:] = 1.0  # duplicates collapse
    if aggregator == "gcn":
        a = a + sp.eye(num_nodes, format="csr")
    deg = np.asarray(a.sum(axis=1)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    return SparseMatrix.from_scipy(sp.diags(inv) @ a)


class SageNet(nn.Module):
    """Two (or more) layers: ``gcn`` (one weight per layer) or ``sage`` (self + neighbours)."""

    def __init__(self, dims: list[int], aggregator: str = "gcn", dropout: float = 0.5) -> None:
        super().__init__()
        if aggregator not in AGGREGATORS:
            raise ValueError(f"aggregator must be one of {AGGREGATORS}, got {aggregator!r}")
        self.aggregator = aggregator
        self.dropout = dropout
        pairs = list(zip(dims[:-1], dims[1:], strict=True))
        self.neigh = nn.ModuleList(nn.Linear(i, o) for i, o in pairs)
        self.self_ = (
            nn.ModuleList(nn.Linear(i, o, bias=False) for i, o in pairs)
            if aggregator == "sage"
            else None
        )

    def last_weight(self) -> torch.Tensor:
        """``W_L`` of Eq. 15's trace term (the last layer's neighbour weight)."""
        return self.neigh[-1].weight

    def forward(self, feats: Features, prop: SparseMatrix) -> torch.Tensor:
        h: torch.Tensor | None = None
        for k, lin in enumerate(self.neigh):
            xw = feats.project(lin.weight) if h is None else h @ lin.weight.t()
            out = prop @ xw + lin.bias
            if self.self_ is not None:
                w = self.self_[k].weight
                out = out + (feats.project(w) if h is None else h @ w.t())
            if k < len(self.neigh) - 1:
                out = nn.functional.dropout(torch.relu(out), self.dropout, self.training)
            h = out
        assert h is not None
        return h
