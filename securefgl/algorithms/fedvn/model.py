"""FedVN's networks and losses (Fu et al., "Virtual Nodes Can Help: Tackling Distribution
Shifts in Federated Graph Learning", AAAI 2025, §4.1–4.3; layer details from its code).

* :class:`VNGIN` (θ, shared): the GIN-BN backbone (``common.graph.bn_gin``) whose graphs are
  augmented with M virtual nodes. Every graph gets its own copy of the shared VN features
  Q ∈ ℝ^{M×d} (in the embedding space, after the input Linear; the paper writes them in
  input space). With edge weights S_i ∈ (0,1)^{|V_i|×M}: before layer 1 the VNs aggregate
  u⁰_m = Σ_v s_vm h⁰_v + Q_m and every node receives Σ_m s_vm Q_m; after layer l (l = 1, 2)
  the VN states z^l = dropout(MLP_vn^l(u^{l−1})) aggregate u^l_m = Σ_v s_vm h^l_v + z^l_m
  and every node receives Σ_m s_vm z^l_m; layer 3 follows without a VN update (the OGB
  virtual-node scheme with M soft-connected VNs). MLP_vn: Linear(d, 2d) → BN over the
  flattened M·2d vector of a graph → ReLU → Linear(2d, d) → BN over M·d → ReLU.
* :class:`EdgeScorer` (ω, personal): a plain 3-layer GIN-BN encoder and Linear(d, d) → ReLU
  → dropout → Linear(d, M); s_vm = sigmoid(logit) (independent weights, no softmax).
* :func:`decoupling_loss` L_V = ‖Σ‖²_F / M² with Σ the Pearson correlation between Q's rows
  (§4.2); :func:`score_contrastive_loss` L_E = −mean_i log(e^{cos(s̃_i, s_local)/τ} /
  (e^{cos(s̃_i, s_local)/τ} + e^{cos(s̃_i, s_global)/τ})), s̃_i = Σ_{v∈G_i} s_v (§4.3).

Per-graph VN sums and injections run as batched matrix products on the graphs padded to a
common size (no loop over graphs or nodes).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import global_add_pool, global_mean_pool

from securefgl.algorithms.common.graph.batching import Batch
from securefgl.algorithms.common.graph.bn_gin import BNGINEncoder, Head, batch_norm
from securefgl.algorithms.common.graph.models import dropout


@dataclass(frozen=True)
class Padding:
    """Where each node of a batch sits in the padded [graphs, max nodes] layout."""

    batch: torch.Tensor
    position: torch.Tensor
    graphs: int
    width: int

    @classmethod
    def of(cls, batch: torch.Tensor, graphs: int) -> Padding:
        counts = torch.bincount(batch, minlength=graphs)
        starts = torch.cumsum(counts, 0) - counts
        position = torch.arange(batch.numel()) - starts[batch]
        return cls(batch, position, graphs, int(counts.max()) if graphs else 0)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        out = x.new_zeros((self.graphs, self.width, x.shape[1]))
        return out.index_put((self.batch, self.position), x)

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        return x[self.batch, self.position]


class VirtualMLP(nn.Module):
    """Linear(d, 2d) → BN(M·2d) → ReLU → Linear(2d, d) → BN(M·d) → ReLU, per graph."""

    def __init__(self, width: int, vns: int) -> None:
        super().__init__()
        self.l1 = nn.Linear(width, 2 * width)
        self.l2 = nn.Linear(2 * width, width)
        self.bn1 = batch_norm(2 * vns * width)
        self.bn2 = batch_norm(vns * width)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        b, m, _ = u.shape
        x = F.relu(self.bn1(self.l1(u).reshape(b, -1)).reshape(b, m, -1))
        return F.relu(self.bn2(self.l2(x).reshape(b, -1)).reshape(b, m, -1))


class VNGIN(nn.Module):
    """θ: the GIN-BN backbone with virtual nodes; ``forward(batch, Q, S)`` → log-probs."""

    def __init__(
        self, nfeat: int, hidden: int, nclass: int, layers: int, p_drop: float, vns: int
    ) -> None:
        super().__init__()
        if layers < 2:
            raise ValueError("FedVN's VN model needs at least 2 GIN layers")
        self.p_drop = p_drop
        self.encoder = BNGINEncoder(nfeat, hidden, layers, p_drop)
        self.vn_mlps = nn.ModuleList(VirtualMLP(hidden, vns) for _ in range(layers - 1))
        self.head = Head(hidden, nclass, p_drop)

    def forward(self, b: Batch, Q: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
        assert b.adj is not None
        pad = Padding.of(b.batch, b.num_graphs)
        Sp = pad.pad(S)  # [B, n, M]
        St = Sp.transpose(1, 2)  # [B, M, n]

        def gather(h: torch.Tensor) -> torch.Tensor:  # Σ_v s_vm h_v per graph: [B, M, d]
            return torch.bmm(St, pad.pad(h))

        h = self.encoder.embed(b.x)
        u = gather(h) + Q.unsqueeze(0)
        h = h + S @ Q  # every node receives Σ_m s_vm Q_m
        last = self.encoder.layers - 1
        for i in range(last):
            h = self.encoder.layer(i, h, b.adj)
            z = dropout(self.vn_mlps[i](u), self.p_drop, self.training)
            if i < last - 1:
                u = gather(h) + z
            h = h + pad.unpad(torch.bmm(Sp, z))
        h = self.encoder.layer(last, h, b.adj)
        return F.log_softmax(self.head(global_mean_pool(h, b.batch, size=b.num_graphs)), dim=1)


class EdgeScorer(nn.Module):
    """ω: node → VN edge weights s_vm = sigmoid(·) ∈ (0, 1), shape [N, M]."""

    def __init__(self, nfeat: int, hidden: int, layers: int, p_drop: float, vns: int) -> None:
        super().__init__()
        self.p_drop = p_drop
        self.encoder = BNGINEncoder(nfeat, hidden, layers, p_drop)
        self.head = Head(hidden, vns, p_drop)

    def forward(self, b: Batch) -> torch.Tensor:
        assert b.adj is not None
        return torch.sigmoid(self.head(self.encoder(b.x, b.adj)))


def graph_scores(S: torch.Tensor, b: Batch) -> torch.Tensor:
    """s̃_i = Σ_{v∈G_i} s_v for every graph of the batch: [B, M]."""
    return global_add_pool(S, b.batch, size=b.num_graphs)


def decoupling_loss(Q: torch.Tensor) -> torch.Tensor:
    """L_V = mean of the squared Pearson correlations between Q's rows (diagonal included,
    as the code; 0 with a gradient of 0 while Q = 0)."""
    centred = F.normalize(Q - Q.mean(1, keepdim=True), dim=1)
    return (centred @ centred.T).pow(2).mean()


def score_contrastive_loss(
    scores: torch.Tensor, s_local: torch.Tensor, s_global: torch.Tensor, tau: float
) -> torch.Tensor:
    """L_E over the graphs' ``scores`` [B, M]: −log σ((cos_local − cos_global)/τ), mean."""
    local = F.cosine_similarity(scores, s_local.unsqueeze(0), dim=1)
    glob = F.cosine_similarity(scores, s_global.unsqueeze(0), dim=1)
    return F.softplus((glob - local) / tau).mean()
