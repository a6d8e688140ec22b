"""GPFL's client network (TMLR 2025, §3.1–3.5): client features, the network update, the
server's graph auto-encoder, discretisation and the mixing matrix W.

* client features (Eq. 7; the code's ``prepare_features``): the flattened parameters
  avg-pooled to ~``compress_dim`` values (:func:`compress`); centred across clients and
  L2-normalised (:func:`marginal_unit`);
* functional embeddings (§3.2): the flattened log-softmax outputs of a client's model on
  shared Erdős–Rényi probe graphs with one-hot degree features (:func:`probe_graphs`);
* A_t = β A_{t−1} + (1 − β) A_E, negatives clipped, then normalised (Eq. 8; ``norm="row"``
  is the code's "sym", which computes A_ij / d_i);
* the GAE (Eqs. 5, 9): Z = A relu(LN(A X W0)) W1, logits Z Zᵀ, loss mean H(σ) + λ mean
  −log(1 − σ) over all k² entries, a fresh model and Adam each round;
* A = 1(row-softmax ≥ threshold / k), row-normalised (Eq. 6, the code's h);
  W = γI + (1 − γ)A (Eq. 4 with the code's γ = 0.05 on the identity).

:func:`spectral_factor` turns a Gram matrix of unit vectors back into feature rows with
that Gram (X' = XQ for an orthogonal Q): the GAE's input when the server holds only the
similarities (the private variant; securefgl/algorithms/gpfl/README.md).
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

EPS = 1e-10


def compress(flat: np.ndarray, dim: int) -> np.ndarray:
    """1-D average pooling with stride ⌊len / dim⌋ (``torch.avg_pool1d``, remainder dropped)."""
    stride = max(1, flat.size // dim)
    n = flat.size // stride
    return flat[: n * stride].reshape(n, stride).mean(1)


def unit(x: np.ndarray) -> np.ndarray:
    """Rows (or a vector) scaled to unit L2 norm (zero rows stay zero)."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def marginal_unit(features: np.ndarray) -> np.ndarray:
    """Rows centred across clients (marginal) and L2-normalised (the code's ``diff``)."""
    return unit(features - features.mean(0))


def probe_graphs(
    count: int, nodes: int, p: float, width: int, seed: int, identical: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` Erdős–Rényi G(nodes, p) graphs (seed ``seed + g``; all the seed-``seed``
    graph with ``identical``) with one-hot degree features clipped to ``width − 1``;
    returns ``(x, edge_index, batch)`` of their disjoint union."""
    xs, edges, batch, offset = [], [], [], 0
    for g in range(count):
        er = nx.erdos_renyi_graph(nodes, p, seed=seed if identical else seed + g)
        e = np.array(list(er.edges()), dtype=np.int64).reshape(-1, 2).T
        e = np.concatenate([e, e[::-1]], axis=1)
        deg = np.minimum(np.bincount(e[0], minlength=nodes), width - 1)
        xs.append(np.eye(width, dtype=np.float32)[deg])
        edges.append(e + offset)
        batch.append(np.full(nodes, g))
        offset += nodes
    return np.concatenate(xs), np.concatenate(edges, axis=1), np.concatenate(batch)


def normalize(a: np.ndarray, norm: str) -> np.ndarray:
    """``row``: A_ij / d_i (the code's "sym"); ``sym``: A_ij / sqrt(d_i d_j)."""
    d = a.sum(1)
    if norm == "row":
        return a / (d[:, None] + EPS)
    inv = 1.0 / (np.sqrt(d) + EPS)
    return inv[:, None] * a * inv[None, :]


def update_network(previous: np.ndarray | None, a_e: np.ndarray, beta: float) -> np.ndarray:
    """A_t = β A_{t−1} + (1 − β) A_E (A_E alone in the first round), negatives clipped."""
    a = a_e if previous is None else beta * previous + (1 - beta) * a_e
    return np.maximum(a, 0.0)


def spectral_factor(gram: np.ndarray, width: int) -> np.ndarray:
    """Rows with Gram matrix ``gram`` (its PSD part), zero-padded to ``width`` columns."""
    vals, vecs = np.linalg.eigh((gram + gram.T) / 2)
    x = vecs * np.sqrt(np.maximum(vals, 0.0))[None, :]
    x = x[:, ::-1]  # largest components first
    k = x.shape[0]
    out = np.zeros((k, max(width, k)))
    out[:, :k] = x
    return out[:, :width] if width >= k else out


class GraphConvolution(nn.Module):
    def __init__(self, inp: int, out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(inp, out))
        self.bias = nn.Parameter(torch.empty(out))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = 1.0 / math.sqrt(self.weight.size(1))
        nn.init.uniform_(self.weight, -std, std)
        nn.init.uniform_(self.bias, -std, std)

    def forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return a @ (x @ self.weight) + self.bias


class GAE(nn.Module):
    """The code's ``GAE_dense``: GCN(in, h) → LayerNorm → ReLU → GCN(h, h/4) → Z Zᵀ."""

    def __init__(self, inp: int, hidden: int) -> None:
        super().__init__()
        self.layer1 = GraphConvolution(inp, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.layer2 = GraphConvolution(hidden, hidden // 4)

    def forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        z = self.layer2(F.relu(self.norm(self.layer1(x, a))), a)
        return z @ z.T


def server_loss(logits: torch.Tensor, sparsity: float) -> torch.Tensor:
    """Eq. 9: mean binary entropy of σ(logits) + ``sparsity`` · mean −log(1 − σ)."""
    s = torch.sigmoid(logits)
    ent = -s * torch.log(s + 1e-6) - (1 - s) * torch.log(1 - s + 1e-6)
    return ent.mean() + sparsity * (-torch.log(1 + 1e-6 - s)).mean()


def learn_network(
    x: np.ndarray,
    a: np.ndarray,
    hidden: int,
    epochs: int,
    lr: float,
    weight_decay: float,
    sparsity: float,
    threshold: float,
) -> np.ndarray:
    """Train a fresh GAE on (X, A_t) and return the discretised, row-normalised network."""
    xt = torch.as_tensor(x, dtype=torch.float32)
    at = torch.as_tensor(a, dtype=torch.float32)
    model = GAE(xt.shape[1], hidden)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        opt.zero_grad()
        server_loss(model(xt, at), sparsity).backward()
        opt.step()
    with torch.no_grad():
        soft = torch.softmax(model(xt, at), dim=1).numpy()
    mask = (soft >= threshold / a.shape[0]).astype(np.float64)
    return normalize(mask, "row")


def mixing_matrix(a: np.ndarray, self_weight: float) -> np.ndarray:
    """W = γI + (1 − γ)A (Eq. 4; γ = ``self_weight``)."""
    return self_weight * np.eye(a.shape[0]) + (1 - self_weight) * a
