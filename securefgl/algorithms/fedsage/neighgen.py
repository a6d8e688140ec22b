"""NeighGen (FedSage+, Zhang et al., NeurIPS 2021, §3.3-3.4): the impaired graph, the
generator and its losses, vectorised.

* impaired graph: a client hides a random ``hide_fraction`` of its nodes outside the train
  and test sets (official code); for each remaining node the number of hidden neighbours
  ``n_v`` and the features of up to ``num_pred`` of them are the targets;
* NeighGen: a 2-layer GCN encoder ``H^e`` (ReLU output, the official ``GNN``), dGen
  ``ñ_v = ReLU(w·z_v)`` (linear regression) and fGen
  ``tanh(FC(ReLU(FC(ReLU(FC(z_v + N(0, I)))))))`` giving ``num_pred`` feature vectors;
* losses: ``λ_d`` smooth-L1 on ``ñ_v − n_v``; ``λ_f`` the greedy (one-sided nearest)
  feature loss of the official ``greedy_loss`` (each of the first ``ñ_v`` generated rows
  is charged its mean squared distance to the nearest of the first ``n_v`` true hidden
  neighbours, capped by the batch's mean square; the other rows that cap);
  ``λ_c`` cross-entropy of a GCN classifier on the mended impaired graph.

Deviation: full-batch epochs on the client's training nodes (the official code does the
same for NeighGen).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from securefgl.algorithms.common.edge.model import Features, SageNet, SparseMatrix, propagation
from securefgl.algorithms.fedsage.settings import FedSageSettings


@dataclass
class ImpairedGraph:
    """A client's graph with some nodes hidden, and NeighGen's targets."""

    keep: np.ndarray  # local indices of the kept nodes
    x: sp.csr_matrix  # their features
    feats: Features
    prop: SparseMatrix
    edges: np.ndarray  # [2, e] among kept nodes (re-indexed)
    missing: np.ndarray  # [n_keep] hidden neighbours per kept node
    train: np.ndarray  # positions (in keep) of the kept training nodes
    targets: np.ndarray  # [len(train), num_pred, d] features of hidden neighbours (0-padded)


def impair(
    x: sp.csr_matrix,
    edges: np.ndarray,
    train_mask: np.ndarray,
    test_mask: np.ndarray,
    settings: FedSageSettings,
    rng: np.random.Generator,
) -> ImpairedGraph:
    n = x.shape[0]
    P = settings.num_pred
    pool = np.flatnonzero(~train_mask & ~test_mask)
    hidden = rng.choice(pool, size=int(round(len(pool) * settings.hide_fraction)), replace=False)
    is_hidden = np.zeros(n, bool)
    is_hidden[hidden] = True
    keep = np.flatnonzero(~is_hidden)
    new = np.full(n, -1, np.int64)
    new[keep] = np.arange(len(keep))
    src, dst = edges
    inner = ~is_hidden[src] & ~is_hidden[dst]
    lost = ~is_hidden[src] & is_hidden[dst]  # (kept node, hidden neighbour)
    missing = np.bincount(new[src[lost]], minlength=len(keep))
    train = np.flatnonzero(train_mask[keep])
    targets = np.zeros((len(train), P, x.shape[1]), dtype=np.float32)
    slot_of = np.full(len(keep), -1, np.int64)
    slot_of[train] = np.arange(len(train))
    u, v = new[src[lost]], dst[lost]
    order = np.lexsort((v, u))
    u, v = u[order], v[order]
    rank = np.arange(len(u)) - np.searchsorted(u, u)  # position of v among u's hidden nbrs
    sel = (slot_of[u] >= 0) & (rank < P)
    if sel.any():
        targets[slot_of[u[sel]], rank[sel]] = x[v[sel]].toarray()
    kept_edges = np.stack([new[src[inner]], new[dst[inner]]])
    x_keep = sp.csr_matrix(x[keep])
    prop = propagation(kept_edges, len(keep), "gcn")
    return ImpairedGraph(keep, x_keep, Features(x_keep), prop, kept_edges, missing, train, targets)


class NeighGen(nn.Module):
    def __init__(self, dim: int, num_classes: int, settings: FedSageSettings) -> None:
        super().__init__()
        st = settings
        self.num_pred, self.dim = st.num_pred, dim
        self.encoder = SageNet([dim, st.encoder_hidden, st.latent], "gcn")
        self.dgen = nn.Linear(st.latent, 1)
        sizes = [st.latent, *st.gen_hidden]
        self.fgen = nn.ModuleList(
            nn.Linear(i, o) for i, o in zip(sizes[:-1], sizes[1:], strict=True)
        )
        self.fgen_out = nn.Linear(sizes[-1], st.num_pred * dim)
        self.classifier = SageNet([dim, st.encoder_hidden, num_classes], "gcn")

    def embed(self, feats: Features, prop: SparseMatrix) -> torch.Tensor:
        return torch.relu(self.encoder(feats, prop))

    def degree(self, z: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.dgen(z)).squeeze(-1)

    def generate(self, z: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """``[len(z), num_pred, d]`` generated neighbour features."""
        h = z + noise
        for k, lin in enumerate(self.fgen):
            h = torch.relu(lin(h))
            if k == len(self.fgen) - 1:
                h = nn.functional.dropout(h, 0.5, self.training)
        return torch.tanh(self.fgen_out(h)).view(len(z), self.num_pred, self.dim)

    def fgen_parameters(self) -> list[nn.Parameter]:
        return [*self.fgen.parameters(), *self.fgen_out.parameters()]


def counts(degree: torch.Tensor, num_pred: int) -> np.ndarray:
    """``ñ_v`` as integers in ``[0, num_pred]``."""
    return np.clip(np.rint(degree.detach().numpy()), 0, num_pred).astype(np.int64)


def greedy_loss(
    gen: torch.Tensor, true: torch.Tensor, pred_count: np.ndarray, true_count: np.ndarray
) -> torch.Tensor:
    """The official greedy feature loss (module docstring), vectorised."""
    if gen.numel() == 0:
        return gen.sum()
    B, P, d = gen.shape
    cap = (gen**2).mean()
    true = torch.as_tensor(true, dtype=gen.dtype)
    dist = ((gen**2).sum(-1)[:, :, None] - 2 * gen @ true.transpose(1, 2)
            + (true**2).sum(-1)[:, None, :]) / d  # fmt: skip
    k_ok = torch.as_tensor(np.arange(P)[None, :] < np.minimum(true_count, P)[:, None])
    dist = torch.where(k_ok[:, None, :], dist, torch.full_like(dist, float("inf")))
    best = torch.minimum(dist.min(dim=-1).values, cap)
    p_ok = torch.as_tensor(np.arange(P)[None, :] < pred_count[:, None])
    return torch.where(p_ok, best, cap.expand_as(best)).mean()


def mended(
    x: sp.csr_matrix, edges: np.ndarray, gen: torch.Tensor, count: np.ndarray
) -> tuple[Features, SparseMatrix, torch.Tensor, np.ndarray]:
    """The graph with ``count[v]`` generated neighbours of each node ``v`` (the official
    ``MendGraph``): features, propagation, the generated rows and the edges they add."""
    n, P = len(count), gen.shape[1]
    take = np.arange(P)[None, :] < count[:, None]
    owner = np.broadcast_to(np.arange(n)[:, None], take.shape)[take]
    rows = gen[torch.as_tensor(take)] if take.any() else gen.new_zeros((0, gen.shape[2]))
    virt = n + np.arange(len(owner))
    new_edges = np.stack([np.r_[owner, virt], np.r_[virt, owner]]).astype(np.int64)
    all_edges = np.concatenate([edges, new_edges], axis=1)
    feats = Features(x, [rows])
    return feats, propagation(all_edges, n + len(owner), "gcn"), rows, new_edges
