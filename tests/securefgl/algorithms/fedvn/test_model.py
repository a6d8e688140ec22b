"""FedVN's networks and losses against straightforward per-graph references."""

import numpy as np
import torch
import torch.nn.functional as F

from securefgl.algorithms.common.graph.batching import GraphBatches
from securefgl.algorithms.common.graph.bn_gin import BNGIN
from securefgl.algorithms.fedvn.model import (
    VNGIN,
    EdgeScorer,
    Padding,
    decoupling_loss,
    graph_scores,
    score_contrastive_loss,
)
from securefgl.data.graph_datasets import synthetic_graphs


def tiny_batch(graphs=5, seed=0):
    data = synthetic_graphs(num_graphs=graphs, num_features=3, min_nodes=4, max_nodes=9,
                            seed=seed)  # fmt: skip
    return GraphBatches(data).all()


def reference_forward(model: VNGIN, b, Q, S):
    """The VN model graph by graph with explicit sums (the paper's equations, as the code)."""
    enc, out = model.encoder, []
    h = enc.embed(b.x)
    u = torch.stack([S[b.batch == g].T @ h[b.batch == g] for g in range(b.num_graphs)]) + Q
    h = h + S @ Q
    for i in range(enc.layers - 1):
        h = enc.layer(i, h, b.adj)
        z = model.vn_mlps[i](u)
        if i < enc.layers - 2:
            u = torch.stack([S[b.batch == g].T @ h[b.batch == g] for g in range(b.num_graphs)]) + z
        h = h + torch.cat([S[b.batch == g] @ z[g] for g in range(b.num_graphs)])
    h = enc.layer(enc.layers - 1, h, b.adj)
    for g in range(b.num_graphs):
        out.append(h[b.batch == g].mean(0))
    return F.log_softmax(model.head(torch.stack(out)), 1)


def test_vn_model_equals_the_per_graph_reference():
    torch.manual_seed(0)
    b = tiny_batch()
    model = VNGIN(3, 8, 3, 3, 0.0, vns=4).eval()
    Q = torch.randn(4, 8)
    S = torch.rand(b.x.shape[0], 4)
    assert torch.allclose(model(b, Q, S), reference_forward(model, b, Q, S), atol=1e-5)


def test_zero_edge_weights_and_zero_q_reduce_to_the_plain_backbone():
    torch.manual_seed(1)
    b = tiny_batch(seed=1)
    vn = VNGIN(3, 8, 2, 3, 0.0, vns=4).eval()
    plain = BNGIN(3, 8, 2, 3, 0.0).eval()
    plain.encoder.load_state_dict(vn.encoder.state_dict())
    plain.head.load_state_dict(vn.head.state_dict())
    out = vn(b, torch.zeros(4, 8), torch.zeros(b.x.shape[0], 4))
    assert torch.allclose(out, plain(b.x, b.edge_index, b.batch, b.num_graphs), atol=1e-5)


def test_padding_round_trips_nodes():
    b = tiny_batch()
    pad = Padding.of(b.batch, b.num_graphs)
    x = torch.randn(b.x.shape[0], 2)
    assert torch.equal(pad.unpad(pad.pad(x)), x)
    assert pad.width == int(torch.bincount(b.batch).max())


def test_edge_scores_are_sigmoid_weights_per_node_and_vn():
    b = tiny_batch()
    S = EdgeScorer(3, 8, 3, 0.0, vns=5).eval()(b)
    assert S.shape == (b.x.shape[0], 5) and bool(((S > 0) & (S < 1)).all())
    sums = graph_scores(S, b)
    assert torch.allclose(sums[1], S[b.batch == 1].sum(0))


def test_decoupling_loss_is_the_mean_squared_pearson_correlation():
    assert decoupling_loss(torch.zeros(4, 6)).item() == 0.0
    Q = torch.randn(5, 30, generator=torch.Generator().manual_seed(0))
    corr = np.corrcoef(Q.numpy())
    assert np.isclose(decoupling_loss(Q).item(), (corr**2).mean(), atol=1e-5)


def test_score_contrastive_loss_is_the_papers_formula():
    g = torch.Generator().manual_seed(2)
    scores = torch.rand(6, 4, generator=g)
    local, glob = torch.rand(4, generator=g), torch.rand(4, generator=g)
    tau = 0.1
    sl = F.cosine_similarity(scores, local[None], dim=1) / tau
    sg = F.cosine_similarity(scores, glob[None], dim=1) / tau
    want = -torch.log(torch.exp(sl) / (torch.exp(sl) + torch.exp(sg))).mean()
    assert torch.isclose(score_contrastive_loss(scores, local, glob, tau), want, atol=1e-5)
    same = score_contrastive_loss(scores, torch.full((4,), 0.5), torch.full((4,), 0.25), tau)
    assert torch.isclose(same, torch.log(torch.tensor(2.0)))  # parallel: no signal at the start
