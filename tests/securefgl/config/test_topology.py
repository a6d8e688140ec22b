"""Edge servers: client blocks and server adjacency (SpreadFGL §III-A)."""

import numpy as np
import pytest

from securefgl.config.topology import EdgeTopology, parse_topology


def test_named_topologies():
    ring = parse_topology("ring", 4)
    assert ring.sum(1).tolist() == [2, 2, 2, 2] and ring[0, 3] == 1 and ring[0, 2] == 0
    assert parse_topology("ring", 3).sum() == 6  # a 3-ring is K3
    assert parse_topology("line", 4)[0, 3] == 0
    assert parse_topology("complete", 4).sum() == 12
    assert parse_topology("star", 4)[0].tolist() == [0, 1, 1, 1]
    assert parse_topology("none", 3).sum() == 0
    assert parse_topology("ring", 1).sum() == 0
    edges = parse_topology("0-1, 2-3", 4)
    assert (edges == edges.T).all() and edges.sum() == 4 and np.trace(edges) == 0


@pytest.mark.parametrize("spec", ["hexagon", "0-4", "1-1", "0:1"])
def test_bad_topologies_are_refused(spec):
    with pytest.raises(ValueError, match="server_topology|topology"):
        parse_topology(spec, 4)


def test_clients_are_split_into_contiguous_blocks():
    topo = EdgeTopology.build(clients=7, servers=3, spec="ring")
    assert topo.sizes() == [3, 2, 2]
    assert topo.clients_of(0) == [0, 1, 2] and topo.clients_of(2) == [5, 6]
    assert topo.neighbours(1) == [0, 2]
    with pytest.raises(ValueError):
        EdgeTopology.build(clients=2, servers=3)


def test_louvain_chunks_are_equal_sized_runs_of_communities():
    from securefgl.data import partition_graph
    from securefgl.data.partition import _louvain, undirected_pairs
    from tests.securefgl.algorithms.spreadfgl.world import tiny_graph

    g = tiny_graph(n=103)
    part = partition_graph(g, 5, "louvain-chunks", seed=0)
    assert sorted(part.sizes.tolist()) == [20, 20, 21, 21, 21]
    labels = _louvain(undirected_pairs(g.edge_index, 103), 103, 0)
    in_order = part.assignment[np.argsort(labels, kind="stable")]
    assert (np.diff(in_order) >= 0).all()  # clients are consecutive runs of communities
    louvain = partition_graph(g, 5, "louvain", seed=0)
    assert louvain.method == "louvain"  # the balanced method is unchanged
