"""SecAgg / SecAgg+ in the smallest ring: 32-bit words on the wire, exact sums at the worst
case, refusals, and the ring bound into every key and statement."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.base import Envelope, aggregate, no_transport
from protocols.fixedpoint import FixedPointOverflowError
from protocols.identity import MALICIOUS
from protocols.secagg import TAG_MASKED, SecAggPlus, SecAggregation
from protocols.secagg.consistency import key_statement
from protocols.wire import Payload

SERVER = "server"


def _ids(n: int) -> list[str]:
    return [f"c{i:02d}" for i in range(n)]


class Wire:
    """Serializes every envelope like the channel and keeps the encoded bytes."""

    def __init__(self) -> None:
        self.sent: list[tuple[Envelope, int]] = []

    def __call__(self, envelopes: list[Envelope]) -> list[Envelope]:
        out = []
        for env in envelopes:
            raw = env.payload.to_bytes()
            self.sent.append((env, len(raw)))
            out.append(Envelope(env.sender, env.receiver, env.tag, Payload.from_bytes(raw)))
        return out

    def masked(self) -> list[tuple[Envelope, int]]:
        return [(e, size) for e, size in self.sent if e.tag == TAG_MASKED]


@pytest.mark.parametrize("protocol_cls", [SecAggregation, SecAggPlus])
@pytest.mark.parametrize("threat_model", ["honest-but-curious", MALICIOUS])
def test_32_bit_ring_on_the_wire(protocol_cls, threat_model) -> None:
    """A declared bound picks Z_2^32: the masked input is d + 1 uint32 words (about 4 bytes
    a value), and the mean is the exact mean of the rounded inputs."""
    n, d = 6, 500
    protocol = protocol_cls("exp-ring", value_bound=8.0, threat_model=threat_model)
    config = protocol.config_for(n)
    assert config.codec.word_bits == 32 and config.ring == f"Z_2^32/f{config.codec.frac_bits}"
    parties = protocol.create_parties(SERVER, _ids(n), d)
    rng = np.random.default_rng(1)
    inputs = {c: (rng.uniform(-2, 2, d), float(rng.integers(1, 4))) for c in _ids(n)}
    wire = Wire()
    result = aggregate(protocol, parties, 0, inputs, transmit=wire)
    masked = wire.masked()
    assert len(masked) == n
    for env, size in masked:
        y = env.payload.array("y")
        assert y.dtype == np.uint32 and y.shape == (d + 1,)
        assert size <= 4 * (d + 1) + 200  # the words and a small header
    codec = config.codec
    rounded = {c: np.rint(np.append(x * w, w) * codec.scale) for c, (x, w) in inputs.items()}
    total = np.sum(list(rounded.values()), axis=0) / codec.scale
    np.testing.assert_array_equal(result.mean, total[:-1] / total[-1])
    assert result.total_weight == total[-1]


@settings(max_examples=12, deadline=None)
@given(
    n=st.integers(2, 12),
    bound=st.floats(1.0, 1e5, allow_nan=False),
    signs=st.lists(st.sampled_from([1.0, -1.0]), min_size=3, max_size=3),
    plus=st.booleans(),
)
def test_worst_case_through_the_masks_is_exact(n, bound, signs, plus) -> None:
    """n clients all at ±bound (weight 1; the weight travels in the sum too): the unmasked
    sum is exactly n times the rounded bound, with no wrap in Z_2^32."""
    protocol = (SecAggPlus("exp-worst", k=2, value_bound=bound) if plus
                else SecAggregation("exp-worst", value_bound=bound))  # fmt: skip
    codec = protocol.config_for(n).codec
    assert codec.word_bits == 32
    worst = np.array(signs) * bound
    parties = protocol.create_parties(SERVER, _ids(n), 3)
    weight = 1.0
    inputs = {c: (worst, weight) for c in _ids(n)}
    result = aggregate(protocol, parties, 0, inputs)
    step = codec.scale
    exact_sum = n * np.rint(np.append(worst, weight) * step) / step
    np.testing.assert_array_equal(result.mean * result.total_weight, exact_sum[:-1])
    assert result.total_weight == exact_sum[-1]


def test_the_ring_holds_the_federation_not_the_round() -> None:
    """The headroom is for every client of the federation: a round of fewer cannot wrap."""
    protocol = SecAggregation("exp-fed", value_bound=1.0)
    assert protocol.config_for(2047).codec.word_bits == 32
    assert protocol.config_for(2048).codec.word_bits == 64  # 2048 x 2^20 = 2^31
    with pytest.raises(FixedPointOverflowError, match="no ring holds"):
        SecAggregation("exp-fed", value_bound=1.0, ring_bits=32).config_for(2048)
    # a lower precision lets 32 bits hold more clients
    assert SecAggregation("e", value_bound=1.0, precision_bits=16).config_for(30000).ring == (
        "Z_2^32/f16"
    )


def test_values_beyond_the_bound_are_refused_before_masking() -> None:
    protocol = SecAggregation("exp-refuse", value_bound=4.0)
    parties = protocol.create_parties(SERVER, _ids(3), 2)
    client = parties.clients["c00"]
    client.begin_round(0, np.array([4.0, -4.0]), 1.0)  # at the bound: fine
    with pytest.raises(FixedPointOverflowError, match="exceeds the fixed-point bound 4"):
        client.begin_round(1, np.array([2.0, 2.5]), 2.0)  # w x = 5 > 4
    with pytest.raises(FixedPointOverflowError, match="exceeds"):
        client.begin_round(2, np.zeros(2), 5.0)  # the weight itself travels in the sum


def test_without_a_bound_the_64_bit_path_stays() -> None:
    protocol = SecAggregation("exp-64")
    assert protocol.config_for(10).ring == "Z_2^64/f24"
    assert SecAggregation("e", value_bound=1.0, ring_bits=64).config_for(10).codec.word_bits == 64
    with pytest.raises(ValueError, match="needs a value_bound"):
        SecAggregation("exp-64", ring_bits=32)
    with pytest.raises(ValueError, match="ring_bits"):
        SecAggregation("exp-64", value_bound=1.0, ring_bits=16)
    parties = protocol.create_parties(SERVER, _ids(3), 4)
    wire = Wire()
    aggregate(protocol, parties, 0, {c: (np.ones(4), 1.0) for c in _ids(3)}, transmit=wire)
    assert all(e.payload.array("y").dtype == np.uint64 for e, _ in wire.masked())


def test_the_ring_is_bound_into_keys_and_statements() -> None:
    narrow = SecAggregation("exp-bind", value_bound=1.0).config_for(4)
    wide = SecAggregation("exp-bind", value_bound=1.0, ring_bits=64).config_for(4)
    assert narrow.ring != wide.ring
    assert narrow.pair_context(0, "mask", "a", "b") != wide.pair_context(0, "mask", "a", "b")
    pk = bytes(32)
    assert key_statement(narrow, 0, "a", pk, pk) != key_statement(wide, 0, "a", pk, pk)


def test_a_client_in_another_ring_is_refused_by_the_server() -> None:
    """Words of another width never enter the sum: the server checks the dtype."""
    n, d = 3, 5
    narrow = SecAggregation("exp-mix", value_bound=1.0)
    parties = narrow.create_parties(SERVER, _ids(n), d)

    def widen(env: Envelope) -> Envelope:
        if env.tag != TAG_MASKED or env.sender != "c01":
            return env
        y = env.payload.array("y").astype(np.uint64)
        return Envelope(env.sender, env.receiver, env.tag, Payload({"y": y}, env.payload.meta))

    def transmit(envelopes: list[Envelope]) -> list[Envelope]:
        return [widen(e) for e in no_transport(envelopes)]

    with pytest.raises(Exception, match="expected uint32"):
        aggregate(narrow, parties, 0, {c: (np.zeros(d), 1.0) for c in _ids(n)}, transmit)
