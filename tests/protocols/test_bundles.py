"""A sender's per-receiver parts in one message: round trip through the wire, and refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.base import ProtocolError
from protocols.bundles import bundle, unbundle
from protocols.wire import Payload

names = st.text(st.characters(codec="ascii", exclude_characters="\0"), min_size=1, max_size=8)


@settings(max_examples=50, deadline=None)
@given(
    receivers=st.lists(names, min_size=0, max_size=5, unique=True),
    fields=st.lists(names, min_size=0, max_size=3, unique=True),
    seed=st.integers(0, 2**16),
)
def test_parts_survive_the_wire(receivers: list[str], fields: list[str], seed: int) -> None:
    rng = np.random.default_rng(seed)
    parts = {
        r: Payload({f: rng.integers(0, 9, rng.integers(0, 4)) for f in fields}, {"i": i})
        for i, r in enumerate(receivers)
    }
    got = unbundle(Payload.from_bytes(bundle(parts, round=3).to_bytes()), "test")
    assert list(got) == receivers
    for r, part in parts.items():
        assert got[r].meta == part.meta and set(got[r].fields) == set(part.fields)
        for f, value in part.fields.items():
            np.testing.assert_array_equal(got[r].fields[f], value)


def _one_part() -> Payload:
    return bundle({"c01": Payload({"y": np.zeros(2, np.uint64)}, {})}, round=0)


@pytest.mark.parametrize(
    "garble",
    [
        lambda p: Payload(p.fields, {"round": 0}),  # no list of parts
        lambda p: Payload(p.fields, {"parts": [{"to": "c01"}]}),  # a part without meta
        lambda p: Payload(p.fields, {"parts": [p.meta["parts"][0]] * 2}),  # a receiver twice
        lambda p: Payload({"1/y": p.fields["0/y"]}, p.meta),  # a field of no part
        lambda p: Payload({"00/y": p.fields["0/y"]}, p.meta),  # not the part's own index
        lambda p: Payload({"y": p.fields["0/y"]}, p.meta),  # no index at all
        lambda p: Payload({"0/": p.fields["0/y"]}, p.meta),  # no field name
    ],
)
def test_malformed_bundles_are_refused(garble) -> None:
    with pytest.raises(ProtocolError, match="reader"):
        unbundle(garble(_one_part()), "reader")


def test_bundle_keeps_its_own_meta_key() -> None:
    with pytest.raises(ValueError, match="parts"):
        bundle({}, parts=[])

