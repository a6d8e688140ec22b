"""FedVN's backbone in the graph toolkit (GIN-BN, plain SGD, evaluation in batches) and the
baselines added for FedVN's table: FedBN keeps the batch norms local, Ditto's personal
model."""

import numpy as np
import torch
from torch import nn

from securefgl.algorithms.common.graph.batching import GraphBatches
from securefgl.algorithms.common.graph.bn_gin import BNGIN
from securefgl.algorithms.common.graph.learner import build_model
from securefgl.algorithms.common.graph.models import unshared_index
from securefgl.algorithms.common.graph.training import predict
from securefgl.config import ExperimentConfig
from securefgl.data.graph_datasets import synthetic_graphs
from securefgl.experiment.runner import load_graph, run_single
from securefgl.models import get_flat

GRAPH = {"synthetic": {"num_graphs": 80, "max_nodes": 10}, "batch_size": 16, "model": "gin-bn",
         "optimizer": "sgd", "lr": 0.05, "weight_decay": 0.0, "hidden": 8}  # fmt: skip


def config(algo, **graph):
    return ExperimentConfig(task="graph", dataset="synthetic-graphs", clients=4, rounds=2,
                            algorithms=[algo], graph={**GRAPH, **graph})  # fmt: skip


def test_gin_bn_evaluates_on_batch_statistics():
    cfg = config("fedavg")
    model = build_model("gin", 4, 2, cfg)
    assert isinstance(model, BNGIN)
    data = GraphBatches(synthetic_graphs(num_graphs=9, seed=0))
    model.eval()
    _, whole = predict(model, data)
    _, batched = predict(model, data, batch_size=4)  # batches 4, then 5 (no batch of one)
    assert len(data.in_order(4)) == 2 and len(batched) == 9
    b = data.in_order(4)[0]
    alone = model(b.x, b.edge_index, b.batch, b.num_graphs, adj=b.adj).argmax(1)
    assert np.array_equal(batched[:4], alone.numpy())
    assert whole.shape == batched.shape


def test_fedbn_averages_everything_but_the_batch_norms():
    model = BNGIN(4, 8, 2, 3, 0.5)
    shared = unshared_index(model, (nn.BatchNorm1d,))
    bn = sum(p.numel() for m in model.modules() if isinstance(m, nn.BatchNorm1d)
             for p in m.parameters())  # fmt: skip
    assert shared.size == get_flat(model).size - bn > 0
    data = load_graph(config("fedbn"))
    res = run_single(config("fedbn"), "fedbn", 0, data, progress=False, keep_state=True)
    assert res.state is not None
    clients = list(res.state.algorithm.clients.values())
    norms = [[p.detach().clone() for m in c.model.modules() if isinstance(m, nn.BatchNorm1d)
              for p in m.parameters()] for c in clients]  # fmt: skip
    assert not all(torch.allclose(a, b) for a, b in zip(norms[0], norms[1], strict=True))
    rest = [c.flat[shared] for c in clients]
    assert all(np.allclose(rest[0], r) for r in rest)  # the shared part is the global model


def test_ditto_keeps_a_personal_model_beside_the_global_one():
    data = load_graph(config("ditto"))
    res = run_single(config("ditto", ditto_lambda=0.5), "ditto", 0, data, progress=False,
                     keep_state=True)  # fmt: skip
    assert res.state is not None
    client = next(iter(res.state.algorithm.clients.values()))
    client._load_global()
    assert not np.allclose(get_flat(client.personal), client.flat)
    assert res.protection["personal models"] == "never sent (local)"
