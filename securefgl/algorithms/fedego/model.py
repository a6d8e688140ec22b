"""FedEgo's model on ego-graph trees (Zhang et al., ACM TKDD 2023, §4.2-4.3).

An ego-graph of hop 2 with fan-out 6 is a tree of 43 slots: slot 0 the centre, slots 1-6
its sampled neighbours, slots 7 + 6(j−1) … 7 + 6j − 1 the sampled neighbours of slot j
(the authors' template tree; neighbours sampled with replacement). The model is the
shared reduction layer r = ReLU(Linear(F → h)) and the personalised layers: two
GraphSAGE-mean layers (PyG's ``SAGEConv``: lin_l(mean of children) + lin_r(self)) with
ReLU, and a bias-free linear classifier; dropout 0.5 after the reduction and after the
SAGE layers during training (after the reduction once per distinct node of the batch, as
on the authors' de-duplicated sampled subgraph; the server's mixed trees get none there, as
in the authors' server); every weight matrix Kaiming-normal. Only the centre's output
is computed (the receptive field of a 2-layer GNN on the tree), vectorised over a batch.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["HOPS", "FANOUT", "SLOTS", "EgoNet", "sample_trees", "shuffle_children"]

HOPS, FANOUT = 2, 6
SLOTS = 1 + FANOUT + FANOUT * FANOUT  # 43


def sample_trees(indptr: np.ndarray, indices: np.ndarray, centres: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Nodes [B, 43] and validity [B, 43] of the centres' 2-hop trees, 6 neighbours per hop
    drawn with replacement (a node without neighbours has no children)."""
    b = centres.size
    nodes = np.zeros((b, SLOTS), dtype=np.int64)
    valid = np.zeros((b, SLOTS), dtype=bool)
    nodes[:, 0], valid[:, 0] = centres, True

    def children(parents: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        deg = indptr[parents + 1] - indptr[parents]
        has = ok & (deg > 0)
        pick = (rng.random((*parents.shape, FANOUT)) * np.maximum(deg, 1)[..., None]).astype(
            np.int64
        )
        idx = indices[np.minimum(indptr[parents][..., None] + pick, indices.size - 1)]
        return np.where(has[..., None], idx, 0), np.repeat(has[..., None], FANOUT, -1)

    h1, v1 = children(centres, np.ones(b, dtype=bool))
    nodes[:, 1:7], valid[:, 1:7] = h1, v1
    h2, v2 = children(h1, v1)
    nodes[:, 7:], valid[:, 7:] = h2.reshape(b, -1), v2.reshape(b, -1)
    return nodes, valid


def shuffle_children(count: int, rng: np.random.Generator) -> np.ndarray:
    """Slot indices [count, 43] re-drawing each node's 6 children from its 6 children with
    replacement: the authors' server samples the mixed trees like any graph."""
    out = np.zeros((count, SLOTS), dtype=np.int64)
    p1 = rng.integers(0, FANOUT, (count, FANOUT))
    out[:, 1:7] = 1 + p1
    p2 = rng.integers(0, FANOUT, (count, FANOUT, FANOUT))
    out[:, 7:] = (7 + FANOUT * p1[..., None] + p2).reshape(count, -1)
    return out


def _mean_children(h: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """h [B, P, 6, d], valid [B, P, 6] -> mean over valid children (0 if none)."""
    w = valid.to(h.dtype).unsqueeze(-1)
    return (h * w).sum(-2) / w.sum(-2).clamp(min=1.0)


class EgoNet(nn.Module):
    """Reduction layer (shared) + 2 SAGE layers and classifier (personalised)."""

    SHARED = ("low",)
    PERSONAL = ("sage1_l", "sage1_r", "sage2_l", "sage2_r", "cls")

    def __init__(self, in_dim: int, hidden: int, classes: int, dropout: float = 0.5) -> None:
        super().__init__()
        self.dropout = dropout
        self.low = nn.Linear(in_dim, hidden)
        self.sage1_l, self.sage1_r = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden, False)
        self.sage2_l, self.sage2_r = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden, False)
        self.cls = nn.Linear(hidden, classes, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.kaiming_normal_(p)

    def parts(self, names: tuple[str, ...]) -> list[nn.Parameter]:
        return [p for n in names for p in getattr(self, n).parameters()]

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """r = ReLU(Linear(x)) for every node (``x`` dense or sparse CSR)."""
        if x.layout == torch.sparse_csr:
            return F.relu(torch.sparse.mm(x, self.low.weight.T) + self.low.bias)
        return F.relu(self.low(x))

    def reduce_rows(self, x: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        """``reduce(x)[rows]`` at the cost of those rows only: a sparse CSR ``x`` is summed
        row by row with ``embedding_bag`` over its non-zeros."""
        idx = torch.from_numpy(rows)
        if x.layout != torch.sparse_csr:
            return F.relu(self.low(x[idx]))
        crow = x.crow_indices()
        starts, lens = crow[idx], crow[idx + 1] - crow[idx]
        offsets = torch.cumsum(lens, 0) - lens
        pos = torch.repeat_interleave(starts - offsets, lens) + torch.arange(int(lens.sum()))
        summed = F.embedding_bag(x.col_indices()[pos], self.low.weight.T, offsets, mode="sum",
                                 per_sample_weights=x.values()[pos])  # fmt: skip
        return F.relu(summed + self.low.bias)

    def personal(self, h0: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Log-probabilities of the centres from the trees' slot embeddings h0 [B, 43, d]."""
        b, d = h0.size(0), h0.size(-1)
        kids0 = torch.cat([h0[:, 1:7].unsqueeze(1), h0[:, 7:].reshape(b, FANOUT, FANOUT, d)], 1)
        vk0 = torch.cat([valid[:, 1:7].unsqueeze(1), valid[:, 7:].reshape(b, FANOUT, FANOUT)], 1)
        h1 = F.relu(self.sage1_l(_mean_children(kids0, vk0)) + self.sage1_r(h0[:, :7]))
        h2 = F.relu(self.sage2_l(_mean_children(h1[:, 1:7], valid[:, 1:7]))
                    + self.sage2_r(h1[:, 0]))  # fmt: skip
        h2 = F.dropout(h2, self.dropout, self.training)
        return F.log_softmax(self.cls(h2), dim=-1)

    def forward(self, x: torch.Tensor, nodes: np.ndarray, valid: np.ndarray) -> torch.Tensor:
        uniq, inv = np.unique(nodes, return_inverse=True)
        r = F.dropout(self.reduce_rows(x, uniq), self.dropout, self.training)
        return self.personal(r[torch.from_numpy(inv.reshape(nodes.shape))], torch.from_numpy(valid))
