"""The wire format round-trips every allowed field and rejects malformed bytes clearly."""

import contextlib
import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from protocols.wire import (
    ALLOWED_DTYPES,
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_NDIM,
    Payload,
    WireFormatError,
    decode,
    encode,
)

arrays = hnp.arrays(
    dtype=st.sampled_from(sorted(ALLOWED_DTYPES)),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
)
fields = st.dictionaries(st.text(max_size=8), st.one_of(arrays, st.binary(max_size=40)), max_size=4)
meta = st.dictionaries(
    st.text(max_size=6),
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=6), st.booleans(), st.none()),
    max_size=3,
)


@given(fields, meta)
@settings(max_examples=150, deadline=None)
def test_round_trip(fields, meta):
    payload = Payload(fields, meta)
    back = decode(encode(payload))
    assert back.meta == meta
    assert list(back.fields) == list(fields)
    for name, value in fields.items():
        got = back.fields[name]
        if isinstance(value, bytes):
            assert got == value
        else:
            assert got.dtype == value.dtype and got.shape == value.shape
            np.testing.assert_array_equal(got, value)


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_garbage_is_rejected_with_wire_error(data):
    with contextlib.suppress(WireFormatError):  # the only acceptable failure mode
        decode(data)


@given(fields, st.data())
@settings(max_examples=150, deadline=None)
def test_truncation_and_trailing_bytes_rejected(fields, data):
    blob = encode(Payload(fields))
    cut = data.draw(st.integers(0, len(blob) - 1))
    with pytest.raises(WireFormatError):
        decode(blob[:cut])
    with pytest.raises(WireFormatError, match="trailing"):
        decode(blob + b"\0")


@given(fields, st.data())
@settings(max_examples=150, deadline=None)
def test_bit_flips_never_escape_as_other_errors(fields, data):
    blob = bytearray(encode(Payload(fields)))
    pos = data.draw(st.integers(0, len(blob) - 1))
    blob[pos] ^= 1 << data.draw(st.integers(0, 7))
    with contextlib.suppress(WireFormatError):
        decode(bytes(blob))


def _forge(header: dict, body: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<4sB3xI", b"SFGL", 1, len(raw)) + raw + body


@pytest.mark.parametrize(
    ("header", "body", "message"),
    [
        (
            {"meta": {}, "fields": [{"name": "x", "dtype": "O", "shape": [1]}]},
            b"\0" * 8,
            "not allowed",
        ),
        ({"meta": {}, "fields": [{"name": "x", "dtype": "<f4", "shape": [-1]}]}, b"", "shape"),
        (
            {"meta": {}, "fields": [{"name": "x", "dtype": "<f4", "shape": [4]}]},
            b"\0" * 8,
            "truncated",
        ),
        (
            {"meta": {}, "fields": [{"name": "x", "dtype": "<f4", "shape": [1]}] * 2},
            b"\0" * 8,
            "duplicate",
        ),
        ({"meta": [], "fields": []}, b"", "meta"),
        ({"fields": []}, b"", "exactly"),
    ],
)
def test_mistyped_headers(header, body, message):
    with pytest.raises(WireFormatError, match=message):
        decode(_forge(header, body))


def test_oversized_message_rejected():
    blob = encode(Payload({"x": np.zeros(100, np.float32)}))
    with pytest.raises(WireFormatError, match="exceeds"):
        decode(blob, max_bytes=100)


def test_unsendable_values_are_refused():
    with pytest.raises(WireFormatError, match="dtype"):
        encode(Payload({"x": np.array(["a"])}))
    with pytest.raises(WireFormatError, match="numpy arrays or bytes"):
        encode(Payload({"x": [1, 2]}))  # type: ignore[dict-item]
    with pytest.raises(WireFormatError, match="finite JSON"):
        encode(Payload({}, {"v": float("nan")}))


def test_no_pickle_on_the_wire():
    blob = encode(Payload({"x": np.arange(3)}, {"k": 1}))
    assert b"\x80\x04" not in blob[:2] and blob.startswith(b"SFGL")
    assert decode(blob).fields["x"].flags.writeable


# ------------------------------------------------------------------ hostile headers / values


def _one_field(dtype: str, shape: list[int]) -> str:
    return json.dumps({"meta": {}, "fields": [{"name": "x", "dtype": dtype, "shape": shape}]})


def _raw_header(text: str, body: bytes = b"") -> bytes:
    raw = text.encode()
    return struct.pack("<4sB3xI", b"SFGL", 1, len(raw)) + raw + body


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"meta": {"x": NaN}, "fields": []}', "NaN"),
        ('{"meta": {"x": [Infinity]}, "fields": []}', "Infinity"),
        ('{"meta": {"x": -Infinity}, "fields": []}', "Infinity"),
        ('{"meta": {"x": 1e400}, "fields": []}', "not finite"),
        ('{"meta": {"round": 9223372036854775808}, "fields": []}', "int64"),
        ('{"meta": {"round": 1' + "0" * 5000 + '}, "fields": []}', "int64"),
        (_one_field("<f8", [0, 2**62]), "exceeds the message limit"),
        (_one_field("<f8", [0, 2**63 - 1]), "exceeds the message limit"),
        (_one_field("bytes", [2**63 - 1]), "exceeds the message limit"),
        (_one_field("|u1", [0] + [1] * 70), "axes"),
        ('{"meta": {}, "fields": [{"name": "x", "dtype": ["<f8"], "shape": [1]}]}', "not allowed"),
    ],
)
def test_hostile_headers_raise_wire_errors(text, message):
    with pytest.raises(WireFormatError, match=message):
        decode(_raw_header(text))


def test_json_constants_and_big_ints_are_refused_on_encode_too():
    for meta in ({"v": float("inf")}, {"v": [2**63]}, {"v": {"w": -(2**64)}}, {1: "x"}):
        with pytest.raises(WireFormatError):
            encode(Payload({}, meta))
    assert decode(encode(Payload({}, {"v": [2**63 - 1, -(2**63)]}))).meta == {
        "v": [2**63 - 1, -(2**63)]
    }


def test_encode_copies_views_and_refuses_objects_and_huge_shapes():
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    for view in (base[:, ::2], base.T, base.astype(">f8"), np.asfortranarray(base)):
        got = decode(encode(Payload({"x": view}))).fields["x"]
        np.testing.assert_array_equal(got, view)
        assert got.flags.c_contiguous and got.dtype.byteorder in "=<|"
    for bad in (np.array([{}, 1], dtype=object), np.zeros(2, dtype=[("a", "<f8")])):
        with pytest.raises(WireFormatError, match="dtype"):
            encode(Payload({"x": bad}))
    huge = np.broadcast_to(np.zeros(1), (DEFAULT_MAX_MESSAGE_BYTES,))  # a view, 32 GiB
    with pytest.raises(WireFormatError, match="message limit"):
        encode(Payload({"x": huge}))
    with pytest.raises(WireFormatError, match="axes"):
        encode(Payload({"x": np.zeros((1,) * (MAX_NDIM + 1))}))


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=4),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
field_specs = st.fixed_dictionaries(
    {
        "name": st.one_of(st.text(max_size=4), json_values),
        "dtype": st.one_of(st.sampled_from([*sorted(ALLOWED_DTYPES), "bytes", "O", "<c16"]),
                           json_values),
        "shape": st.one_of(
            st.lists(st.one_of(st.integers(-2, 6), st.integers(-(2**70), 2**70)), max_size=5),
            json_values,
        ),
    }
)  # fmt: skip


@given(
    st.one_of(json_values, st.dictionaries(st.text(max_size=4), json_values, max_size=3)),
    st.lists(st.one_of(field_specs, json_values), max_size=4),
    st.binary(max_size=64),
    st.sampled_from(["", "NaN", "Infinity", "-Infinity", "1e999"]),
)
@settings(max_examples=300, deadline=None)
def test_fuzzed_headers_fail_only_with_wire_errors(meta, specs, body, constant):
    """Any header (wrong types, huge or negative ints, odd dtypes, JSON constants) decodes or
    raises WireFormatError; never KeyError/TypeError/OverflowError/numpy's ValueError."""
    text = json.dumps({"meta": meta, "fields": specs})
    if constant:
        text = text.replace("{", '{"c": ' + constant + ", ", 1)
    with contextlib.suppress(WireFormatError):
        decode(_raw_header(text, body))
