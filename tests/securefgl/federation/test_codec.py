"""Call values cross a process boundary as wire bytes: every allowed type round-trips."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from protocols.base import Envelope
from protocols.wire import Payload, WireFormatError
from securefgl.federation.codec import decode_value, encode_value

arrays = hnp.arrays(
    st.sampled_from([np.float32, np.float64, np.int64, np.uint8, np.bool_]),
    hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
)
payloads = st.builds(
    lambda a, m: Payload({"x": a}, {"round": m}), arrays, st.integers(-5, 5)
)
leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text()
    | st.binary() | arrays | payloads
    | st.builds(lambda p, s: Envelope(s, "server", "t", p), payloads, st.text(max_size=5))
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)


def same(a, b):
    if isinstance(a, np.ndarray):
        nan = a.dtype.kind == "f"
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b, nan)
    if isinstance(a, Payload):
        return same(a.fields, b.fields) and a.meta == b.meta
    if isinstance(a, Envelope):
        head = (a.sender, a.receiver, a.tag) == (b.sender, b.receiver, b.tag)
        return head and same(a.payload, b.payload)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@given(values)
def test_every_wire_value_round_trips_with_its_type(value):
    assert same(value, decode_value(encode_value(value)))


def test_numpy_scalars_keep_their_dtype_and_huge_ints_survive():
    out = decode_value(encode_value([np.float32(1.5), np.int64(-3), 2**80, -math.inf]))
    assert out[0].dtype == np.float32 and out[1].dtype == np.int64
    assert out[2] == 2**80 and out[3] == -math.inf


@pytest.mark.parametrize("bad", [object(), {1: "x"}, np.array(["a"]), {"k": [set()]}])
def test_values_that_are_not_wire_serialisable_are_refused(bad):
    with pytest.raises(TypeError):
        encode_value(bad)


def test_malformed_trees_are_wire_format_errors():
    for tree in (["a", 3], ["zz"], "x", ["e", "a", "b"], ["i", "not a number"]):
        data = Payload({}, {"tree": tree}).to_bytes()
        with pytest.raises(WireFormatError):
            decode_value(data)


def test_envelopes_can_travel_as_references_and_load_only_when_read():
    import hashlib

    from securefgl.federation.codec import DeferredPayload

    payload = Payload({"x": np.arange(6, dtype=np.float32)}, {"round": 3})
    store: list[bytes] = []

    def stash(p: Payload) -> tuple[int, int, str]:
        data = p.to_bytes()
        store.append(data)
        return len(store) - 1, len(data), hashlib.sha256(data).hexdigest()

    wire = encode_value({"inbox": [Envelope("a", "b", "t", payload)], "n": 1, "bare": payload},
                        stash=stash)  # fmt: skip
    assert len(store) == 2 and store[0] not in wire  # the payloads are not in the message
    loads: list[int] = []

    def load(handle: int) -> bytes:
        loads.append(handle)
        return store[handle]

    def unstash(i: int, n: int, d: str) -> Payload:
        return DeferredPayload(i, n, d, load)

    value = decode_value(wire, unstash=unstash)
    env = value["inbox"][0]
    assert (env.sender, env.receiver, env.tag, value["n"]) == ("a", "b", "t", 1)
    assert loads == []  # nothing fetched until a field is read
    assert np.array_equal(env.payload.array("x"), payload.array("x"))
    assert env.payload.meta == {"round": 3} and loads == [0]
    assert np.array_equal(value["bare"].array("x"), payload.array("x")) and loads == [0, 1]
    with pytest.raises(WireFormatError, match="reference"):
        decode_value(wire)  # a reference with nowhere to find it
    store[0] = store[0][:-1] + bytes([store[0][-1] ^ 0xFF])
    tampered = decode_value(wire, unstash=unstash)["inbox"][0]
    with pytest.raises(WireFormatError, match="digest"):
        tampered.payload.array("x")
