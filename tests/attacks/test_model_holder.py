"""Model-holder attacks (link stealing, LinkTeller, membership inference) on tiny graphs."""

import numpy as np
import pytest
import torch
from torch_geometric.nn import GCNConv

from attacks.link_stealing import attack0_aucs, link_stealing, pair_distance
from attacks.linkteller import influence_matrix, linkteller
from attacks.membership import membership_inference, membership_signals
from attacks.metrics import roc_auc
from attacks.simulation import simulate
from securefgl.config import ExperimentConfig
from tests.attacks.graphs import cliques

CFG = ExperimentConfig(clients=2, partition="random", rounds=60, hidden=16, dropout=0.0)


@pytest.fixture(scope="module")
def central_run():
    """A GCN trained centrally on three cliques with uninformative features: its
    posteriors encode the clique, i.e. the structure."""
    return simulate(CFG.replace(lr=0.05), "central", 0, cliques())


def test_distances_match_scipy():
    from scipy.spatial import distance

    rng = np.random.default_rng(1)
    a, b = rng.random((5, 4)), rng.random((5, 4))
    for metric in ("cosine", "correlation", "braycurtis", "canberra", "chebyshev"):
        ref = [getattr(distance, metric)(u, v) for u, v in zip(a, b, strict=True)]
        assert np.allclose(pair_distance(a, b, metric), ref)


def test_attack0_is_perfect_on_memorised_cliques():
    post = np.r_[np.tile([0.95, 0.05], (6, 1)), np.tile([0.05, 0.95], (6, 1))]
    post += np.random.default_rng(0).normal(0, 0.01, post.shape)
    pos = np.array([(i, j) for i in range(6) for j in range(i + 1, 6)])
    neg = np.array([(i, j) for i in range(6) for j in range(6, 12)])
    pairs = np.vstack([pos, neg])
    y = np.r_[np.ones(len(pos), bool), np.zeros(len(neg), bool)]
    aucs = attack0_aucs(post, pairs, y)
    assert aucs["correlation"] == 1.0 and aucs["cosine"] == 1.0


def test_link_stealing_on_trained_model(central_run):
    r = link_stealing(central_run)
    assert r.applicable and r.adversary == "model holder"
    assert r.value > 0.9  # edges are within cliques, non-edges across them


def test_linkteller_influence_is_exactly_one_hop_for_one_gcn_layer():
    torch.manual_seed(0)
    n = 7
    edges = torch.tensor([[0, 1, 1, 2, 4, 5], [1, 0, 2, 1, 5, 4]])
    conv = GCNConv(3, 2)

    class One(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, x, e):
            return self.conv(x, e)

    x = torch.rand(n, 3) + 0.1
    infl = influence_matrix(One(), x, edges, np.arange(n), delta=1e-6)
    adj = np.zeros((n, n), bool)
    adj[edges[0], edges[1]] = True
    off = ~np.eye(n, dtype=bool)
    assert (infl[adj & off] > 1e-6).all()
    assert (infl[~adj & off] < 1e-9).all()


def test_linkteller_on_trained_model(central_run):
    r = linkteller(central_run)
    assert r.applicable
    assert r.metrics["auc"] > 0.9


def test_membership_signals_separate_a_memorising_model():
    post = np.r_[np.tile([1.0, 0.0], (10, 1)), np.tile([0.6, 0.4], (10, 1))]
    labels = np.zeros(20, int)
    member = np.r_[np.ones(10, bool), np.zeros(10, bool)]
    s = membership_signals(post, labels)
    assert roc_auc(s["confidence"], member) == 1.0


def test_membership_inference_runs_on_deployments(central_run):
    r = membership_inference(central_run)
    assert r.applicable and 0.0 <= r.value <= 1.0
    assert r.details["members"] + r.details["non_members"] == int(
        (central_run.state.graph.train_mask | central_run.state.graph.test_mask).sum()
    )


def test_model_holder_attacks_do_not_apply_to_unsupported_algorithms(central_run):
    object.__setattr__(central_run.result, "algorithm", "fedgcn")
    try:
        for attack in (link_stealing, linkteller, membership_inference):
            r = attack(central_run)
            assert not r.applicable and r.value is None and "fedgcn" in r.reason
    finally:
        object.__setattr__(central_run.result, "algorithm", "central")
