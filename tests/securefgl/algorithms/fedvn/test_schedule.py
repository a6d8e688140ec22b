"""A FedVN client's local round against a step-by-step replay of the schedule of the
authors' code (Fu et al., AAAI 2025, Algorithm 1): one pass stepping only ω on
CE + λ2·L_E (θ in eval mode, s_local the previous batch's mean s̃), then one pass stepping
θ on CE and Q on CE + λ1·L_V (ω in eval mode), plain SGD, losses written out inline."""

import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from securefgl.algorithms.common.graph.batching import GraphBatches
from securefgl.algorithms.common.graph.learner import make_optimizer
from securefgl.algorithms.common.graph.settings import GraphTaskSettings
from securefgl.algorithms.fedvn.model import VNGIN, EdgeScorer
from securefgl.algorithms.fedvn.parties import FedVNClient
from securefgl.algorithms.fedvn.settings import FedVNSettings
from securefgl.data.graph_datasets import synthetic_graphs

M, D, LR = 4, 8, 0.05
S = FedVNSettings(virtual_nodes=M, edge_hidden=D, lambda_decouple=0.3, lambda_contrast=0.7)
G = GraphTaskSettings(model="gin-bn", hidden=D, optimizer="sgd", lr=LR, weight_decay=0.0,
                      batch_size=8, dropout=0.5)  # fmt: skip


def bare_client(seed: int = 0) -> FedVNClient:
    """The attributes the two passes read (no federation around it)."""
    torch.manual_seed(seed)
    c = object.__new__(FedVNClient)
    c.s, c.g = S, G
    c.train_set = GraphBatches(synthetic_graphs(num_graphs=20, num_classes=3, num_features=3,
                                                min_nodes=4, max_nodes=9, seed=seed))  # fmt: skip
    c.model = VNGIN(3, D, 3, 3, 0.5, M)
    c.scorer = EdgeScorer(3, D, 3, 0.5, M)
    c.Q = nn.Parameter(torch.randn(M, D) * 0.1)  # non-zero: L_V has a gradient
    c.opt_theta = make_optimizer(c.model.parameters(), G)
    c.opt_q = make_optimizer([c.Q], G)
    c.opt_omega = make_optimizer(c.scorer.parameters(), G)
    c.s_local = torch.full((M,), 0.5)
    c.s_global = torch.full((M,), 1.0 / M)
    c.s_upload = None
    c.shuffle = np.random.default_rng(seed)
    return c


def flat(module: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def sgd(params: list[nn.Parameter]) -> None:
    with torch.no_grad():
        for p in params:
            p -= LR * p.grad


def replay(c: FedVNClient) -> tuple[nn.Module, nn.Module, torch.Tensor, torch.Tensor]:
    """The round as the authors' code runs it, on copies: returns θ, ω, Q and s_local."""
    model, scorer = copy.deepcopy(c.model), copy.deepcopy(c.scorer)
    Q = nn.Parameter(c.Q.detach().clone())
    s_local, rng = c.s_local.clone(), copy.deepcopy(c.shuffle)
    everything = [*model.parameters(), *scorer.parameters(), Q]
    scorer.train()
    model.eval()
    for b in c.train_set.iterate(G.batch_size, rng):
        score = scorer(b)
        loss = F.cross_entropy(model(b, Q, score), b.y)  # log-probs: CE = NLL of them
        graph = torch.zeros(b.num_graphs, M).index_add(0, b.batch, score)
        a = F.cosine_similarity(graph, s_local[None], dim=1) / S.tau
        g = F.cosine_similarity(graph, c.s_global[None], dim=1) / S.tau
        loss = loss + S.lambda_contrast * -torch.log(a.exp() / (a.exp() + g.exp())).mean()
        for p in everything:
            p.grad = None
        loss.backward()
        sgd(list(scorer.parameters()))
        s_local = graph.mean(0).detach()
    model.train()
    scorer.eval()
    for b in c.train_set.iterate(G.batch_size, rng):
        score = scorer(b)
        loss = F.cross_entropy(model(b, Q, score), b.y)
        centred = F.normalize(Q - Q.mean(1)[:, None])
        loss = loss + S.lambda_decouple * (centred @ centred.t()).pow(2).mean()
        for p in everything:
            p.grad = None
        loss.backward()
        sgd([*model.parameters(), Q])
    return model, scorer, Q.detach(), s_local


def test_a_local_round_is_the_codes_schedule():
    c = bare_client()
    before = (flat(c.model), flat(c.scorer), c.Q.detach().clone())
    torch.manual_seed(7)  # dropout masks: the same draws in the same order on both sides
    model, scorer, Q, s_local = replay(c)
    torch.manual_seed(7)
    c._omega_pass()
    assert torch.equal(flat(c.model), before[0]) and torch.equal(c.Q.detach(), before[2])
    assert torch.allclose(flat(c.scorer), flat(scorer), atol=1e-6)  # ω: stepped, final
    assert not torch.allclose(flat(c.scorer), before[1])
    assert torch.allclose(c.s_local, s_local, atol=1e-5)  # the last batch's mean s̃
    c._theta_pass()
    assert torch.allclose(flat(c.scorer), flat(scorer), atol=1e-6)  # ω untouched
    assert torch.allclose(flat(c.model), flat(model), atol=1e-5)
    assert torch.allclose(c.Q.detach(), Q, atol=1e-6)
    assert not torch.allclose(c.Q.detach(), before[2])
