"""Fuzzing every protocol's message handlers with mutated envelopes.

One envelope of an honest run (set-up included) is mutated in transit: a field dropped,
added or replaced (wrong dtype, shape, length; an all-zero or low-order X25519 key), a
metadata value replaced (huge or negative ints, wrong types, unknown or duplicate ids),
the tag, sender or receiver changed, the envelope dropped or duplicated. Whatever happens,
a run either completes or fails with :class:`~protocols.base.ProtocolError` or
:class:`~protocols.wire.WireFormatError` (or a subclass): never ``KeyError``,
``IndexError``, ``TypeError``, ``OverflowError``, ``struct.error``, an ``AssertionError`` or
a ``cryptography`` exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocols.base import Envelope, ProtocolError, aggregate, no_transport, setup_parties
from protocols.ckks import CKKSAggregation
from protocols.ckks_relay import RelayCKKSAggregation
from protocols.plain import PlainAggregation
from protocols.registry import make_transport
from protocols.secagg import SecAggPlus, SecAggregation
from protocols.secure_sum import (
    CKKSSum,
    MaskedSum,
    PlainSum,
    Support,
    run_secure_sums,
    setup_secure_sums,
)
from protocols.wire import ALLOWED_DTYPES, Payload, WireFormatError

ALLOWED = (ProtocolError, WireFormatError)
MAL = "malicious"
SERVER = "server"
IDS = ["c0", "c1", "c2", "c3"]
P = 2**255 - 19
LOW_ORDER_KEY = (P - 1).to_bytes(32, "little")

big_ints = st.sampled_from([0, 1, -1, 2, 3, 2**31, 2**32 + 1, 2**62, 2**63 - 1, -(2**63)])
ids = st.sampled_from([*IDS, SERVER, "key-authority", "stranger", ""])
json_leaf = st.one_of(
    st.none(), st.booleans(), big_ints, st.integers(-5, 5), st.floats(-1e300, 1e300),
    ids, st.text(max_size=3),
)  # fmt: skip
json_values = st.one_of(
    json_leaf,
    st.lists(ids, max_size=6),
    st.lists(st.one_of(big_ints, st.integers(0, 8)), max_size=3),
    st.lists(json_leaf, max_size=3),
    st.dictionaries(st.text(max_size=3), json_leaf, max_size=2),
)


def _array(data: st.DataObject) -> np.ndarray:
    dtype = np.dtype(data.draw(st.sampled_from(sorted(ALLOWED_DTYPES))))
    shape = tuple(data.draw(st.lists(st.integers(0, 5), max_size=3)))
    size = int(np.prod(shape)) * dtype.itemsize
    fill = data.draw(st.sampled_from(["zeros", "ones", "random"]))
    if fill == "random":
        raw = np.random.default_rng(data.draw(st.integers(0, 99))).bytes(size)
    else:
        raw = (b"\x01" if fill == "ones" else b"\x00") * size
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _mutated_value(value: Any, data: st.DataObject) -> Any:
    """A replacement for a field value, often close to the original."""
    kind = data.draw(st.sampled_from(["bytes", "array", "near"]))
    if kind == "bytes":
        return data.draw(st.one_of(st.binary(max_size=80), st.just(LOW_ORDER_KEY)))
    if kind == "array" or value is None:
        return _array(data)
    if isinstance(value, bytes):
        how = data.draw(st.sampled_from(["cut", "flip", "grow", "zero", "low-order"]))
        # positions drawn from a fixed range: blob lengths vary between runs (fresh keys)
        at = data.draw(st.integers(0, 2**20))
        if how == "cut":
            return value[: at % max(len(value), 1)]
        if how == "flip" and value:
            i = at % len(value)
            return value[:i] + bytes([value[i] ^ 0x80]) + value[i + 1 :]
        if how == "grow":
            return value + b"\x00" * data.draw(st.integers(1, 40))
        return bytes(len(value)) if how == "zero" else LOW_ORDER_KEY
    arr = np.asarray(value)
    how = data.draw(st.sampled_from(["dtype", "flat", "cut", "zeros", "low-order", "2d"]))
    if how == "dtype":
        return arr.astype(data.draw(st.sampled_from(sorted(ALLOWED_DTYPES))))
    if how == "flat":
        return arr.reshape(-1)
    if how == "cut":
        return arr.reshape(-1)[: data.draw(st.integers(0, max(arr.size - 1, 0)))]
    if how == "2d":
        return arr.reshape(1, -1)
    if how == "low-order" and arr.dtype == np.uint8 and arr.ndim == 2 and arr.shape[1] == 32:
        out = arr.copy()
        out[data.draw(st.integers(0, 2**8)) % max(len(out), 1)] = np.frombuffer(
            LOW_ORDER_KEY, np.uint8
        )
        return out
    return np.zeros_like(arr)


def mutate(env: Envelope, data: st.DataObject, tags: list[str]) -> list[Envelope]:
    """One random mutation of ``env`` (possibly none, one or two envelopes out)."""
    fields, meta = dict(env.payload.fields), dict(env.payload.meta)
    sender, receiver, tag = env.sender, env.receiver, env.tag
    kind = data.draw(
        st.sampled_from(
            ["drop", "duplicate", "tag", "sender", "receiver", "del_field", "set_field",
             "new_field", "del_meta", "set_meta", "new_meta"]
        )
    )  # fmt: skip
    if kind == "drop":
        return []
    if kind == "duplicate":
        return [env, env]
    if kind == "tag":
        tag = data.draw(st.one_of(st.sampled_from(tags), st.text(max_size=4)))
    elif kind == "sender":
        sender = data.draw(ids)
    elif kind == "receiver":
        receiver = data.draw(ids)
    elif kind in ("del_field", "set_field") and fields:
        name = data.draw(st.sampled_from(sorted(fields)))
        if kind == "del_field":
            del fields[name]
        else:
            fields[name] = _mutated_value(fields[name], data)
    elif kind == "new_field":
        name = data.draw(
            st.one_of(
                st.sampled_from(["y", "keys", "c_pk", "b_commit", "ct", "ct_len", "values",
                                 "row", "support_rows", "support_flat", "support_bitmap",
                                 "to:c1", "from:c0", "b:c0", "s:c1", "ct00000", "context",
                                 "sig", "sigs", "digests", "sig:c1"]),
                st.text(max_size=4),
            )
        )  # fmt: skip
        fields[name] = _mutated_value(None, data)
    elif kind == "del_meta" and meta:
        del meta[data.draw(st.sampled_from(sorted(meta)))]
    elif kind in ("set_meta", "new_meta"):
        keys = sorted(meta) if kind == "set_meta" and meta else []
        key = data.draw(
            st.one_of(
                st.sampled_from(keys or ["round"]),
                st.sampled_from(["round", "receiver", "senders", "shape", "sparse_result", "ids",
                                 "participants", "survivors", "dropped", "sender", "u2", "u3",
                                 "signers"]),
            )
        )  # fmt: skip
        meta[key] = data.draw(json_values)
    return [Envelope(sender, receiver, tag, Payload(fields, meta))]


class FuzzChannel:
    """A transmit that serializes like the Channel and mutates the ``target``-th envelope."""

    def __init__(self, data: st.DataObject | None, target: int, tags: list[str]) -> None:
        self.data, self.target, self.tags, self.seen = data, target, tags, 0
        self.all_tags: set[str] = set()

    def __call__(self, envelopes: list[Envelope]) -> list[Envelope]:
        out = []
        for env in no_transport(envelopes):
            self.all_tags.add(env.tag)
            if self.data is not None and self.seen == self.target:
                out.extend(no_transport(mutate(env, self.data, self.tags)))
            else:
                out.append(env)
            self.seen += 1
        return out


def _inputs(n: int, d: int) -> dict[str, tuple[np.ndarray, float]]:
    rng = np.random.default_rng(0)
    return {c: (rng.uniform(-1, 1, d), 1.0 + i) for i, c in enumerate(IDS[:n])}


def _aggregation(make: Callable[[], Any], n: int, d: int = 3) -> Callable[[Any], None]:
    def run(transmit: Any) -> None:
        protocol = make()
        parties = protocol.create_parties(SERVER, IDS[:n], d)
        setup_parties(protocol, parties, transmit)
        aggregate(protocol, parties, 0, _inputs(n, d), transmit)

    return run


def _sums(make: Callable[[], Any]) -> Callable[[Any], None]:
    """Three receivers: a dense job, a sparse job on a product support, a pattern support."""

    def run(transmit: Any) -> None:
        protocol = make()
        parties = protocol.create_parties(SERVER, IDS)
        setup_secure_sums(protocol, parties, transmit)
        rng = np.random.default_rng(1)
        dense = {k: rng.uniform(0, 1, (2, 3)) for k in ("c1", "c2")}
        rows = {k: sp.coo_array(np.array([[0, 0, 0], [0, 1.0, 0.5]])) for k in ("c0", "c2")}
        flat = {k: sp.csr_array(np.array([[0.25, 0, 0], [0, 0, 1.0]])) for k in ("c1", "c3")}
        jobs = {"c0": dense, "c1": rows, "c2": flat}
        supports = {
            "c1": Support.product((2, 3), rows=[1]),
            "c2": Support.pattern((2, 3), [0, 5]),
        }
        run_secure_sums(protocol, parties, jobs, transmit, supports=supports)

    return run


SCENARIOS: dict[str, Callable[[Any], None]] = {
    "plain": _aggregation(PlainAggregation, 3),
    "secagg": _aggregation(lambda: SecAggregation("fuzz"), 4),
    "secagg+": _aggregation(lambda: SecAggPlus("fuzz", k=2), 4),
    "ckks": _aggregation(lambda: CKKSAggregation(experiment_id="fuzz"), 3),
    "ckks-relay": _aggregation(lambda: RelayCKKSAggregation(experiment_id="fuzz"), 3),
    "sum-masked": _sums(lambda: MaskedSum("fuzz")),
    "sum-masked-t": _sums(
        lambda: MaskedSum(
            "fuzz", word_bits=32, frac_bits=None, value_bound=1.0, collusion_threshold=1
        )
    ),
    "sum-ckks": _sums(lambda: CKKSSum()),
    "sum-plain": _sums(lambda: PlainSum()),
    # malicious-server mode: signed keys, consistency round, checked aggregates
    "secagg-malicious": _aggregation(lambda: SecAggregation("fuzz", threat_model=MAL), 4),
    "secagg+-malicious": _aggregation(lambda: SecAggPlus("fuzz", k=2, threat_model=MAL), 4),
    "ckks-malicious": _aggregation(lambda: make_transport("ckks", "fuzz", threat_model=MAL), 3),
    "sum-masked-malicious": _sums(lambda: MaskedSum("fuzz", threat_model=MAL)),
    "sum-ckks-malicious": _sums(lambda: CKKSSum(threat_model=MAL, experiment_id="fuzz")),
}
_CLEAN: dict[str, tuple[int, list[str]]] = {}


def _clean(name: str) -> tuple[int, list[str]]:
    """Envelopes and tags of an honest run (which must succeed)."""
    if name not in _CLEAN:
        channel = FuzzChannel(None, -1, [])
        SCENARIOS[name](channel)
        _CLEAN[name] = (channel.seen, sorted(channel.all_tags))
    return _CLEAN[name]


EXAMPLES = {"ckks": 40, "sum-ckks": 40, "ckks-malicious": 40, "sum-ckks-malicious": 40}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_mutated_envelopes_fail_only_with_protocol_errors(name: str) -> None:
    total, tags = _clean(name)

    @settings(
        max_examples=EXAMPLES.get(name, 120),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(target=st.integers(0, total - 1), data=st.data())
    def check(target: int, data: st.DataObject) -> None:
        with contextlib.suppress(*ALLOWED):  # anything else fails the test
            SCENARIOS[name](FuzzChannel(data, target, tags))

    check()
