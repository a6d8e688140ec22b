"""FedGLS in the audit: the server's reading of θ / φ updates, the learned-graph replay and
link stealing on graph clients, each under the protections that change them."""

import pytest
import torch

from attacks.fedgls_leakage import learned_graph_replay, update_feature_support
from attacks.link_stealing import link_stealing
from attacks.registry import attacks_for
from attacks.simulation import simulate
from tests.securefgl.algorithms.fedgls.world import tiny_config, tiny_graph

KEEP = frozenset({"fedgls/model"})


@pytest.fixture(scope="module")
def graph():
    return tiny_graph(n=200, features=40)


def run(graph, protocol, rounds=3, **changes):
    cfg = tiny_config(rounds=rounds, protocol=protocol, **changes)
    return simulate(cfg, "fedgls", 0, graph, keep_tags=KEEP)


@pytest.fixture(scope="module")
def rare():
    """A sparse graph where every node also has a feature of its own: some of them sit only
    on nodes outside the training nodes' receptive field."""
    g = tiny_graph(n=200, features=40, avg_degree=1.5)
    g.x = torch.cat([g.x, torch.eye(200)], dim=1)
    return g


def test_fedgls_is_audited():
    names = {s.name for s in attacks_for("fedgls")}
    assert {"update_feature_support", "learned_graph_replay", "link_stealing"} <= names


def test_phi_updates_reveal_every_nodes_features_and_secagg_hides_them(graph, rare):
    plain = update_feature_support(run(graph, []))
    assert plain.applicable
    assert plain.metrics["support_auc_phi"] > 0.95  # no decay: only dropout hides a feature
    assert plain.leaks()
    # φ is distilled on every node: features only the non-training nodes have show in φ,
    # not in θ
    few = update_feature_support(
        run(rare, [], train_fraction=0.1, val_fraction=0.1, test_fraction=0.8, dropout=0.0)
    )  # without dropout every moved column is seen
    assert few.details["features_only_outside_training_field"] > 10
    assert few.metrics["test_only_auc_phi"] > 0.9 > 0.6 > few.metrics["test_only_auc_theta"]
    for protocol in (["secagg"], ["ckks"]):
        assert not update_feature_support(run(graph, protocol)).applicable
    # local DP noise drowns the columns (many absent features here: a stable AUC)
    clean, noisy = (
        update_feature_support(run(rare, p, dropout=0.0)) for p in ([], ["ldp_gaussian"])
    )
    assert clean.metrics["support_auc_phi"] > 0.95 > 0.7 > noisy.metrics["support_auc_phi"]


def test_the_server_replays_a_graphless_clients_learned_graph(graph):
    plain = learned_graph_replay(run(graph, []))
    assert plain.metrics["learned_f1"] == pytest.approx(1.0)
    assert plain.baselines["learned_f1"] <= 1.0 and "true_auc" in plain.metrics
    # the noised global model is exactly what the client used: DP does not stop the replay
    assert learned_graph_replay(run(graph, ["secagg", "clip_noise"])).metrics[
        "learned_f1"
    ] == pytest.approx(1.0)
    ckks = learned_graph_replay(run(graph, ["ckks"]))
    assert not ckks.applicable and "never held the global model" in ckks.reason


def test_link_stealing_headline_pools_the_graph_clients_only(graph):
    result = link_stealing(run(graph, [], rounds=2))
    assert result.details["deployments"] == {"graph": 2, "graphless": 2}
    assert "auc_graphless" in result.metrics


def test_dense_features_make_the_support_attack_not_applicable_with_a_reason():
    """A plain CSBM graph: every feature is non-zero on every node, so every client has every
    feature and the support AUC has no negatives: the row says why, not "undefined"."""
    dense = tiny_graph(n=120, features=8)
    dense.x = dense.x + 1.0  # no zero anywhere
    result = update_feature_support(run(dense, [], rounds=1))
    assert not result.applicable
    assert "every feature occurs on every client" in result.reason
