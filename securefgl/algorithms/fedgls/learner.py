"""The graph learner g(ω) of a graphless client (FedGLS, Fu et al., TMLR, Eq. 5, App. B).

``S = Ω(Φ(Enc(X; ω)))``: a two-layer attentive encoder (Eq. 15: each layer re-weights the
features, ``R ← σ(R ⊙ w)``, ``w`` initialised to ones, ReLU between layers and none after
the last, as SUBLIME, Liu et al. 2022, whose learner App. B follows), cosine similarity,
kNN sparsification (Eq. 16; top-(k+1) per row so that the node itself counts, as SUBLIME),
ReLU and symmetrisation ``(S + Sᵀ)/2`` (Eq. 17) and ``D^-1/2 S D^-1/2`` (Eq. 18; ε = 1e-10
on √deg). The neighbour choice carries no gradient; the kept similarities do, so ω is
trained through their values. Similarities are computed a block of rows at a time (never
more than a block × n in memory); the result is a sparse :class:`Propagation`.
With ω = ones and non-negative features the graph is the cosine kNN graph of X, the graph
of the kNN baselines (:func:`feature_knn`; ``knn_graph = "binary"``: its unweighted form).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from securefgl.algorithms.fedgls.models import Propagation, gcn_propagation

_BLOCK = 1 << 22  # entries of one similarity block (rows × n)
_EPS = 1e-10


def knn_propagation(r: torch.Tensor, k: int) -> Propagation:
    """Ω of App. B on L2-normalised rows ``r``: kNN (k + 1 with the node itself), ReLU,
    ``(S + Sᵀ)/2``, symmetric normalisation; differentiable in ``r``. The similarities are
    computed one block of rows at a time; only the kept entries stay in the graph."""
    n = r.shape[0]
    kk = min(k + 1, n)
    step = max(1, _BLOCK // max(n, 1))
    picks, kept = [], []
    for i in range(0, n, step):
        sim = r[i : i + step] @ r.T
        top = sim.detach().topk(kk, dim=1).indices  # the choice carries no gradient
        picks.append(top)
        kept.append(sim.gather(1, top))
    rows = torch.arange(n).repeat_interleave(kk)
    cols = torch.cat(picks).reshape(-1)
    values = torch.relu(torch.cat(kept).reshape(-1)) / 2
    rows, cols = torch.cat([rows, cols]), torch.cat([cols, rows])
    values = torch.cat([values, values])
    deg = values.new_zeros(n).index_add(0, rows, values)
    inv = 1.0 / (deg.sqrt() + _EPS)
    return Propagation(rows, cols, inv[rows] * values * inv[cols], n)


def feature_knn(x: torch.Tensor, k: int, weighted: bool = True) -> Propagation:
    """The kNN baselines' graph: the cosine kNN of the raw features (no gradient), weighted
    as the learner's Ω (``weighted``), or binary (each node's k most similar other nodes,
    symmetrised) with GCN's normalisation ``D̃^-1/2 (A + I) D̃^-1/2``."""
    with torch.no_grad():
        graph = knn_propagation(F.normalize(x, dim=1), k).detach()
        if weighted:
            return graph
        pairs = graph.edge_pairs()
        pairs = pairs[:, pairs[0] != pairs[1]]
        return gcn_propagation(torch.unique(pairs, dim=1), x.shape[0])


class AttentiveLearner(nn.Module):
    """ω: ``layers`` vectors of length d, initialised to ones (Eq. 15)."""

    def __init__(self, dim: int, layers: int, k: int) -> None:
        super().__init__()
        self.weights = nn.ParameterList(nn.Parameter(torch.ones(dim)) for _ in range(layers))
        self.k = k

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """L2-normalised rows of ``Enc(X; ω)`` (cosine similarity = their dot products)."""
        for i, w in enumerate(self.weights):
            x = x * w
            if i < len(self.weights) - 1:
                x = torch.relu(x)
        return F.normalize(x, dim=1)

    def forward(self, x: torch.Tensor) -> Propagation:
        return knn_propagation(self.embed(x), self.k)
