"""Call arguments and results as wire-format bytes (no pickle), for executors whose
parties live in other processes.

A value allowed by :func:`~securefgl.federation.party.check_wire_value` (``None``, bools,
ints, floats, strings, bytes, numpy arrays and scalars, :class:`~protocols.wire.Payload`,
:class:`~protocols.base.Envelope`, and lists, tuples and string-keyed dicts of those) is
encoded as one wire message: its arrays, byte strings and nested payloads are fields, and
its shape is a JSON tree in the header. Every node of the tree is tagged, so lists stay
lists and tuples tuples; floats travel as ``float.hex`` (NaN and infinities included), ints
as decimal strings (any size), an array's shape beside it (0-d arrays too). Decoding checks
every tag and index.

An executor whose parties live in other processes can keep payloads out of the process
that routes them: with a ``stash`` hook, :func:`encode_value` writes each payload (an
envelope's or a bare one) as a reference (the stash's index, size and SHA-256) and leaves
its bytes to the hook; :func:`decode_value` with an ``unstash`` hook turns each reference
back into a payload (a :class:`DeferredPayload` in a router that never needs the bytes,
the decoded payload in the receiving party).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from protocols.base import Envelope
from protocols.wire import DEFAULT_MAX_MESSAGE_BYTES, Payload, WireFormatError

_TREE = "tree"


def checked(data: bytes, nbytes: int, digest: str) -> bytes:
    """``data`` if it has the size and SHA-256 its reference named, else
    :class:`WireFormatError`."""
    if len(data) != nbytes or hashlib.sha256(data).hexdigest() != digest:
        raise WireFormatError("a payload does not match its size and digest")
    return data


class DeferredPayload(Payload):
    """An envelope's payload held elsewhere (e.g. in a Ray object store): its size and
    SHA-256 are known here; the bytes are loaded (``load(handle)``) only when something in
    this process reads a field, the metadata or the bytes."""

    def __init__(self, handle: Any, nbytes: int, digest: str,
                 load: Callable[[Any], bytes]) -> None:  # fmt: skip
        # not Payload.__init__: ``fields`` and ``meta`` are loaded on first use
        self.handle, self.nbytes, self.digest, self._load = handle, nbytes, digest, load
        self._loaded: Payload | None = None

    def loaded(self) -> Payload:
        if self._loaded is None:
            data = checked(self._load(self.handle), self.nbytes, self.digest)
            self._loaded = Payload.from_bytes(data, max(self.nbytes, DEFAULT_MAX_MESSAGE_BYTES))
        return self._loaded

    @property  # type: ignore[override]
    def fields(self) -> dict[str, Any]:
        return self.loaded().fields

    @property  # type: ignore[override]
    def meta(self) -> dict[str, Any]:
        return self.loaded().meta

    def to_bytes(self) -> bytes:
        return self._load(self.handle)


#: ``stash(payload) -> (index, nbytes, sha256 hex)``: where a payload's bytes went
Stash = Callable[[Payload], tuple[int, int, str]]
#: ``unstash(index, nbytes, sha256 hex) -> Payload``
Unstash = Callable[[int, int, str], Payload]


def encode_value(value: Any, stash: Stash | None = None) -> bytes:
    """``value`` as wire bytes; ``TypeError`` if it is not wire-serialisable. With
    ``stash``, payloads are written as references and their bytes left to it."""
    fields: dict[str, np.ndarray | bytes] = {}

    def field(item: np.ndarray | bytes) -> int:
        fields[str(len(fields))] = item
        return len(fields) - 1

    def node(v: Any, where: str) -> list[Any]:
        if v is None:
            return ["n"]
        if isinstance(v, bool | np.bool_):
            return ["b", bool(v)]
        if isinstance(v, int) and not isinstance(v, np.generic):
            return ["i", str(v)]
        if isinstance(v, float) and not isinstance(v, np.generic):
            return ["f", float(v).hex()]
        if isinstance(v, str):
            return ["s", v]
        if isinstance(v, bytes):
            return ["y", field(v)]
        if isinstance(v, np.generic):
            return ["g", field(np.asarray(v))]
        if isinstance(v, np.ndarray):
            if v.dtype.kind not in "biuf":
                raise TypeError(f"{where}: array of dtype {v.dtype} is not wire-serialisable")
            return ["a", field(np.ascontiguousarray(v)), list(v.shape)]  # 0-d kept
        if isinstance(v, Payload):
            return ["q", *stash(v)] if stash is not None else ["p", field(v.to_bytes())]
        if isinstance(v, Envelope):
            if stash is not None:
                return ["r", v.sender, v.receiver, v.tag, *stash(v.payload)]
            return ["e", v.sender, v.receiver, v.tag, field(v.payload.to_bytes())]
        if isinstance(v, list | tuple):
            items = [node(x, f"{where}[{i}]") for i, x in enumerate(v)]
            return ["l" if isinstance(v, list) else "t", items]
        if isinstance(v, dict):
            for key in v:
                if not isinstance(key, str):
                    raise TypeError(f"{where}: dict key {key!r} is not a string")
            return ["d", [[k, node(x, f"{where}[{k!r}]")] for k, x in v.items()]]
        raise TypeError(f"{where}: {type(v).__name__} is not wire-serialisable")

    tree = node(value, "value")
    return Payload(fields, {_TREE: tree}).to_bytes()


def decode_value(data: bytes, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 unstash: Unstash | None = None) -> Any:  # fmt: skip
    """The value :func:`encode_value` encoded; :class:`WireFormatError` on malformed input
    (and on an envelope reference when there is no ``unstash``)."""
    payload = Payload.from_bytes(data, max_bytes)
    fields = payload.fields

    def field(index: Any, kind: type) -> Any:
        item = fields.get(str(index)) if isinstance(index, int) else None
        if not isinstance(item, kind):
            raise WireFormatError(f"value tree names a missing or mistyped field {index!r}")
        return item

    def referenced(ref: list[Any]) -> Payload:
        if unstash is None:
            raise WireFormatError("a payload reference, and nowhere to find it")
        index, nbytes, digest = ref
        if int(nbytes) > max_bytes:
            raise WireFormatError(f"a message of {int(nbytes)} bytes is over the {max_bytes}-byte "
                                  "limit")  # fmt: skip
        return unstash(int(index), int(nbytes), str(digest))

    def value(n: Any) -> Any:
        if not isinstance(n, list) or not n or not isinstance(n[0], str):
            raise WireFormatError(f"malformed value node {n!r}")
        tag, args = n[0], n[1:]
        try:
            match tag:
                case "n":
                    return None
                case "b":
                    return bool(args[0])
                case "i":
                    return int(args[0])
                case "f":
                    return float.fromhex(args[0])
                case "s":
                    return str(args[0])
                case "y":
                    return field(args[0], bytes)
                case "g":
                    return field(args[0], np.ndarray).reshape(())[()]
                case "a":
                    return field(args[0], np.ndarray).reshape([int(d) for d in args[1]])
                case "p":
                    return Payload.from_bytes(field(args[0], bytes), max_bytes)
                case "e":
                    sender, receiver, tag_, index = args
                    inner = Payload.from_bytes(field(index, bytes), max_bytes)
                    return Envelope(str(sender), str(receiver), str(tag_), inner)
                case "r":
                    sender, receiver, tag_, *ref = args
                    return Envelope(str(sender), str(receiver), str(tag_), referenced(ref))
                case "q":
                    return referenced(args)
                case "l":
                    return [value(x) for x in args[0]]
                case "t":
                    return tuple(value(x) for x in args[0])
                case "d":
                    return {str(k): value(x) for k, x in args[0]}
        except (IndexError, TypeError, ValueError) as exc:
            if isinstance(exc, WireFormatError):
                raise
            raise WireFormatError(f"malformed value node {n!r}: {exc}") from None
        raise WireFormatError(f"unknown value tag {tag!r}")

    if _TREE not in payload.meta:
        raise WireFormatError("message carries no value tree")
    return value(payload.meta[_TREE])
