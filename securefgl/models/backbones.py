"""GNN backbones built from PyG layers, all with the signature ``model(x, edge_index)``.

* GCN (Kipf & Welling 2017): ``GCNConv`` layers, symmetric normalisation with self-loops.
* GraphSAGE (Hamilton et al. 2017): ``SAGEConv`` with mean aggregation.
* MLP: ignores the edges (the structure-free baseline).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector
from torch_geometric.nn import GCNConv, SAGEConv


class _Stack(nn.Module):
    def __init__(self, dims: list[int], dropout: float, layer: type[nn.Module] | None) -> None:
        super().__init__()
        make = (lambda i, o: nn.Linear(i, o)) if layer is None else (lambda i, o: layer(i, o))
        self.layers = nn.ModuleList(make(i, o) for i, o in zip(dims[:-1], dims[1:], strict=True))
        self.dropout = dropout
        self.uses_edges = layer is not None

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for k, layer in enumerate(self.layers):
            x = nn.functional.dropout(x, self.dropout, self.training)
            x = layer(x, edge_index) if self.uses_edges else layer(x)
            if k < len(self.layers) - 1:
                x = torch.relu(x)
        return x


MODELS: dict[str, type[nn.Module] | None] = {"gcn": GCNConv, "sage": SAGEConv, "mlp": None}


def build_model(
    name: str, in_dim: int, hidden: int, out_dim: int, layers: int = 2, dropout: float = 0.5
) -> nn.Module:
    """A ``layers``-deep model ``name`` in {gcn, sage, mlp} returning logits."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {sorted(MODELS)}")
    if layers < 1:
        raise ValueError("a model needs at least one layer")
    dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
    return _Stack(dims, dropout, MODELS[name])


def get_flat(model: nn.Module) -> np.ndarray:
    """All parameters as one float32 vector (the unit every aggregation protocol works on)."""
    return parameters_to_vector(model.parameters()).detach().cpu().numpy().astype(np.float32)


def set_flat(model: nn.Module, vector: np.ndarray) -> None:
    expected = sum(p.numel() for p in model.parameters())
    if vector.shape != (expected,):
        raise ValueError(f"parameter vector has shape {vector.shape}, model needs ({expected},)")
    source = torch.tensor(vector, dtype=torch.float32)  # a copy: never alias the caller's array
    with torch.no_grad():
        offset = 0
        for p in model.parameters():
            p.copy_(source[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
