"""Algorithms train, report honestly, and their parties hold only their own data."""

import logging
import time

import numpy as np
import pytest
import torch

from securefgl.algorithms.fedavg.algorithm import FedAvg
from securefgl.algorithms.registry import check_config
from securefgl.config import ExperimentConfig
from securefgl.experiment import runner
from securefgl.experiment.runner import ExperimentResult, load_graph, run_single
from securefgl.models import build_model, get_flat, set_flat

SMALL = {"num_nodes": 600, "num_features": 16, "feature_signal": 0.3, "homophily": 0.8}


def _config(**kw):
    base = dict(csbm=SMALL, clients=4, partition="random", rounds=30, eval_every=10, hidden=16)
    return check_config(ExperimentConfig(**{**base, **kw}))


@pytest.fixture(scope="module")
def graph():
    return load_graph(_config())


def test_set_flat_copies_and_round_trips():
    model = build_model("gcn", 5, 4, 3)
    vec = np.arange(sum(p.numel() for p in model.parameters()), dtype=np.float32)
    set_flat(model, vec)
    np.testing.assert_array_equal(get_flat(model), vec)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)  # training must not write into the sender's array
    assert vec[0] == 0.0
    with pytest.raises(ValueError, match="shape"):
        set_flat(model, vec[:-1])


@pytest.mark.parametrize("algo", ["fedavg", "fedprox", "local", "central"])
def test_each_algorithm_learns_beyond_chance(graph, algo):
    result = run_single(_config(local_epochs=2), algo, 0, graph, progress=False)
    chance = 1 / int(graph.num_classes)
    margin = 0.1 if algo == "local" else 0.2  # 15 labelled nodes per client
    assert result.final["test_acc"] > chance + margin, result.final
    assert result.federated == (algo not in ("local", "central"))  # local: each client alone
    assert result.setting == {"local": "local", "central": "central"}.get(algo, "federated")
    assert len(result.history) == 30 and "test_acc" in result.history[9]
    assert "test_acc" not in result.history[8]  # evaluation schedule respected


def test_fedavg_with_one_client_matches_central_quality(graph):
    """One client holding everything: FedSGD + server Adam is central training."""
    cfg = _config(clients=1)
    fed = run_single(cfg, "fedavg", 0, graph, progress=False).final["test_acc"]
    central = run_single(cfg, "central", 0, graph, progress=False).final["test_acc"]
    assert abs(fed - central) < 0.05


def test_fedavg_bytes_per_round_are_the_model_both_ways(graph):
    result = run_single(_config(), "fedavg", 0, graph, progress=False)
    dim = sum(p.numel() for p in build_model("gcn", 16, 16, 5).parameters())
    row = result.history[3]
    # both ways float32, the models' precision: parameters down, weighted deltas up
    assert 4 * dim * 4 < row["bytes_down"] < 4 * (dim * 4 + 400)
    assert 4 * dim * 4 < row["bytes_up"] < 4 * (dim * 4 + 400)
    local = run_single(_config(), "local", 0, graph, progress=False)
    assert all(h["bytes_up"] == h["bytes_down"] == 0 for h in local.history)


def _reachable_arrays(obj, seen=None, depth=0):
    """Every tensor / ndarray reachable through attributes and containers."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 12:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor | np.ndarray):
        yield obj
        return
    if isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, list | tuple | set):
        children = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        children = list(vars(obj).values())
    else:
        return
    for child in children:
        yield from _reachable_arrays(child, seen, depth + 1)


def test_fedavg_client_parties_reach_no_other_clients_features(graph):
    from securefgl.data import build_client_views, partition_graph, random_split
    from securefgl.federation import Channel
    from securefgl.federation.federation import Federation
    from securefgl.federation.stack import build_stack

    g = graph.clone()
    g.train_mask, g.val_mask, g.test_mask = random_split(g.num_nodes, seed=1)
    part = partition_graph(g, 4, "random", seed=2)
    views = build_client_views(g, part.assignment, "known", seed=3)
    algo = FedAvg(_config())
    algo.setup(Federation(views, Channel(), build_stack(_config(), 4), 0))
    algo.train_round(0)
    rows = {tuple(r) for r in g.x.numpy().round(5).tolist()}
    for cid, client in algo.clients.items():
        own = {tuple(r) for r in client.data.x.numpy().round(5).tolist()}
        others = rows - own
        for arr in _reachable_arrays(client):
            a = arr.detach().numpy() if isinstance(arr, torch.Tensor) else arr
            if a.ndim == 2 and a.shape[1] == g.num_features:
                assert not ({tuple(r) for r in a.round(5).tolist()} & others), cid
            assert a.size < g.num_nodes * g.num_features, f"{cid} holds a global-size array"


def test_setup_time_is_reported_with_the_rounds(graph, monkeypatch):
    """Set-up (e.g. FedStruct's Ā build) counts in the seconds, as its bytes do."""
    slow = 0.3
    setup = FedAvg.setup

    def slow_setup(self, *args, **kwargs):
        time.sleep(slow)
        return setup(self, *args, **kwargs)

    monkeypatch.setattr(FedAvg, "setup", slow_setup)
    cfg = _config(rounds=3, eval_every=3)
    result = ExperimentResult(cfg, [run_single(cfg, "fedavg", 0, graph, progress=False)])
    run = result.runs[0]
    assert run.setup_seconds >= slow and run.to_dict()["setup_seconds"] == run.setup_seconds
    row = result.summary()[0]
    rounds = sum(h["seconds"] for h in run.history)
    assert row["setup_seconds"] == run.setup_seconds
    assert row["seconds"] == pytest.approx(run.setup_seconds + rounds)


def test_runs_without_a_bar_log_their_progress(graph, monkeypatch, caplog):
    """progress=False or no terminal (benchmarks, logs, CI): a run still says how far it is,
    on the progress logger, from set-up to the last round, even when a round is slow."""
    monkeypatch.setattr(runner, "PROGRESS_LOG_SECONDS", 0.05)
    train_round = FedAvg.train_round

    def slow_round(self, r):
        time.sleep(0.12)
        return train_round(self, r)

    monkeypatch.setattr(FedAvg, "train_round", slow_round)
    with caplog.at_level(logging.INFO, logger="securefgl.progress"):
        run_single(_config(rounds=3, eval_every=3), "fedavg", 0, graph, progress=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "securefgl.progress"]
    rounds = [line.split(",")[0] for line in lines if "round" in line]
    assert rounds and set(rounds) <= {f"fedavg seed=0: round {r}/3" for r in (1, 2, 3)}
    assert all("s in" in line for line in lines) and any("to go" in line for line in lines)
