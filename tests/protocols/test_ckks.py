"""CKKS aggregation: correctness vs plaintext, dropouts, key custody, malformed input, size."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import numpy as np
import pytest
import tenseal as ts
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.base import (
    AggregateResult,
    Envelope,
    ProtocolError,
    aggregate,
    default_invoke,
    no_transport,
    roles_of,
    run_phases,
    setup_parties,
)
from protocols.ckks import (
    TAG_AGGREGATE,
    TAG_PUBLIC_CONTEXT,
    TAG_SECRET_CONTEXT,
    TAG_UPDATE,
    CiphertextError,
    CKKSAggregation,
    CKKSParams,
    ckks_encrypt_throughput,
    encrypt_chunks,
)
from protocols.ckks_codec import make_codec
from protocols.crypto.aead import IntegrityError
from protocols.wire import Payload, WireFormatError

SERVER = "server"


class Recorder:
    """A transmit that round-trips payloads through the wire format and keeps them."""

    def __init__(self, tamper: Callable[[Envelope], Envelope] | None = None) -> None:
        self.sent: list[Envelope] = []
        self.tamper = tamper

    def __call__(self, envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        if self.tamper is not None:
            out = [self.tamper(e) for e in out]
        self.sent.extend(out)
        return out

    def to(self, receiver: str) -> list[Envelope]:
        return [e for e in self.sent if e.receiver == receiver]


def federation(n: int, dim: int, transmit=no_transport, **kwargs):
    proto = CKKSAggregation(**kwargs)
    ids = [f"c{i}" for i in range(n)]
    parties = proto.create_parties(SERVER, ids, dim)
    setup_parties(proto, parties, transmit)
    return proto, parties, ids


def plaintext(inputs) -> AggregateResult:
    """The exact weighted mean in float64 (the plain protocol itself travels in float32)."""
    weights = np.array([w for _, w in inputs.values()], dtype=np.float64)
    total = sum(np.asarray(x, np.float64) * w for x, w in inputs.values())
    return AggregateResult(total / weights.sum(), float(weights.sum()), tuple(inputs))


def random_inputs(ids, dim, seed=0, weights=True):
    rng = np.random.default_rng(seed)
    return {
        c: (rng.uniform(-1, 1, dim), float(rng.uniform(0.5, 50)) if weights else 1.0) for c in ids
    }


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 20),
    dim=st.integers(1, 5000),
    seed=st.integers(0, 2**16),
)
def test_aggregate_matches_plaintext(n, dim, seed):
    proto, parties, ids = federation(n, dim)
    inputs = random_inputs(ids, dim, seed)
    got = aggregate(proto, parties, 0, inputs)
    want = plaintext(inputs)
    assert got.participants == tuple(ids)
    assert got.total_weight == pytest.approx(want.total_weight, abs=1e-6)
    assert got.mean.shape == (dim,)
    # the decrypted sums Σ w·x and Σ w are each rounded to 2^-20 (plus ~1e-7 of noise), so
    # the mean is off by at most about 2·2^-20 / Σ w
    assert np.max(np.abs(got.mean - want.mean)) <= 2 * 2.0**-20 / want.total_weight + 1e-7
    # every client holds the same aggregate
    for c in ids:
        np.testing.assert_array_equal(parties.clients[c].result().mean, got.mean)


def test_error_20_clients_unit_weights():
    """Max abs error of the unnormalised sum for 20 clients, values in [-1, 1]."""
    n, dim = 20, 10_000
    proto, parties, ids = federation(n, dim)
    inputs = random_inputs(ids, dim, seed=7, weights=False)
    got = aggregate(proto, parties, 0, inputs)
    exact = np.sum([v for v, _ in inputs.values()], axis=0)
    err = float(np.max(np.abs(got.mean * got.total_weight - exact)))
    print(f"ckks max abs error of a 20-client sum: {err:.2e}")
    assert err <= 1e-6  # target <= 1e-4; measured ~6e-8
    assert got.total_weight == 20.0


def test_several_rounds_reuse_keys():
    proto, parties, ids = federation(3, 10)
    for r in range(3):
        inputs = random_inputs(ids, 10, seed=r)
        got = aggregate(proto, parties, r, inputs)
        np.testing.assert_allclose(got.mean, plaintext(inputs).mean, atol=1e-6)


def test_dropout_before_encrypt_excluded():
    proto, parties, ids = federation(5, 300)
    inputs = random_inputs(ids, 300, seed=3)
    rec = Recorder()
    dropped = {"c1": "encrypt", "c3": "encrypt"}
    got = aggregate(proto, parties, 0, inputs, transmit=rec, dropped=dropped)
    assert sorted(e.receiver for e in rec.sent if e.tag == TAG_AGGREGATE) == ["c0", "c2", "c4"]
    for env in rec.sent:
        if env.tag == TAG_AGGREGATE:
            assert env.payload.meta["participants"] == ["c0", "c2", "c4"]
    survivors = {c: inputs[c] for c in ("c0", "c2", "c4")}
    assert got.participants == ("c0", "c2", "c4")
    np.testing.assert_allclose(got.mean, plaintext(survivors).mean, atol=1e-6)
    assert got.total_weight == pytest.approx(sum(w for _, w in survivors.values()), abs=1e-6)
    assert parties.clients["c1"].result() is None


def test_dropout_before_decrypt_still_counted():
    proto, parties, ids = federation(4, 50)
    inputs = random_inputs(ids, 50, seed=4)
    got = aggregate(proto, parties, 0, inputs, dropped={"c0": "decrypt"})
    assert got.participants == tuple(ids)
    np.testing.assert_allclose(got.mean, plaintext(inputs).mean, atol=1e-6)
    assert parties.clients["c0"].result() is None


def test_all_dropped_is_an_error():
    proto, parties, ids = federation(2, 5)
    with pytest.raises(ProtocolError, match="no client update"):
        aggregate(proto, parties, 0, random_inputs(ids, 5), dropped=dict.fromkeys(ids, "encrypt"))


def test_a_zero_total_weight_is_refused():
    """Every update carries weight 0 (allowed alone): the decrypted total weight rounds to
    0, and the clients refuse to divide by it instead of returning a NaN mean."""
    proto, parties, ids = federation(3, 4)
    inputs = {c: (x, 0.0) for c, (x, _) in random_inputs(ids, 4).items()}
    with pytest.raises(ProtocolError, match="total weight is not positive"):
        aggregate(proto, parties, 0, inputs)
    assert all(parties.clients[c].result() is None for c in ids)


def _walk(obj, seen=None):
    """Every object reachable from ``obj`` through attributes and containers."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    yield obj
    if isinstance(obj, dict):
        children = list(obj.keys()) + list(obj.values())
    elif isinstance(obj, list | tuple | set | frozenset):
        children = list(obj)
    elif isinstance(obj, ts.Context | ts.CKKSVector | np.ndarray | bytes | str):
        children = []
    elif hasattr(obj, "__dict__"):
        children = list(vars(obj).values())
    else:
        children = []
    for child in children:
        yield from _walk(child, seen)


@pytest.mark.parametrize("packing", ["complex", "real"])
def test_server_party_holds_public_context_only(packing):
    rec = Recorder()
    params = CKKSParams(packing=packing, seeded=packing == "complex")
    proto, parties, ids = federation(3, 20, rec, params=params)
    aggregate(proto, parties, 0, random_inputs(ids, 20), transmit=rec)
    contexts = [o for o in _walk(parties.server) if isinstance(o, ts.Context)]
    contexts += [o.context() for o in _walk(parties.server) if isinstance(o, ts.CKKSVector)]
    assert contexts, "the server should hold its CKKS context"
    assert all(not c.is_private() for c in contexts)
    assert not parties.server.context.has_relin_keys()
    assert not parties.server.context.has_galois_keys()
    # the server cannot decrypt what it received, nor encrypt
    update = rec.to(SERVER)[-1]
    codec = parties.server.codec
    ct = codec.load(update.payload.blob("ct00000"), 21, "update")
    with pytest.raises(ValueError, match="secret"):
        codec.decrypt(ct, 21)
    with pytest.raises(ValueError):
        codec.encrypt(np.ones(3))
    with pytest.raises(ValueError):
        ts.ckks_vector(parties.server.context, [1.0])
    # ...while every client can, and the key authority kept nothing
    assert all(parties.clients[c].context.is_private() for c in ids)
    authority = next(iter(parties.others.values()))
    assert not [o for o in _walk(authority) if isinstance(o, ts.Context | bytes)]


def _secret_key_window(ctx: ts.Context) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sk")
        ctx.secret_key().data.save(path)
        with open(path, "rb") as f:
            raw = f.read()
    return raw[len(raw) // 2 : len(raw) // 2 + 64]


def test_no_secret_key_in_anything_addressed_to_server():
    rec = Recorder()
    proto, parties, ids = federation(3, 3000, rec)
    aggregate(proto, parties, 0, random_inputs(ids, 3000), transmit=rec)
    to_server = rec.to(SERVER)
    assert {e.tag for e in to_server} == {TAG_PUBLIC_CONTEXT, TAG_UPDATE}
    sk_window = _secret_key_window(parties.clients["c0"].context)
    n_contexts = 0
    for env in to_server:
        assert sk_window not in env.payload.to_bytes()
        for blob in env.payload.fields.values():
            assert isinstance(blob, bytes)
            try:
                ctx = ts.context_from(blob)
            except Exception:  # not a context: must then be a ciphertext
                parties.server.codec.load(blob, 1, "update")
                continue
            n_contexts += 1
            assert not ctx.is_private()
    assert n_contexts == 1
    # control: the same checks do detect a secret context
    leaked = parties.clients["c0"].context.serialize(save_secret_key=True)
    assert ts.context_from(leaked).is_private()
    assert sk_window in leaked
    # the secret contexts sent to clients are sealed: no key material in clear
    for env in rec.sent:
        if env.tag == TAG_SECRET_CONTEXT:
            assert sk_window not in env.payload.to_bytes()


def _setup_until_sealed(experiment_id: str = "exp-A"):
    """Run setup up to (not including) the clients' install: key pairs still held."""
    proto = CKKSAggregation(experiment_id=experiment_id)
    ids = ["c0", "c1", "c2"]
    parties = proto.create_parties(SERVER, ids, 4)
    rec = Recorder()
    assert proto.setup_phases[-1].method == "install_secret_context"
    run_phases(proto.setup_phases[:-1], roles_of(parties), default_invoke(parties.by_id()), rec)
    sealed = {e.receiver: e for e in rec.sent if e.tag == TAG_SECRET_CONTEXT}
    assert set(sealed) == set(ids)
    return proto, parties, sealed


def test_sealed_context_opened_by_another_client_fails():
    proto, parties, sealed = _setup_until_sealed()
    thief = parties.clients["c1"]
    with pytest.raises(IntegrityError):
        thief.open_secret_context(sealed["c0"].payload)
    stolen = Envelope(sealed["c0"].sender, "c1", TAG_SECRET_CONTEXT, sealed["c0"].payload)
    with pytest.raises(IntegrityError):
        thief.install_secret_context([stolen])
    # the addressee opens it (the test can fail: same path, right key)
    parties.clients["c0"].install_secret_context([sealed["c0"]])
    assert parties.clients["c0"].context.is_private()


def test_sealed_context_bound_to_experiment_client_and_untampered():
    proto, parties, sealed = _setup_until_sealed("exp-A")
    client = parties.clients["c0"]
    other = CKKSAggregation(experiment_id="exp-B").create_parties(SERVER, ["c0"], 4).clients["c0"]
    other._keypair = client._keypair  # same X25519 key, another experiment
    with pytest.raises(IntegrityError):
        other.open_secret_context(sealed["c0"].payload)
    impostor = parties.clients["c1"]
    impostor._keypair = client._keypair  # same X25519 key, another client id
    with pytest.raises(IntegrityError):
        impostor.open_secret_context(sealed["c0"].payload)
    fields = dict(sealed["c0"].payload.fields)
    box = fields["sealed_context"]
    fields["sealed_context"] = box[:-1] + bytes([box[-1] ^ 1])
    with pytest.raises(IntegrityError):
        client.open_secret_context(Payload(fields, {}))
    assert client.open_secret_context(sealed["c0"].payload)


def _garble(kind: str, target_tag: str):
    other = CKKSParams().make_context()  # same parameters, different key and scale
    other.global_scale = 2.0**30
    other_scale = make_codec(other, CKKSParams(scale_bits=30))

    def tamper(env: Envelope) -> Envelope:
        if env.tag != target_tag or env.receiver not in (SERVER, "c0"):
            return env
        fields = dict(env.payload.fields)
        blob = fields["ct00000"]
        fields["ct00000"] = {
            "random": os.urandom(len(blob)),
            "truncated": blob[: len(blob) // 2],
            "empty": b"",
            "flipped": blob[:100] + bytes([blob[100] ^ 0xFF]) + blob[101:],
            "wrong_scale": other_scale.encrypt(np.zeros(4096))[0],
            "short": encrypt_chunks(other, np.zeros(3), 2048)[0],
        }[kind]
        return Envelope(env.sender, env.receiver, env.tag, Payload(fields, env.payload.meta))

    return tamper


@pytest.mark.parametrize(
    "kind", ["random", "truncated", "empty", "flipped", "wrong_scale", "short"]
)
def test_garbled_update_rejected(kind):
    proto, parties, ids = federation(2, 3000)
    rec = Recorder(_garble(kind, TAG_UPDATE))
    with pytest.raises(CiphertextError, match=r"update from 'c\d'\[0\]") as info:
        aggregate(proto, parties, 0, random_inputs(ids, 3000), transmit=rec)
    assert isinstance(info.value, WireFormatError)


def test_garbled_aggregate_rejected_by_client():
    proto, parties, ids = federation(2, 10)
    rec = Recorder(_garble("random", TAG_AGGREGATE))
    with pytest.raises(CiphertextError, match="aggregate"):
        aggregate(proto, parties, 0, random_inputs(ids, 10), transmit=rec)


def test_client_rejects_aggregate_without_its_update():
    def forget_c0(env: Envelope) -> Envelope:
        if env.tag != TAG_AGGREGATE:
            return env
        meta = {**env.payload.meta, "participants": ["c1"]}
        return Envelope(env.sender, env.receiver, env.tag, Payload(env.payload.fields, meta))

    proto, parties, ids = federation(2, 10)
    with pytest.raises(ProtocolError, match="not in the aggregate"):
        aggregate(proto, parties, 0, random_inputs(ids, 10), transmit=Recorder(forget_c0))


def test_missing_chunk_rejected():
    def drop_chunk(env: Envelope) -> Envelope:
        if env.tag != TAG_UPDATE:
            return env
        fields = {k: v for k, v in env.payload.fields.items() if k != "ct00001"}
        return Envelope(env.sender, env.receiver, env.tag, Payload(fields, env.payload.meta))

    proto, parties, ids = federation(2, 5000)  # two ciphertexts of 4096 values
    with pytest.raises(CiphertextError, match="expected fields"):
        aggregate(proto, parties, 0, random_inputs(ids, 5000), transmit=Recorder(drop_chunk))


def test_bytes_ratio_at_most_12x_float32():
    dim = 10_000
    rec = Recorder()
    proto, parties, ids = federation(2, dim, rec)
    aggregate(proto, parties, 0, random_inputs(ids, dim), transmit=rec)
    up = [e for e in rec.sent if e.tag == TAG_UPDATE]
    down = [e for e in rec.sent if e.tag == TAG_AGGREGATE]
    assert len(up) == len(down) == 2
    ratio_up = max(len(e.payload.to_bytes()) for e in up) / (4 * dim)
    ratio_down = max(len(e.payload.to_bytes()) for e in down) / (4 * dim)
    public_ctx = next(e for e in rec.sent if e.tag == TAG_PUBLIC_CONTEXT)
    print(
        f"ckks bytes / float32 bytes at d={dim}: up {ratio_up:.2f}x, down {ratio_down:.2f}x; "
        f"server context {len(public_ctx.payload.to_bytes())} B"
    )
    assert ratio_up <= 12 and ratio_down <= 12
    assert len(public_ctx.payload.to_bytes()) < 1000  # parameters only, no keys


def test_value_bound_guard():
    proto, parties, ids = federation(2, 3)
    bound = proto.params.value_bound(2)
    with pytest.raises(ProtocolError, match="overflow"):
        parties.clients["c0"].begin_round(0, np.array([0.0, 2 * bound, 0.0]), 1.0)
    with pytest.raises(ProtocolError, match="finite"):
        parties.clients["c0"].begin_round(0, np.array([np.nan, 0.0, 0.0]), 1.0)
    # just under the bound still aggregates correctly (no wrap-around)
    inputs = {c: (np.array([bound * 0.99, -bound * 0.99, 0.5]), 1.0) for c in ids}
    got = aggregate(proto, parties, 0, inputs)
    np.testing.assert_allclose(got.mean, [bound * 0.99, -bound * 0.99, 0.5], rtol=1e-9)


def test_round_without_setup_fails():
    proto = CKKSAggregation()
    parties = proto.create_parties(SERVER, ["c0"], 3)
    with pytest.raises(ProtocolError, match="setup"):
        aggregate(proto, parties, 0, {"c0": (np.zeros(3), 1.0)})


def test_server_refuses_private_context():
    proto = CKKSAggregation()
    parties = proto.create_parties(SERVER, ["c0"], 3)
    private = CKKSParams().make_context().serialize(save_secret_key=True)
    env = Envelope(proto.authority_id, SERVER, TAG_PUBLIC_CONTEXT, Payload({"context": private}))
    with pytest.raises(ProtocolError, match="secret key"):
        parties.server.install_public_context([env])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"coeff_mod_bit_sizes": (60, 60)},  # 120 bits > 109 at N=4096: under 128-bit security
        {"poly_modulus_degree": 3000},
        {"coeff_mod_bit_sizes": (60,)},
        {"scale_bits": 58},
        {"scale_bits": 36, "round_bits": 30},
    ],
)
def test_params_validated(kwargs):
    with pytest.raises(ValueError):
        CKKSParams(**kwargs)


def test_larger_ring_works():
    params = CKKSParams(poly_modulus_degree=8192, coeff_mod_bit_sizes=(60, 60), scale_bits=40)
    proto, parties, ids = federation(3, 5000, params=params)
    inputs = random_inputs(ids, 5000, seed=9)
    np.testing.assert_allclose(
        aggregate(proto, parties, 0, inputs).mean, plaintext(inputs).mean, atol=1e-6
    )


def test_duplicate_ids_rejected():
    with pytest.raises(ValueError, match="distinct"):
        CKKSAggregation().create_parties(SERVER, ["c0", "key-authority"], 3)


def test_encrypt_throughput_positive():
    rate = ckks_encrypt_throughput(dim=20_000)
    print(f"ckks encrypt+serialize: {rate / 1e6:.2f} M floats/s")
    assert rate > 1e5
