"""CKKS aggregation with a relayed mean: one decryption a round, a sealed float32 download."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.base import Envelope, ProtocolError, aggregate, no_transport, setup_parties
from protocols.ckks import TAG_AGGREGATE, TAG_UPDATE
from protocols.ckks_relay import TAG_RELAYED, RelayCKKSAggregation, relay_of
from protocols.crypto.aead import IntegrityError
from protocols.registry import make_transport
from protocols.wire import encode

SERVER = "server"


class Recorder:
    """A transmit that round-trips payloads through the wire format, keeps them, and lets a
    test edit what arrives."""

    def __init__(self, edit: Callable[[Envelope], Envelope | None] | None = None) -> None:
        self.sent: list[Envelope] = []
        self.edit = edit

    def __call__(self, envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        if self.edit is not None:
            out = [e for e in (self.edit(env) for env in out) if e is not None]
        self.sent.extend(out)
        return out


def federation(n: int, dim: int):
    proto = RelayCKKSAggregation(experiment_id="relay")
    ids = [f"c{i}" for i in range(n)]
    parties = proto.create_parties(SERVER, ids, dim)
    setup_parties(proto, parties, no_transport)
    return proto, parties, ids


def inputs_for(ids, dim: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return {c: (rng.uniform(-1, 1, dim), float(rng.integers(1, 50))) for c in ids}


def weighted_mean(inputs) -> np.ndarray:
    return sum(v * w for v, w in inputs.values()) / sum(w for _, w in inputs.values())


def test_honest_but_curious_ckks_is_the_relay() -> None:
    assert isinstance(make_transport("ckks", "x"), RelayCKKSAggregation)
    assert not isinstance(
        make_transport("ckks", "x", threat_model="malicious"), RelayCKKSAggregation
    )


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 5), dim=st.integers(0, 70), rounds=st.integers(1, 3))
def test_every_client_holds_the_same_float32_mean(n: int, dim: int, rounds: int) -> None:
    proto, parties, ids = federation(n, dim)
    for r in range(rounds):
        inputs = inputs_for(ids, dim, seed=r)
        rec = Recorder()
        result = aggregate(proto, parties, r, inputs, transmit=rec)
        assert np.max(np.abs(result.mean - weighted_mean(inputs)), initial=0.0) < 1e-6
        assert result.total_weight == pytest.approx(sum(w for _, w in inputs.values()))
        means = [parties.clients[c].result().mean for c in ids]
        assert all(np.array_equal(m, means[0]) for m in means)  # bit-identical models
        assert np.array_equal(means[0], means[0].astype(np.float32))
        # one client (the round's relay, rotating) got the ciphertext; the rest a sealed mean
        got_sum = [e.receiver for e in rec.sent if e.tag == TAG_AGGREGATE]
        assert got_sum == [relay_of(ids, r)]
        relayed = {e.receiver for e in rec.sent if e.tag == TAG_RELAYED and e.sender == SERVER}
        assert relayed == set(ids) - {relay_of(ids, r)}


def test_relay_rotates_with_the_round() -> None:
    ids = ["c2", "c0", "c1"]
    assert [relay_of(ids, r) for r in range(4)] == ["c0", "c1", "c2", "c0"]


def test_download_is_about_float32_and_the_server_never_sees_the_mean() -> None:
    dim = 20_000
    proto, parties, ids = federation(4, dim)
    inputs = inputs_for(ids, dim)
    rec = Recorder()
    aggregate(proto, parties, 0, inputs, transmit=rec)
    to_others = [e for e in rec.sent if e.tag == TAG_RELAYED and e.sender == SERVER]
    sizes = [len(encode(e.payload)) for e in to_others]
    assert all(4 * dim < s < 4 * dim * 1.02 for s in sizes)
    update = next(e for e in rec.sent if e.tag == TAG_UPDATE)
    assert len(encode(update.payload)) < 2.2 * 4 * dim  # seeded ciphertexts, two reals a slot
    mean32 = parties.clients["c1"].result().mean.astype(np.float32).tobytes()
    assert all(mean32[:64] not in e.payload.blob("sealed") for e in to_others)


def _run_edited(edit: Callable[[Envelope], Envelope | None], rounds: int = 1) -> None:
    proto, parties, ids = federation(3, 10)
    for r in range(rounds):
        aggregate(proto, parties, r, inputs_for(ids, 10, seed=r), transmit=Recorder(edit))


def test_a_tampered_mean_is_refused() -> None:
    def flip(env: Envelope) -> Envelope:
        if env.tag == TAG_RELAYED and env.sender == SERVER:
            sealed = bytearray(env.payload.blob("sealed"))
            sealed[20] ^= 1
            env.payload.fields["sealed"] = bytes(sealed)
        return env

    with pytest.raises(IntegrityError):
        _run_edited(flip)


def test_a_mean_cannot_be_moved_to_another_cohort() -> None:
    def shrink(env: Envelope) -> Envelope:
        if env.tag == TAG_RELAYED and env.sender == SERVER:
            env.payload.meta["participants"] = ["c0", "c1", "c2", "c9"]
        return env

    with pytest.raises(ProtocolError):
        _run_edited(shrink)


def test_a_mean_cannot_be_replayed_into_a_later_round() -> None:
    kept: list[Envelope] = []

    def replay(env: Envelope) -> Envelope:
        if env.tag == TAG_RELAYED and env.sender == SERVER:
            if not kept:
                kept.append(env)
            elif env.payload.meta["round"] == 1:
                stale = kept[0]
                meta = {**stale.payload.meta, "round": 1}
                return Envelope(stale.sender, env.receiver, stale.tag, type(stale.payload)(
                    dict(stale.payload.fields), meta))  # fmt: skip
        return env

    with pytest.raises(ProtocolError):  # wrong relay for round 1, or the AEAD check
        _run_edited(replay, rounds=2)


def test_the_server_cannot_name_another_relay() -> None:
    def misroute(env: Envelope) -> Envelope:
        if env.tag == TAG_AGGREGATE:
            env.payload.meta["relay"] = "c2"
        return env

    with pytest.raises(ProtocolError, match="wrong relay"):
        _run_edited(misroute)


def test_a_missing_mean_aborts_the_round() -> None:
    def drop(env: Envelope) -> Envelope | None:
        return None if env.tag == TAG_RELAYED and env.receiver == "c2" else env

    with pytest.raises(ProtocolError, match="expected one relayed mean"):
        _run_edited(drop)
