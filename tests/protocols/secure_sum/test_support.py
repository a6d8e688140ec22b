"""Public supports and job specs: wire forms, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.base import ProtocolError
from protocols.secure_sum import (
    SumRequest,
    Support,
    run_secure_sums,
)
from protocols.wire import Payload
from tests.protocols.secure_sum.helpers import (
    make_parties,
    no_transport_payload,
)


@settings(max_examples=80, deadline=None)
@given(
    shape=st.one_of(
        st.tuples(st.integers(0, 50), st.sampled_from([1, 7, 300, 70_000])),
        st.tuples(st.integers(1, 5), st.integers(1, 9), st.sampled_from([3, 300])),
        st.tuples(st.sampled_from([1, 40, 5_000])),
    ),
    data=st.data(),
)
def test_support_patterns_round_trip_in_their_smallest_encoding(shape, data) -> None:
    """Any pattern survives the wire in whichever encoding is smaller (flat or bitmap), and
    the message is never larger than the flat int64 indices."""
    total = math.prod(shape)
    flat = data.draw(st.lists(st.integers(0, max(total - 1, 0)), max_size=300, unique=True))
    support = Support.pattern(shape, flat if total else [])
    fields = support.to_fields()
    assert sum(v.nbytes for v in fields.values()) <= 8 * len(support.index)
    back = Support.from_fields(shape, no_transport_payload(Payload(fields, {})))
    assert back == support


def test_pattern_indices_travel_in_the_narrowest_unsigned_dtype() -> None:
    for shape, dtype in (
        ((10, 20), np.uint8),
        ((2_708, 2_708), np.uint32),
        ((10**5, 10**5), np.int64),
    ):
        support = Support.pattern(shape, np.arange(0, math.prod(shape), math.prod(shape) // 5))
        fields = support.to_fields()
        assert fields["support_flat"].dtype == dtype
        back = Support.from_fields(shape, no_transport_payload(Payload(fields, {})))
        assert back == support and back.index.dtype == np.int64


def test_malformed_pattern_supports_are_refused() -> None:
    flat = np.arange(70_000, 70_460, 20, dtype=np.int64)
    bads = (flat[::-1].copy(), np.append(flat, 700_000), flat - 70_001, flat.astype(np.int32))
    for bad in (*bads, flat.astype(np.uint64), np.append(flat, 700_000).astype(np.uint32)):
        with pytest.raises(ProtocolError, match="malformed support"):
            Support.from_fields((10, 70_000), Payload({"support_flat": bad}, {}))


def test_support_constructors_and_validation() -> None:
    s = Support.product((3, 4), rows=[2, 0])
    np.testing.assert_array_equal(s.index, [0, 1, 2, 3, 8, 9, 10, 11])
    assert s == Support.pattern((3, 4), [11, 10, 9, 8, 3, 2, 1, 0, 0])
    assert s.size == 8 and set(s.to_fields()) == {"support_rows", "support_cols"}
    u = Support.union_of([sp.csr_array(np.eye(3)), np.diag([0, 0, 1.0], k=0)[::-1]])
    np.testing.assert_array_equal(u.index, [0, 2, 4, 8])
    for support in (s, u, Support.pattern((30, 40), [5, 77, 1199])):  # product/bitmap/flat
        req = SumRequest(("c01", "c02"), support.shape, support, sparse_result=True)
        back = SumRequest.from_payload(no_transport_payload(req.to_payload(4, "c00")), "test")
        assert back == req and back.support == support
    assert (
        "support_bitmap" in u.to_fields()
        and "support_flat" in Support.pattern((30, 40), [5]).to_fields()
    )
    with pytest.raises(ValueError, match="out of range"):
        Support.pattern((3, 4), [12])
    with pytest.raises(ValueError, match="2-D"):
        Support.product((3, 4, 5))
    with pytest.raises(ValueError, match="support shape"):
        SumRequest(("c01",), (4, 3), s)
    with pytest.raises(ValueError, match="distinct"):
        SumRequest(("c01", "c01"), (3, 4))


def test_bad_jobs_rejected_locally() -> None:
    protocol, parties = make_parties("plain", 3)
    with pytest.raises(ValueError, match="differ in shape"):
        run_secure_sums(protocol, parties, {"c00": {"c01": np.ones((2, 2)), "c02": np.ones(3)}})
    with pytest.raises(ValueError, match="NaN"):
        nan = {"c01": np.full((2, 2), np.nan), "c02": np.ones((2, 2))}
        run_secure_sums(protocol, parties, {"c00": nan}, round_idx=1)
    with pytest.raises(ValueError, match="unknown"):
        run_secure_sums(protocol, parties, {"c00": {"zz": np.ones(2)}}, round_idx=2)


# ------------------------------------------------------------------------------ mask graph
