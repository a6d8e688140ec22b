"""GPFL: properties and selector, the network pieces, Eq. 2 through secure sums, the
private similarity and the property LDP, and what reaches the server."""

import networkx as nx
import numpy as np
import pytest
import torch

from protocols.bundles import unbundle
from securefgl.algorithms.gpfl.network import (
    compress,
    learn_network,
    marginal_unit,
    mixing_matrix,
    normalize,
    spectral_factor,
    update_network,
)
from securefgl.algorithms.gpfl.properties import (
    RANGES,
    closeness,
    f2sim,
    graph_properties,
    ldp_release,
    rule_selector,
)
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment.runner import load_graph, run_single
from securefgl.federation import Transcript

TINY = {"num_graphs": 80, "max_nodes": 10}


def config(**gpfl):
    return ExperimentConfig(
        task="graph", dataset="synthetic-graphs", clients=4, rounds=2, algorithms=["gpfl"],
        graph={"synthetic": TINY, "batch_size": 16}, gpfl={"gae_epochs": 5, **gpfl},
    )  # fmt: skip


def test_graph_properties_of_a_path():
    edges = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])  # the path 0-1-2
    p = graph_properties(edges, 3)
    g = nx.path_graph(3)
    assert np.allclose(p[:3], [4 / 3, 4 / 6, 2 / 9])  # ⟨d⟩, E/(N(N−1)), Var d
    assert np.isclose(p[3], (2 * np.log(2) / 3) / 4)  # mean(d log d) / E
    assert np.isclose(p[4], -(3 / 4 + 2))
    assert np.isclose(p[5], np.mean(list(nx.closeness_centrality(g).values())))
    two = np.array([[0, 1], [1, 0]])  # a component of 2 in 4 nodes: Wasserman–Faust
    ref = nx.Graph([(0, 1)])
    ref.add_nodes_from(range(4))
    assert np.allclose(closeness(two, 4), list(nx.closeness_centrality(ref).values()))


def test_selector_drops_properties_that_do_not_explain_the_target():
    rng = np.random.default_rng(0)
    props = rng.normal(size=(12, 6))
    target = f2sim(props[:, [0, 3]])
    sim, kept = rule_selector(props, target, min_properties=2)
    assert kept == [0, 3] and np.allclose(sim, target)


def test_ldp_noise_scale_follows_the_unit():
    rng = np.random.default_rng(1)
    props = RANGES.mean(1)
    width = (RANGES[:, 1] - RANGES[:, 0]).sum()
    rows = np.tile(props, (50, 1))
    ds = np.stack([ldp_release(rows, 2.0, "dataset", rng) for _ in range(4000)])
    gr = np.stack([ldp_release(rows, 2.0, "graph", rng) for _ in range(4000)])
    assert np.allclose(ds.std(0), np.sqrt(2) * width / 2.0, rtol=0.1)  # Laplace(Δ/ε)
    assert np.allclose(gr.std(0), np.sqrt(2) * width / 50 / 2.0, rtol=0.1)


def test_one_graph_moves_the_released_mean_by_at_most_the_graph_sensitivity():
    """Unit graph: each graph is clipped before the mean, so replacing one (here by a
    400-node star, far outside the ranges) moves the mean by at most Σ widths / n."""
    paths = np.stack([graph_properties(np.array([[i, i + 1] for i in range(9)]
                                                + [[i + 1, i] for i in range(9)]).T, 10)
                      for _ in range(10)])  # fmt: skip
    star = graph_properties(np.array([[0] * 399 + list(range(1, 400)),
                                      list(range(1, 400)) + [0] * 399]), 400)  # fmt: skip
    swapped = np.vstack([paths[:-1], star])
    zero = _ZeroNoise()
    moved = np.abs(ldp_release(swapped, 1.0, "graph", zero) - ldp_release(paths, 1.0, "graph",
                                                                          zero)).sum()  # fmt: skip
    assert moved <= (RANGES[:, 1] - RANGES[:, 0]).sum() / 10 + 1e-12


class _ZeroNoise:
    def laplace(self, loc: float, scale: float, size: tuple[int, ...]) -> np.ndarray:
        return np.zeros(size)


def test_network_pieces():
    a = np.array([[1.0, 3.0], [1.0, 1.0]])
    assert np.allclose(normalize(a, "row").sum(1), 1)
    assert np.allclose(normalize(a, "sym"), a / np.sqrt(np.outer(a.sum(1), a.sum(1))))
    assert np.allclose(update_network(np.eye(2), -np.ones((2, 2)), 0.5), [[0.0, 0], [0, 0]])
    w = mixing_matrix(normalize(a, "row"), 0.05)
    assert np.allclose(w.sum(1), 1) and np.isclose(w[0, 0], 0.05 + 0.95 * 0.25)
    flat = np.arange(1050, dtype=float)
    pooled = torch.avg_pool1d(torch.tensor(flat)[None, None], 10, 10)[0, 0].numpy()
    assert np.allclose(compress(flat, 100), pooled)  # stride 10 -> 105 values
    x = marginal_unit(np.random.default_rng(2).normal(size=(6, 20)))
    f = spectral_factor(x @ x.T, 20)
    assert f.shape == (6, 20) and np.allclose(f @ f.T, x @ x.T)
    torch.manual_seed(0)
    net = learn_network(x, normalize(np.maximum(x @ x.T, 0), "row"), 16, 5, 1e-3, 5e-4, 1.0, 0.1)
    assert np.allclose(net.sum(1), 1) and np.all(net >= 0)


def test_personalised_update_is_w_times_the_updates_through_masked_sums():
    cfg = config(sums="masked", similarity="plain")
    data = load_graph(cfg)
    run = run_single(cfg.replace(rounds=1), "gpfl", 0, data, progress=False, keep_state=True)
    algo = run.state.algorithm
    clients = [algo.clients[c] for c in algo.ids]
    deltas = np.stack([c.delta for c in clients])
    expect = np.stack([c.start for c in clients]) + algo.server.W @ deltas
    got = np.stack([c.flat for c in clients])
    assert np.allclose(got, expect, atol=1e-5)  # Eq. 2, fixed point 2^-32
    assert run.protection["personalised aggregation Σ_j w_ij Δθ_j"].startswith("masked")
    assert run.aggregate_error is not None and 0 < run.aggregate_error < 1e-8  # the audit


def test_private_run_server_gets_only_similarities_and_ldp_properties():
    cfg = config(sums="masked", similarity="ckks", property_epsilon=1.0).replace(
        store_payloads=True
    )
    data = load_graph(cfg)
    run = run_single(cfg, "gpfl", 0, data, progress=False, keep_state=True,
                     transcript=Transcript(store_payloads=True))  # fmt: skip
    seen = run.transcript.view("server")
    tags = seen.tags()
    assert "gpfl/features" not in tags and "gpfl/update" not in tags
    assert "gram/matrices" in tags and "gpfl/properties" in tags
    for env in seen.messages("secure-sum/contribution"):  # masked words, no float update
        for part in unbundle(env.payload, "test").values():
            assert set(part.fields) == {"y"} and part.fields["y"].dtype == np.uint64
    assert run.privacy["epsilon"] == 1.0 and "local DP" in run.privacy["adversary"]
    # the decrypted cosines are those of the clients' centred features (last round)
    algo = run.state.algorithm
    grams = algo.server.gram.result()
    for name in ("params", "embedding"):
        u = marginal_unit(np.stack([algo.clients[c].features[name] for c in algo.ids]))
        assert np.abs(grams[name] - u @ u.T).max() < 2e-3
    assert not algo.server.features  # the server never held a feature vector


def test_min_senders_folds_a_lone_sender_into_the_own_weight():
    from securefgl.algorithms.gpfl.parties import GPFLServer

    cfg = config()
    server = GPFLServer(np.zeros(3), ["a", "b", "c"], cfg.gpfl.replace(learn=False), 0)
    server.previous = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    server.features = {c: {"params": np.eye(3)[i], "embedding": np.eye(3)[i]}
                       for i, c in enumerate("abc")}  # fmt: skip
    server.build_network(1, min_senders=2)
    w = server.W
    assert w[0, 1] == 0 and np.isclose(w[0, 0], 1.0)  # a had only b: no sum, own update
    assert np.allclose(w.sum(1), 1) and server.fallbacks == 2


def test_ablation_and_paper_flags_run():
    data = load_graph(config())
    for flags in ({"initial": "random", "learn": False}, {"norm": "sym", "self_weight": 0.95,
                                                          "identical_probes": True}):  # fmt: skip
        run = run_single(config(**flags), "gpfl", 0, data, progress=False)
        assert 0 <= run.final["test_acc"] <= 1


def test_gpfl_refuses_update_mechanisms():
    data = load_graph(config())
    with pytest.raises(ConfigError, match="no DP mechanism on its updates"):
        run_single(config().replace(protocol=["ldp_laplace"]), "gpfl", 0, data, progress=False)


@pytest.mark.parametrize(("protocol", "gpfl", "match"), [
    # the stack would not be applied: the updates travel by GPFL's plain sums
    ({"stack": ["secagg"]}, {"sums": "plain", "similarity": "plain"}, "would not be applied"),
    # the CKKS similarity's feature mean would go through plain sums: features in the clear
    ({"stack": ["plain"]}, {"sums": "plain", "similarity": "ckks"}, "in the clear"),
    # the Gram protocol's authority decrypts whatever a lying server hands it
    ({"stack": ["secagg"], "threat_model": "malicious"}, {}, "no defence against a malicious"),
    # nothing is released for the ε to cover (it would read ε = 0)
    ({"stack": ["plain"]}, {"initial": "random", "property_epsilon": 1.0}, "does not make"),
    # 4 clients leave 3 senders to each personalised sum
    ({"stack": ["secagg"]}, {"min_senders": 4}, "min_senders = 4"),
])  # fmt: skip
def test_settings_that_would_not_hold_are_refused(protocol, gpfl, match):
    cfg = config(**gpfl).replace(protocol=protocol)
    with pytest.raises(ConfigError, match=match):
        run_single(cfg, "gpfl", 0, load_graph(cfg), progress=False)
