"""FedGLS reproduction: the best-validation round and the report's view of it."""

import numpy as np
import torch

from benchmarks.reproduce_fedgls.__main__ import selected_accuracies
from benchmarks.reproduce_fedgls.drift import client_drift
from benchmarks.reproduce_fedgls.report import (
    best_val_rows,
    select_on_validation,
    with_chosen_settings,
)
from securefgl.algorithms.fedgls.learner import feature_knn
from securefgl.algorithms.fedgls.models import Propagation


def test_best_validation_round_is_the_first_maximum_and_last_is_the_last_evaluated():
    history = [
        {"round": 0, "loss": 1.0},  # not evaluated
        {"round": 1, "client_mean_val": 0.70, "client_mean_test": 0.60},
        {"round": 2, "client_mean_val": 0.80, "client_mean_test": 0.75},
        {"round": 3, "client_mean_val": 0.80, "client_mean_test": 0.90},
        {"round": 4, "client_mean_val": 0.50, "client_mean_test": 0.55},
    ]
    out = selected_accuracies(history)
    assert out == {"acc": 55.0, "acc_best_val": 75.0, "best_val_round": 2, "val_acc_best": 80.0}


def test_report_reads_best_validation_runs_and_keeps_last_round_beside():
    row = {
        "mean": 70.0, "std": 1.0, "seeds": 2, "mean_best_val": 80.0, "std_best_val": 0.5,
        "runs": [{"seed": 0, "acc": 69.0, "acc_best_val": 80.5}, {"seed": 1, "acc": 71.0}],
    }  # fmt: skip
    (out,) = best_val_rows([row])
    assert (out["mean"], out["seeds"], out["mean_last"], out["seeds_last"]) == (80.0, 1, 70.0, 2)
    assert out["runs"] == [{"seed": 0, "acc": 80.5, "acc_best_val": 80.5}]


def test_graph_drift_compares_undirected_edge_sets():
    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    y = np.array([0, 0, 1, 1])
    knn = feature_knn(x, 1)
    real = np.array([[0, 1, 0, 2, 3], [1, 0, 2, 0, 3]])  # {0-1}, {0-2} both ways, a self-loop
    same = client_drift(x, y, knn, real, k=1)  # the kNN: {0-1}, {2-3}
    assert same["edges_kept"] == 1.0 and same["homophily_knn"] == same["homophily_learned"] == 1.0
    assert same["real_edges_knn"] == same["real_edges_learned"] == 0.5
    crossed = Propagation(torch.tensor([0, 2]), torch.tensor([2, 0]), torch.ones(2), 4)  # {0-2}
    moved = client_drift(x, y, crossed, real, k=1)
    assert moved["edges_kept"] == 0.0 and moved["homophily_learned"] == 0.0
    assert moved["real_edges_learned"] == 0.5


def _candidate(method: str, variant: str, val: float, test: float, seeds: int = 5) -> dict:
    runs = [{"seed": s, "acc": test, "val_acc_best": val} for s in range(seeds)]
    return {
        "dataset": "Cora", "clients": 8, "graphless_fraction": 0.5, "local_epochs": 5,
        "method": method, "protocol": "plain", "variant": variant, "runs": runs,
        "mean": test, "std": 0.0, "seeds": seeds, "mean_last": test, "std_last": 0.0,
        "seeds_last": seeds,
    }  # fmt: skip


def test_selection_follows_validation_only_and_needs_every_candidate():
    rows = [
        _candidate("fedgls", "default", val=80.0, test=90.0),
        _candidate("fedgls", "k5", val=81.0, test=70.0),  # best validation, worst test
        _candidate("fedgls", "k20", val=81.0, test=95.0),  # tie on validation: k5 came first
        _candidate("fedgls", "split-C", val=79.0, test=99.0),
        _candidate("fed-mlp", "default", val=70.0, test=60.0),
        _candidate("fed-mlp", "split-C", val=70.0, test=65.0),  # tie: the preset is kept
        _candidate("fed-gnnk", "default", val=90.0, test=90.0),
        _candidate("fed-gnnk", "k5", val=91.0, test=90.0, seeds=4),  # short of 5 seeds
    ]
    chosen = {r["method"]: r for r in select_on_validation(rows)}
    assert set(chosen) == {"fedgls", "fed-mlp"}  # Fed-GNNk lacks k20, split-C and a seed
    assert (chosen["fedgls"]["setting"], chosen["fedgls"]["mean"]) == ("k5", 70.0)
    assert chosen["fed-mlp"]["setting"] == "default"
    assert set(chosen["fedgls"]["candidates"]) == {"default", "k5", "k20", "split-C"}


def test_fedgls_json_takes_the_chosen_setting_and_names_every_row_s_setting():
    key = {"dataset": "Cora", "clients": 8, "graphless_fraction": 0.5, "local_epochs": 5,
           "protocol": "plain"}  # fmt: skip
    summary = [{**key, "method": "fedgls", "mean": 80.0, "std": 1.0},
               {**key, "method": "fed-mlp", "mean": 60.0, "std": 2.0}]  # fmt: skip
    chosen = [{**key, "method": "fedgls", "mean": 81.0, "std": 0.5, "setting": "k20",
               "val_mean": 82.0, "candidates": {}}]  # fmt: skip
    out = with_chosen_settings(summary, chosen)
    assert out[0] == {**key, "method": "fedgls", "mean": 81.0, "std": 0.5, "setting": "k20"}
    assert out[1] == {**summary[1], "setting": "default"}
