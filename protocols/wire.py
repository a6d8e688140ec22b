"""Wire format for everything that crosses the channel (no pickle).

A message is::

    magic  b"SFGL" | version u8 | 3 zero bytes | header_len u32 LE | header | body

The header is UTF-8 JSON ``{"meta": {...}, "fields": [{"name", "dtype", "shape"}, ...]}``;
the body is the fields' raw little-endian bytes, concatenated in header order with no
padding. ``dtype`` is a numpy dtype string from a fixed allow-list, or ``"bytes"`` for an
opaque blob (e.g. a TenSEAL serialization). The decoder checks every length, dtype and
shape before touching the body and raises :class:`WireFormatError` on truncated,
oversized, trailing or mistyped input, on NaN / Infinity or integers outside int64 in the
header, and on shapes with more than :data:`MAX_NDIM` axes or whose extent (zeros counted
as ones) exceeds the message limit. The encoder refuses the same, and object arrays.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAGIC = b"SFGL"
VERSION = 1
_PREFIX = struct.Struct("<4sB3xI")
MAX_HEADER_BYTES = 1 << 20
DEFAULT_MAX_MESSAGE_BYTES = 1 << 32
MAX_NDIM = 32
INT_RANGE = (-(1 << 63), (1 << 63) - 1)  # JSON integers in a header must fit int64
BYTES_DTYPE = "bytes"
ALLOWED_DTYPES = frozenset(
    {"<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"}
)

_DTYPES = {s: np.dtype(s) for s in ALLOWED_DTYPES}  # parsed once, not per field

FieldValue = np.ndarray | bytes


class WireFormatError(ValueError):
    """Raised when bytes on the channel are not a well-formed message."""


class MissingFieldError(WireFormatError, KeyError):
    """A message lacks a field its reader requires (also a ``KeyError``)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


@dataclass
class Payload:
    """What one message carries: named arrays / byte blobs plus JSON metadata."""

    fields: dict[str, FieldValue] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> FieldValue:
        return self.fields[name]

    def __contains__(self, name: object) -> bool:
        return name in self.fields

    def _get(self, name: str) -> FieldValue:
        try:
            return self.fields[name]
        except KeyError:
            raise MissingFieldError(f"message has no field {name!r}") from None

    def array(self, name: str) -> np.ndarray:
        """The field ``name``, which must be an array."""
        value = self._get(name)
        if not isinstance(value, np.ndarray):
            raise WireFormatError(f"field {name!r} is a byte blob, not an array")
        return value

    def blob(self, name: str) -> bytes:
        """The field ``name``, which must be a byte blob."""
        value = self._get(name)
        if not isinstance(value, bytes):
            raise WireFormatError(f"field {name!r} is an array, not a byte blob")
        return value

    def to_bytes(self) -> bytes:
        return encode(self)

    @classmethod
    def from_bytes(
        cls, data: bytes | bytearray | memoryview, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    ) -> Payload:
        return decode(data, max_bytes=max_bytes)


def _wire_dtype(array: np.ndarray) -> np.dtype:
    dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    if dtype.str not in ALLOWED_DTYPES:
        raise WireFormatError(
            f"dtype {array.dtype} cannot be sent; allowed: {sorted(ALLOWED_DTYPES)}"
        )
    return dtype


def _check_extent(name: str, shape: tuple[int, ...], itemsize: int) -> int:
    """Bytes of a field of ``shape``; refuses too many axes and shapes whose extent (zero
    axes counted as one) could not fit in a message (numpy would refuse some of them)."""
    if len(shape) > MAX_NDIM:
        raise WireFormatError(f"field {name!r}: {len(shape)} axes, at most {MAX_NDIM}")
    extent = itemsize
    for s in shape:
        extent *= max(s, 1)
        if extent > DEFAULT_MAX_MESSAGE_BYTES:
            raise WireFormatError(
                f"field {name!r}: shape {list(shape)[:4]}... exceeds the message limit of "
                f"{DEFAULT_MAX_MESSAGE_BYTES} bytes"
            )
    return math.prod(shape) * itemsize


def _check_meta(value: Any, depth: int = 0) -> None:
    """Meta must be finite JSON with string keys and int64 integers (what decode accepts)."""
    if depth > 64:
        raise WireFormatError("meta is nested too deeply")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if not INT_RANGE[0] <= value <= INT_RANGE[1]:
            raise WireFormatError(f"meta integer {value} is outside int64")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise WireFormatError(f"meta must be finite JSON, got {value}")
    elif isinstance(value, list | tuple):
        for item in value:
            _check_meta(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise WireFormatError(f"meta keys must be str, got {key!r}")
            _check_meta(item, depth + 1)
    else:
        raise WireFormatError(f"meta must be finite JSON, got a {type(value).__name__}")


def _chunks(payload: Payload) -> Iterator[tuple[dict[str, Any], bytes | memoryview]]:
    for name, value in payload.fields.items():
        if not isinstance(name, str):
            raise WireFormatError(f"field names must be str, got {type(name).__name__}")
        if isinstance(value, bytes | bytearray | memoryview):
            raw = bytes(value)
            yield {"name": name, "dtype": BYTES_DTYPE, "shape": [len(raw)]}, raw
        elif isinstance(value, np.ndarray):
            dtype = _wire_dtype(value)
            _check_extent(name, value.shape, dtype.itemsize)  # before any copy
            arr = (
                value
                if value.dtype == dtype and value.flags.c_contiguous
                else np.require(value, dtype=dtype, requirements="C")
            )
            yield (
                {"name": name, "dtype": dtype.str, "shape": list(arr.shape)},
                memoryview(arr.reshape(-1).view(np.uint8)),
            )
        else:
            raise WireFormatError(
                f"field {name!r} has type {type(value).__name__}; send numpy arrays or bytes"
            )


def encode(payload: Payload) -> bytes:
    """Serialize ``payload`` (see module docstring for the layout)."""
    if not isinstance(payload.meta, dict):
        raise WireFormatError(f"meta must be a dict, got {type(payload.meta).__name__}")
    _check_meta(payload.meta)
    specs, bodies, total = [], [], 0
    for spec, raw in _chunks(payload):
        specs.append(spec)
        bodies.append(raw)
        total += len(raw) if isinstance(raw, bytes) else raw.nbytes
        if total > DEFAULT_MAX_MESSAGE_BYTES:
            raise WireFormatError(f"message body exceeds {DEFAULT_MAX_MESSAGE_BYTES} bytes")
    try:
        header = json.dumps(
            {"meta": payload.meta, "fields": specs}, allow_nan=False, separators=(",", ":")
        ).encode()
    except (TypeError, ValueError) as err:
        raise WireFormatError(f"meta must be finite JSON: {err}") from err
    if len(header) > MAX_HEADER_BYTES:
        raise WireFormatError(f"header of {len(header)} bytes exceeds {MAX_HEADER_BYTES}")
    return b"".join([_PREFIX.pack(MAGIC, VERSION, len(header)), header, *bodies])


def _field_nbytes(spec: Any) -> tuple[str, str, tuple[int, ...], int]:
    if not isinstance(spec, dict) or set(spec) != {"name", "dtype", "shape"}:
        raise WireFormatError(f"malformed field spec {spec!r}")
    name, dtype, shape = spec["name"], spec["dtype"], spec["shape"]
    if not isinstance(name, str):
        raise WireFormatError("field name must be a string")
    if not isinstance(shape, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape
    ):
        raise WireFormatError(f"field {name!r}: shape must be a list of non-negative ints")
    if dtype == BYTES_DTYPE:
        if len(shape) != 1:
            raise WireFormatError(f"field {name!r}: a byte blob has a 1-d shape")
        return name, dtype, tuple(shape), _check_extent(name, tuple(shape), 1)
    if not isinstance(dtype, str) or dtype not in ALLOWED_DTYPES:
        raise WireFormatError(f"field {name!r}: dtype {dtype!r} not allowed")
    return name, dtype, tuple(shape), _check_extent(name, tuple(shape), _DTYPES[dtype].itemsize)


def _no_constant(name: str) -> Any:
    raise WireFormatError(f"header holds {name}: only finite numbers are allowed")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise WireFormatError(f"header number {text[:24]} is not finite")
    return value


def _int64(text: str) -> int:
    if len(text.lstrip("-")) > 19:
        raise WireFormatError(f"header integer {text[:24]}... is outside int64")
    value = int(text)
    if not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise WireFormatError(f"header integer {value} is outside int64")
    return value


def decode(
    data: bytes | bytearray | memoryview, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> Payload:
    """Parse a message produced by :func:`encode`, validating it completely."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise WireFormatError(f"expected bytes, got {type(data).__name__}")
    view = memoryview(data).cast("B")
    if len(view) > max_bytes:
        raise WireFormatError(f"message of {len(view)} bytes exceeds the limit of {max_bytes}")
    if len(view) < _PREFIX.size:
        raise WireFormatError(f"truncated message: {len(view)} bytes < {_PREFIX.size}-byte prefix")
    magic, version, header_len = _PREFIX.unpack_from(view)
    if magic != MAGIC:
        raise WireFormatError("bad magic: not a securefgl message")
    if version != VERSION:
        raise WireFormatError(f"unsupported wire version {version}")
    if bytes(view[5:8]) != b"\0\0\0":
        raise WireFormatError("reserved prefix bytes must be zero")
    if header_len > MAX_HEADER_BYTES or _PREFIX.size + header_len > len(view):
        raise WireFormatError(f"header length {header_len} exceeds the message")
    try:
        header = json.loads(
            bytes(view[_PREFIX.size : _PREFIX.size + header_len]).decode(),
            parse_constant=_no_constant,
            parse_float=_finite,
            parse_int=_int64,
        )
    except WireFormatError:
        raise
    except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError
        raise WireFormatError(f"header is not valid JSON: {err}") from err
    if not isinstance(header, dict) or set(header) != {"meta", "fields"}:
        raise WireFormatError("header must hold exactly 'meta' and 'fields'")
    if not isinstance(header["meta"], dict) or not isinstance(header["fields"], list):
        raise WireFormatError("header 'meta' must be an object and 'fields' a list")
    offset = _PREFIX.size + header_len
    fields: dict[str, FieldValue] = {}
    for spec in header["fields"]:
        name, dtype, shape, nbytes = _field_nbytes(spec)
        if name in fields:
            raise WireFormatError(f"duplicate field {name!r}")
        if offset + nbytes > len(view):
            raise WireFormatError(f"truncated message: field {name!r} needs {nbytes} bytes")
        raw = view[offset : offset + nbytes]
        offset += nbytes
        if dtype == BYTES_DTYPE:
            fields[name] = bytes(raw)
        else:
            fields[name] = np.frombuffer(raw, dtype=_DTYPES[dtype]).reshape(shape).copy()
    if offset != len(view):
        raise WireFormatError(f"{len(view) - offset} trailing bytes after the last field")
    return Payload(fields=fields, meta=header["meta"])


def as_payload(fields: Mapping[str, FieldValue] | None = None, **meta: Any) -> Payload:
    """Shorthand: ``as_payload({"update": vec}, weight=3)``."""
    return Payload(fields=dict(fields or {}), meta=meta)
