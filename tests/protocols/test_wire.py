"""The wire format round-trips every allowed field and rejects malformed bytes clearly."""

import contextlib
import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from protocols.wire import ALLOWED_DTYPES, Payload, WireFormatError, decode, encode

arrays = hnp.arrays(
    dtype=st.sampled_from(sorted(ALLOWED_DTYPES)),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
)
fields = st.dictionaries(st.text(max_size=8), st.one_of(arrays, st.binary(max_size=40)), max_size=4)
meta = st.dictionaries(
    st.text(max_size=6),
    st.one_of(st.integers(), st.text(max_size=6), st.booleans(), st.none()),
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
