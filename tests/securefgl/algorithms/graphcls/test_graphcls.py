"""Graph classification: the GIN, the batcher, the baselines on one runner, GCFL+'s parts."""

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.nn import GINConv

from securefgl.algorithms.common.graph.batching import GraphBatches
from securefgl.algorithms.common.graph.models import GIN, structure_encoding
from securefgl.algorithms.graphcls.gcfl import dtw_distance, min_cut
from securefgl.algorithms.registry import algorithm_class, check_config
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data.graph_datasets import synthetic_graphs
from securefgl.experiment import run_experiment
from securefgl.experiment.runner import load_graph, run_single

TINY = {"num_graphs": 80, "max_nodes": 10}


def config(**changes):
    base = {"task": "graph", "dataset": "synthetic-graphs", "clients": 4, "rounds": 3,
            "graph": {"synthetic": TINY, "batch_size": 16}, "algorithms": ["fedavg"]}  # fmt: skip
    return ExperimentConfig(**{**base, **changes})


def test_batches_equal_pyg_collation():
    data = synthetic_graphs(num_graphs=10, seed=1)
    ids = np.array([3, 0, 7])
    ours = GraphBatches(data).batch(ids)
    ref = Batch.from_data_list(
        [Data(x=torch.from_numpy(data.graph(g)[0]), edge_index=torch.from_numpy(data.graph(g)[1]))
         for g in ids]  # fmt: skip
    )
    assert torch.equal(ours.x, ref.x) and torch.equal(ours.edge_index, ref.edge_index)
    assert torch.equal(ours.batch, ref.batch) and ours.y.tolist() == data.y[ids].tolist()


def test_gin_layer_is_pyg_ginconv():
    torch.manual_seed(0)
    model = GIN(4, 8, 2, 2, 0.0).eval()
    data = synthetic_graphs(num_graphs=6, num_features=4, seed=2)
    b = GraphBatches(data).all()
    convs = [GINConv(m) for m in model.graph_convs]
    x = model.pre(b.x)
    for conv in convs:
        x = torch.relu(conv(x, b.edge_index))
    pooled = torch.zeros(b.num_graphs, 8).index_add_(0, b.batch, x)
    ref = torch.log_softmax(model.readout(model.post(pooled)), 1)
    assert torch.allclose(model(b.x, b.edge_index, b.batch, b.num_graphs), ref, atol=1e-5)


def test_structure_encoding_of_a_triangle():
    edges = np.array([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]])
    enc = structure_encoding(edges, 3, n_rw=3, n_dg=4)
    assert np.allclose(enc[:, :3], [[0, 0.5, 0.25]] * 3)  # return probabilities
    assert np.array_equal(enc[:, 3:], [[0, 1, 0, 0]] * 3)  # degree 2, one-hot


def test_dtw_and_min_cut():
    assert dtw_distance(np.array([0.0, 1, 2]), np.array([0.0, 1, 1, 2])) == 0.0
    assert dtw_distance(np.array([0.0]), np.array([3.0])) == 3.0
    sim = np.array([[0, 9, 1, 1], [9, 0, 1, 1], [1, 1, 0, 9], [1, 1, 9, 0]], float)
    left, right = min_cut(sim, np.array([10, 11, 12, 13]))
    assert sorted(map(sorted, (left.tolist(), right.tolist()))) == [[10, 11], [12, 13]]


def test_algorithms_declare_their_task():
    assert algorithm_class("fedavg", "graph").task == "graph"
    assert algorithm_class("fedavg").task == "node"
    with pytest.raises(ConfigError, match="for task 'graph'"):
        check_config(config(algorithms=["fedstruct"]))
    with pytest.raises(ConfigError, match="graph dataset"):
        ExperimentConfig(task="graph", dataset="Cora")


def test_every_baseline_runs_on_one_runner():
    cfg = config(rounds=2, algorithms=["self-train", "fedavg", "fedprox", "gcfl", "fedstar"])
    result = run_experiment(cfg, progress=False)
    rows = {r["algorithm"]: r for r in result.summary()}
    assert set(rows) == set(cfg.algorithms)
    for row in rows.values():
        assert 0 <= row["test_acc"] <= 1 and "best_last_test_acc" in row
    run = result.runs[0]
    assert run.partition["method"] == "dirichlet-label-skew" and run.setup_bytes > 0


def test_self_train_and_fedavg_learn():
    cfg = config(rounds=10, clients=3, algorithms=["self-train", "fedavg"])
    rows = {r["algorithm"]: r for r in run_experiment(cfg, progress=False).summary()}
    assert rows["self-train"]["best_last_test_acc"] > 0.65  # separable classes: well above 0.5
    assert rows["fedavg"]["best_last_test_acc"] > 0.65


def test_fedavg_clients_share_the_model_and_fedstar_only_its_structure_channel():
    cfg = config(rounds=2)
    data = load_graph(cfg)
    run = run_single(cfg, "fedavg", 0, data, progress=False, keep_state=True)
    clients = list(run.state.algorithm.clients.values())
    assert all(np.array_equal(c.params, clients[0].params) for c in clients)
    star = run_single(cfg, "fedstar", 0, data, progress=False, keep_state=True)
    clients = list(star.state.algorithm.clients.values())
    for c in clients:
        c._load_global()
    flats = np.stack([c.flat for c in clients])
    shared = clients[0].shared
    assert np.allclose(flats[:, shared], flats[0, shared])
    private = np.setdiff1d(np.arange(flats.shape[1]), shared)
    assert not np.allclose(flats[:, private], flats[0, private])
    assert "never sent" in star.protection["feature channel"]


def test_fedavg_runs_through_secure_aggregation():
    cfg = config(rounds=2, protocol=["secagg"])
    data = load_graph(cfg)
    plain = run_single(config(rounds=2), "fedavg", 0, data, progress=False)
    secure = run_single(cfg, "fedavg", 0, data, progress=False)
    assert secure.protection["model updates (clients -> server)"] == "secagg"
    assert abs(secure.final["test_acc"] - plain.final["test_acc"]) < 0.05


@pytest.mark.parametrize("stack", [["secagg"], ["ckks"], ["clip_noise"]])
def test_gcfl_refuses_a_protocol_stack_its_server_cannot_work_under(stack):
    """GCFL+ clusters on each client's update: under a stack the run would say "secagg" and
    send them in the clear, so the configuration is refused before anything runs."""
    with pytest.raises(ConfigError, match="gcfl: GCFL\\+ clusters .* --protocol plain"):
        check_config(config(algorithms=["fedavg", "gcfl"], protocol=stack))
    check_config(config(algorithms=["gcfl"], protocol=["plain"]))
    with pytest.raises(ConfigError, match="trains every client every round"):
        check_config(config(algorithms=["gcfl"], client_fraction=0.5))  # it sampled nobody


def test_fedbn_needs_batch_norms_to_keep_local():
    with pytest.raises(ConfigError, match="gin has none"):  # it would be FedAvg
        check_config(config(algorithms=["fedbn"]))
    check_config(config(algorithms=["fedbn"], graph={"synthetic": TINY, "model": "gin-bn"}))


@pytest.mark.parametrize("stream", ["ours", "authors"])
def test_split_seed_fixes_the_split_while_the_run_seed_varies(stream):
    from securefgl.experiment.graph_world import draw_graph_world, load_graph_data

    fixed = config(graph={"synthetic": TINY, "split_stream": stream, "split_seed": 3})
    data = load_graph_data(fixed)

    def split(cfg, seed):
        part, views = draw_graph_world(cfg, seed, data)[1:3]
        return part.assignment.tolist(), [v.test_mask.tolist() for v in views]

    assert split(fixed, 0) == split(fixed, 1) == split(config(graph=fixed.graph), 3)
    free = config(graph={"synthetic": TINY, "split_stream": stream})
    assert split(free, 0) != split(free, 1)
    with pytest.raises(ValueError, match="split_seed"):
        config(graph={"split_seed": -1})


def test_a_client_without_training_or_test_graphs_is_refused():
    """188 graphs over 100 clients left 12 clients with no training graph: they took part
    silently (or a round divided by zero)."""
    cfg = config(clients=80)  # 80 graphs: a client of one graph cannot train and test
    with pytest.raises(ConfigError, match="hold no training or no test graph"):
        run_single(cfg, "fedavg", 0, load_graph(cfg), progress=False)
