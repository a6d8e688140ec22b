"""GOOD-Motif generated offline: the recipe (base sizes, one motif joined by one edge, the
role-restricted perturbation, label noise), its statistics against the recipe's
expectation, and the one-domain-per-client split."""

import networkx as nx
import numpy as np
import pytest

from securefgl.config import ExperimentConfig
from securefgl.data.good_motif import (
    BASES,
    MOTIF_EDGES,
    MOTIFS,
    base_graph,
    expected_statistics,
    generate,
    good_motif,
    motif_statistics,
)
from securefgl.data.graph_views import build_domain_views
from securefgl.experiment.graph_world import draw_graph_world


@pytest.fixture(scope="module")
def basis():
    return generate("basis", graphs_per_domain=150, val_per_domain=0, seed=3)


@pytest.fixture(scope="module")
def size():
    return generate("size", graphs_per_domain=150, val_per_domain=0, seed=3)


def test_base_graphs_follow_goods_sizes_and_roles():
    n, edges, role0 = base_graph("tree", 9)  # height ⌊log2 9⌋ − 1 = 2: 7 nodes
    assert n == 7 and len(edges) == 6 and role0.all()
    n, edges, role0 = base_graph("ladder", 5)
    assert n == 10 and len(edges) == 13 and role0.all()
    n, edges, role0 = base_graph("star", 6)  # centre + 6 leaves; only the centre is role 0
    assert n == 7 and len(edges) == 6 and role0.tolist() == [True] + [False] * 6
    n, edges, role0 = base_graph("path", 5)  # the ends are not role 0
    assert n == 5 and role0.tolist() == [False, True, True, True, False]
    n, edges, _ = base_graph("wheel", 6)
    assert n == 6 and len(edges) == 10


@pytest.mark.parametrize("kind", ["basis", "size"])
def test_mean_nodes_per_domain_within_10_percent_of_the_recipe(kind, basis, size):
    made = basis if kind == "basis" else size
    for got, want in zip(motif_statistics(made.data), expected_statistics(kind), strict=True):
        assert got["graphs"] == 150
        assert abs(got["nodes_mean"] / want["nodes"] - 1) < 0.10, (got, want)
        assert abs(got["edges_mean"] / want["edges"] - 1) < 0.10, (got, want)


def test_each_graph_carries_its_motif_joined_by_one_edge_from_node_0(basis):
    data = basis.data
    for g in range(0, data.num_graphs, 37):
        _, ei = data.graph(g)
        n = int(data.num_nodes[g])
        motif = MOTIFS[int(basis.motif[g])]
        first = n - 5  # the motif's nodes come last
        graph = nx.Graph(ei.T.tolist())
        inside = {frozenset(e) for e in graph.subgraph(range(first, n)).edges()}
        want = {frozenset((a + first, b + first)) for a, b in MOTIF_EDGES[motif]}
        assert inside == want  # the motif, and no perturbation edge between its nodes
        out = [(u, v) for u, v in graph.edges(range(first, n)) if v < first]
        assert any(u == first for u, _ in out), "motif node 0 is joined to the base"
        _, _, role0 = base_graph(BASES[int(basis.base[g])], int(basis.width[g]))
        for u, v in out:  # any other edge into the motif is a perturbation: role-0 base end
            assert u == first or role0[v]


def test_labels_are_the_motif_up_to_goods_label_noise(basis, size):
    for made in (basis, size):
        wrong = float(np.mean(made.data.y != made.motif))
        assert 0.03 < wrong < 0.11  # 0.1 × 2/3 ≈ 0.067 of labels differ from the motif
        assert np.all(np.bincount(made.data.y, minlength=3) > 0.25 * made.data.num_graphs)


def test_size_domains_grow_and_basis_domains_are_their_base(basis, size):
    assert (basis.base == basis.data.domain).all()
    means = [s["nodes_mean"] for s in motif_statistics(size.data)]
    assert means == sorted(means)
    assert len(set(size.base[size.data.domain == 4].tolist())) == 5  # every base type


def test_generation_is_deterministic_per_seed():
    a = good_motif("motif-size", {"graphs_per_domain": 10, "val_per_domain": 2, "seed": 1})
    b = good_motif("motif-size", {"graphs_per_domain": 10, "val_per_domain": 2, "seed": 1})
    c = good_motif("motif-size", {"graphs_per_domain": 10, "val_per_domain": 2, "seed": 2})
    assert np.array_equal(a.edge_index, b.edge_index) and a.num_graphs == 60
    assert not np.array_equal(a.num_nodes, c.num_nodes)
    with pytest.raises(ValueError, match="unknown GOOD-Motif option"):
        good_motif("motif-size", {"graphs": 3})


def test_one_domain_per_client_with_fedvns_800_200_split_and_validation_draws():
    data = good_motif("motif-basis", {"graphs_per_domain": 50, "val_per_domain": 10})
    part, views = build_domain_views(data, 5, seed=0)
    assert part.domains == BASES and part.report(data).to_dict()["method"] == "domain"
    for d, v in enumerate(views):
        assert set(data.domain[part.assignment == d].tolist()) == {d}
        assert (v.num_train, int(v.test_mask.sum()), int(v.val_mask.sum())) == (40, 10, 10)
        assert not bool((v.train_mask & v.test_mask).any() | (v.val_mask & v.test_mask).any())
    _, again = build_domain_views(data, 5, seed=0)
    _, other = build_domain_views(data, 5, seed=1)
    assert all(bool((a.test_mask == b.test_mask).all()) for a, b in zip(views, again, strict=True))
    assert not all(bool((a.y == b.y).all()) for a, b in zip(views, other, strict=True))
    with pytest.raises(ValueError, match="clients must be 5"):
        build_domain_views(data, 4, seed=0)


def test_the_graph_world_deals_a_domain_dataset_by_domain():
    motif = {"graphs_per_domain": 20, "val_per_domain": 5}
    cfg = ExperimentConfig(task="graph", dataset="motif-size", clients=5, graph={"motif": motif})
    data = good_motif("motif-size", cfg.graph.motif)
    _, part, views, _ = draw_graph_world(cfg, 0, data)
    assert [v.num_graphs for v in views] == [25] * 5 and part.val is not None


#: GOOD-Motif's reference statistics per domain, written out (not computed from our code):
#: mean nodes per graph is the exact expectation of GOOD's generator (its code,
#: good_motif.py + synthetic_structsim.py; GOOD's paper gives split sizes, not per-domain
#: node counts); graphs per client is FedVN's (1,000 per domain, 800 train / 200 test).
REFERENCE_NODES = {
    "motif-basis": (15.0, 10.909, 25.0, 16.0, 15.0),  # wheel, tree, ladder, star, path
    "motif-size": (12.09, 16.38, 22.33, 39.36, 87.80),  # widths around 6, 10, 15, 30, 70
}


@pytest.mark.parametrize("name", ["motif-basis", "motif-size"])
def test_the_benchmarks_draw_matches_the_reference_statistics_within_10_percent(name):
    data = good_motif(name)  # the draw the FedVN benchmark trains on (defaults, seed 0)
    per = 1000 + 200  # FedVN's 1,000 graphs per client, plus our 200 validation graphs
    assert np.bincount(data.domain).tolist() == [per] * 5
    assert data.val_per_domain == 200
    nodes = np.asarray(data.num_nodes, dtype=np.float64)
    for d, want in enumerate(REFERENCE_NODES[name]):
        got = nodes[data.domain == d].mean()
        assert abs(got / want - 1) <= 0.10, (name, d, got, want)
