"""Gradient inversion from a FedAvg-GCN update: exact cases and the secagg/ckks views."""

import numpy as np
import pytest
import torch

from attacks.gradient_inversion import (
    first_layer_scores,
    gradient_inversion,
    label_counts,
    receptive_field,
    single_node_inversion,
)
from attacks.simulation import simulate
from securefgl.config import ExperimentConfig
from securefgl.models import build_model
from tests.attacks.graphs import graph


def test_single_node_linear_model_is_inverted_exactly():
    torch.manual_seed(0)
    layer = torch.nn.Linear(20, 4)
    x = torch.rand(1, 20)
    loss = torch.nn.functional.cross_entropy(layer(x), torch.tensor([2]))
    gw, gb = torch.autograd.grad(loss, [layer.weight, layer.bias])
    rec = single_node_inversion(gw.numpy(), gb.numpy())
    assert np.allclose(rec, x.numpy().ravel(), atol=1e-5)


def test_label_counts_from_uniform_posteriors():
    counts = np.array([3, 0, 5, 2])
    batch = counts.sum()
    grad_bias = (batch / counts.size - counts) / batch  # mean of (1/C - y) over the batch
    assert (label_counts(grad_bias, batch) == counts).all()


def random_binary_graph(n=40, d=30, seed=0):
    rng = np.random.default_rng(seed)
    edges = {(int(a), int(b)) for a, b in rng.integers(0, n, (60, 2)) if a != b}
    x = (rng.random((n, d)) < 0.08).astype(np.float32)
    y = rng.integers(0, 3, n)
    return graph(sorted(edges), x, y, seed)


def test_first_layer_gradient_reveals_the_receptive_fields_vocabulary():
    data = random_binary_graph()
    torch.manual_seed(1)
    model = build_model("gcn", data.num_features, 16, 3, 2, dropout=0.0)
    out = model(data.x, data.edge_index)
    m = data.train_mask
    loss = torch.nn.functional.cross_entropy(out[m], data.y[m])
    grads = list(torch.autograd.grad(loss, list(model.parameters())))
    support = first_layer_scores(model, grads, data.num_features) > 0
    field = receptive_field(data.edge_index, data.num_nodes, np.flatnonzero(m.numpy()), 2)
    truth = (data.x.numpy()[field] != 0).any(axis=0)
    assert not truth.all()  # some words are absent: the test can tell
    assert (support == truth).all()


@pytest.fixture(scope="module")
def data():
    return random_binary_graph(n=60, d=40, seed=3)


CFG = ExperimentConfig(clients=3, partition="random", rounds=1, hidden=8)


def test_server_reads_the_vocabulary_of_a_plain_update(data):
    run = simulate(CFG, "fedavg", 0, data)
    r = gradient_inversion(run, client=0, steps=20)
    assert r.applicable and r.adversary == "server"
    assert r.metrics["support_precision"] == 1.0  # a non-zero column is always a used word
    assert r.metrics["support_auc"] > 0.5
    assert 0 <= r.metrics["cosine"] <= 1


@pytest.mark.parametrize(("stack", "word"), [(["secagg"], "SecAgg"), (["ckks"], "CKKS")])
def test_not_applicable_when_the_server_sees_only_the_aggregate(data, stack, word):
    run = simulate(CFG.replace(protocol=stack), "fedavg", 0, data)
    r = gradient_inversion(run, client=0)
    assert not r.applicable and r.value is None and r.metrics == {}
    assert word in r.reason
