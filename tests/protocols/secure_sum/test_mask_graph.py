"""The masked sums' circulant mask graph under a collusion threshold."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.base import no_transport
from protocols.secure_sum import (
    MaskedSum,
    Support,
    run_secure_sums,
    setup_secure_sums,
)
from protocols.secure_sum.masked import mask_peers
from tests.protocols.secure_sum.helpers import (
    FRAC_BITS,
    SERVER,
    as_dense,
    client_ids,
    simple_jobs,
    tolerance_for,
)


def _components(nodes: list[str], edges: set[frozenset[str]]) -> int:
    parent = {v: v for v in nodes}

    def root(v: str) -> str:
        while parent[v] != v:
            v = parent[v]
        return v

    for e in edges:
        a, b = tuple(e)
        if a in parent and b in parent:
            parent[root(a)] = root(b)
    return len({root(v) for v in nodes})


@settings(max_examples=60, deadline=None)
@given(m=st.integers(2, 24), t=st.integers(1, 8), data=st.data())
def test_mask_graph_survives_any_t_colluding_senders(m, t, data) -> None:
    """The circulant mask graph is symmetric, has 2h = 2*ceil((t+1)/2) peers per sender (or
    is complete), and removing ANY t senders leaves the honest ones connected."""
    senders = data.draw(st.permutations(client_ids(m)))  # the job's public order
    peers = {v: mask_peers(v, senders, t) for v in senders}
    h = (t + 2) // 2
    for v, ps in peers.items():
        assert v not in ps and len(set(ps)) == len(ps)
        assert len(ps) == (m - 1 if 2 * h >= m - 1 else 2 * h)
        assert all(v in peers[u] for u in ps)
    edges = {frozenset((v, u)) for v, ps in peers.items() for u in ps}
    corrupt = data.draw(st.lists(st.sampled_from(senders), max_size=t, unique=True))
    honest = [v for v in senders if v not in corrupt]
    if honest:
        assert _components(honest, edges) == 1
    assert mask_peers(senders[0], senders, None) == list(senders[1:])


def test_mask_graph_threshold_is_not_more_than_advertised() -> None:
    """With more than 2h - 1 corrupt senders the circulant can split: the docstring's
    bound is tight (corrupting both neighbours of a sender on a ring isolates it)."""
    senders = client_ids(8)
    edges = {frozenset((v, u)) for v in senders for u in mask_peers(v, senders, 1)}
    honest = [v for v in senders if v not in ("c01", "c03")]
    assert _components(honest, edges) == 2  # c02 is cut off


@pytest.mark.parametrize("t", [1, 2, 5])
def test_masked_sum_with_a_collusion_threshold_is_exact_and_fewer_masks(t) -> None:
    n = 12
    jobs = simple_jobs(n, shape=(4, 7), seed=t, sparse=True)
    supports = {r: Support.union_of(b.values()) for r, b in jobs.items()}
    protocol = MaskedSum("exp-t", frac_bits=FRAC_BITS, collusion_threshold=t)
    parties = protocol.create_parties(SERVER, client_ids(n))
    setup_secure_sums(protocol, parties, no_transport)
    results = run_secure_sums(protocol, parties, jobs, no_transport, supports=supports)
    for r, blocks in jobs.items():
        expected = sum(as_dense(b) for b in blocks.values())
        np.testing.assert_allclose(
            as_dense(results[r].total), expected, rtol=0, atol=tolerance_for("masked", n - 1)
        )
    # each sender masked each job with 2h peers, not all n - 2 co-senders
    client = parties.clients["c00"]
    assert client.collusion_threshold == t
    h = (t + 2) // 2
    assert len(mask_peers("c00", list(jobs["c01"]), t)) == min(2 * h, n - 2)
    with pytest.raises(ValueError, match="collusion_threshold"):
        MaskedSum("exp", collusion_threshold=0)
