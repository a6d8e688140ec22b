"""Model-holder attacks on FedStruct's released model (its deployments, Eq. 10)."""

import numpy as np
import pytest
import torch

from attacks.deployment import deployments
from attacks.link_stealing import link_stealing
from attacks.linkteller import linkteller
from attacks.membership import membership_inference
from attacks.registry import ATTACKS
from attacks.simulation import simulate
from securefgl.algorithms.common.training import unlinked
from securefgl.config import ExperimentConfig
from tests.attacks.graphs import cliques

FS = ExperimentConfig(
    clients=2,
    partition="random",
    cross_edges="known",
    rounds=30,
    dropout=0.0,
    fedstruct={
        "nsf": "hop2vec",
        "structure_hops": 2,
        "feature_hops": 1,
        "feature_hidden": [8],
        "structure_hidden": [8],
    },
)


@pytest.fixture(scope="module")
def data():
    return cliques(count=3, size=10, features=16, seed=1)


@pytest.fixture(scope="module")
def fedstruct_run(data):
    return simulate(FS, "fedstruct", 0, data)


def test_registry_runs_the_released_model_attacks_on_fedstruct():
    for name in ("link_stealing", "linkteller", "membership_inference"):
        assert "fedstruct" in ATTACKS[name].targets


def test_deployment_answers_as_the_client_predicts(fedstruct_run):
    algo = fedstruct_run.state.algorithm
    for dep in deployments(fedstruct_run):
        view = fedstruct_run.views[dep.client]
        pred = dep.logits().argmax(dim=-1).numpy()
        ref = algo.clients[f"client-{view.client_id}"].predict()  # (label, prediction) pairs
        for split, (y, p) in ref.items():
            mask = getattr(view, f"{split}_mask").numpy()
            mine = unlinked(view.y.numpy()[mask], pred[mask])
            assert (mine[0] == y).all() and (mine[1] == p).all()


def test_stacked_queries_are_answered_copy_by_copy(fedstruct_run):
    dep = deployments(fedstruct_run)[0]
    x = dep.data.x
    n = x.shape[0]
    both = dep.model(torch.cat([x, 2 * x]), None)
    assert torch.allclose(both[:n], dep.model(x, None), atol=1e-6)
    assert torch.allclose(both[n:], dep.model(2 * x, None), atol=1e-6)


def test_model_holder_attacks_apply_to_fedstruct(fedstruct_run):
    for attack in (link_stealing, linkteller, membership_inference):
        r = attack(fedstruct_run)
        assert r.applicable, r.reason
        assert 0.0 <= r.value <= 1.0 and r.baseline() is not None


def test_fedstruct_edge_dp_does_not_cover_the_feature_branch(data):
    """ε-edge DP perturbs Ā's inputs only: the feature branch propagates over the TRUE
    internal edges, so LinkTeller still reads them, scored against the true graph."""
    cfg = FS.replace(fedstruct={"edge_dp": "edgerand", "edge_epsilon": 0.1})
    run = simulate(cfg, "fedstruct", 0, data)
    r = linkteller(run)
    assert r.value > 0.9 and r.leaks()
    assert np.isclose(r.baseline(), max(0.5, r.baseline()))
