"""The FedStruct predictor (Aliakbari et al., ICLR 2025, Eqs. 6-10 and 15).

For a node ``v`` of client ``i``: ``ŷ_v = softmax(f_θf(v) + Σ_u Ā_vu g_θs(s_u))`` (Eq. 10).
The NFE ``f_θf`` (Eq. 7) is a local decoupled GCN ``Â_loc^L · MLP_θf(X_i)`` on the client's
internal edges (the paper leaves it open; this is the official code's); the NSE (Eqs. 8-9)
is the client's rows ``Ā^[i]`` (opaque-id columns) times the structure MLP on the NSFs of
all nodes; pure Hop2Vec (Eq. 15, ``structure_mlp=False``) drops ``g``. MLPs follow the
official code (``LayerNorm → Linear → ReLU → Dropout → … → Linear``); both branches give
``c`` logits, summed before the softmax. Only the NSF rows in the column support of the Ā
rows in use go through ``g`` (:class:`AbarRows`), so the S-gradient is non-zero exactly on
that support (Prop. 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

__all__ = [
    "AbarRows",
    "FedStructModel",
    "local_propagation",
    "mlp",
    "torch_sparse",
]


def mlp(dims: Sequence[int], dropout: float, layer_norm: bool = True) -> nn.Sequential:
    """``[LayerNorm(d0)] → Linear → ReLU → Dropout → … → Linear`` over ``dims``."""
    if len(dims) < 2:
        raise ValueError(f"an MLP needs at least input and output sizes, got {list(dims)}")
    layers: list[nn.Module] = [nn.LayerNorm(dims[0])] if layer_norm else []
    for k, (i, o) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        layers.append(nn.Linear(i, o))
        if k < len(dims) - 2:
            layers += [nn.ReLU(), nn.Dropout(dropout)]
    return nn.Sequential(*layers)


def torch_sparse(m: sp.spmatrix) -> torch.Tensor:
    """A scipy sparse matrix as a coalesced float32 torch COO tensor."""
    coo = sp.coo_matrix(m)
    idx = torch.from_numpy(np.vstack([coo.row, coo.col]).astype(np.int64))
    val = torch.from_numpy(coo.data.astype(np.float32))
    return torch.sparse_coo_tensor(idx, val, coo.shape, check_invariants=True).coalesce()


def local_propagation(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """``Â_loc = D_loc^{-1}(A_loc + I)`` (row-stochastic, local degrees) as torch COO."""
    ei = edge_index.numpy()
    a = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(num_nodes, num_nodes))
    a.data[:] = 1.0
    a = a + sp.identity(num_nodes, format="csr")
    deg = np.asarray(a.sum(axis=1)).ravel()
    return torch_sparse(sp.diags(1.0 / deg) @ a)


@dataclass(frozen=True)
class AbarRows:
    """Some rows of ``Ā^[i]``, restricted to the columns where they are non-zero.

    ``matrix`` is ``[len(rows), len(cols)]`` (torch COO); ``cols`` are opaque global ids,
    i.e. rows of ``S``.
    """

    rows: np.ndarray
    cols: np.ndarray
    matrix: torch.Tensor

    @classmethod
    def of(cls, abar: sp.spmatrix, rows: np.ndarray) -> AbarRows:
        sub = sp.csr_matrix(abar)[rows]
        sub.eliminate_zeros()
        cols = np.unique(sub.indices)
        return cls(np.asarray(rows), cols, torch_sparse(sub[:, cols]))


class FedStructModel(nn.Module):
    """θ = (θ_f ‖ θ_s): the feature MLP and (unless pure Hop2Vec) the structure MLP."""

    def __init__(
        self,
        num_features: int,
        num_classes: int,
        nsf_dim: int,
        feature_hidden: Sequence[int] = (64,),
        structure_hidden: Sequence[int] = (256,),
        feature_hops: int = 2,
        dropout: float = 0.5,
        structure_mlp: bool = True,
    ) -> None:
        super().__init__()
        if feature_hops < 0:
            raise ValueError(f"feature_hops must be >= 0, got {feature_hops}")
        if not structure_mlp and nsf_dim != num_classes:
            raise ValueError(
                f"pure Hop2Vec (no structure MLP) needs nsf_dim = num_classes = {num_classes}"
            )
        self.feature_hops = feature_hops
        self.dropout = dropout
        self.feature_mlp = mlp([num_features, *feature_hidden, num_classes], dropout)
        self.structure_mlp = (
            mlp([nsf_dim, *structure_hidden, num_classes], dropout) if structure_mlp else None
        )

    def feature_logits(self, x: torch.Tensor, a_local: torch.Tensor) -> torch.Tensor:
        """NFE ``Â_loc^L MLP_θf(X_i)`` for all own nodes (Eq. 7)."""
        h = self.feature_mlp(x)
        for _ in range(self.feature_hops):
            h = torch.sparse.mm(a_local, h)
        return h

    def structure_logits(self, abar: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """NSE ``Ā g_θs(S)`` (Eq. 9); ``s`` holds the NSF rows of ``abar``'s columns."""
        return torch.sparse.mm(abar, self.structure_output(s))

    def structure_output(
        self, s: torch.Tensor, masks: Sequence[torch.Tensor] | None = None
    ) -> torch.Tensor:
        """``g_θs`` row-wise on ``s`` (the identity for pure Hop2Vec); in training, ``masks``
        (one ``[len(s), width]`` 0/1 tensor per dropout layer) replace the dropout draws."""
        if self.structure_mlp is None:
            return s
        if masks is None or not self.training:
            return self.structure_mlp(s)
        drawn = iter(masks)
        h = s
        for layer in self.structure_mlp:
            h = h * next(drawn) / (1.0 - layer.p) if isinstance(layer, nn.Dropout) else layer(h)
        return h

    def structure_dropout_widths(self) -> list[int]:
        """The width at each dropout layer of the structure MLP."""
        widths, width = [], 0
        for layer in self.structure_mlp or ():
            if isinstance(layer, nn.Linear):
                width = layer.out_features
            elif isinstance(layer, nn.Dropout):
                widths.append(width)
        return widths

    def forward(
        self,
        x: torch.Tensor,
        a_local: torch.Tensor,
        abar: AbarRows,
        s: torch.Tensor,
    ) -> torch.Tensor:
        """Logits (Eq. 10, before the softmax) of the own nodes ``abar.rows``.

        ``s`` is the full NSF matrix ``S`` (rows = opaque ids); only ``s[abar.cols]`` is used.
        """
        f = self.feature_logits(x, a_local)[torch.from_numpy(abar.rows)]
        z = self.structure_logits(abar.matrix, s[torch.from_numpy(abar.cols)])
        return f + z
