"""The CKKS ciphertext codecs: two reals per complex slot, seeded symmetric ciphertexts,
bytes near float32, precision, and what a party without the key can and cannot do."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import tenseal as ts
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.base import aggregate, setup_parties
from protocols.ckks import TAG_AGGREGATE, TAG_UPDATE, CKKSAggregation, serialize_public
from protocols.ckks_codec import (
    MAX_COEFF_BITS_128,
    CiphertextError,
    CKKSParams,
    ComplexCodec,
    RealCodec,
    make_codec,
)
from protocols.ckks_signed import SignedCKKSAggregation
from protocols.wire import Payload

from .test_ckks import Recorder, plaintext, random_inputs

SERVER = "server"


@pytest.fixture(scope="module")
def keys():
    params = CKKSParams()
    ctx = params.make_context()
    public = ts.context_from(serialize_public(ctx), n_threads=1)  # what the server gets
    return params, make_codec(ctx, params), make_codec(public, params)


@settings(max_examples=20, deadline=None)
@given(size=st.integers(1, 9000), seed=st.integers(0, 2**16))
def test_complex_packing_round_trip(keys, size, seed) -> None:
    """Any length (odd ones too): N reals per ciphertext, decrypted to within 2^-24."""
    params, client, _ = keys
    x = np.random.default_rng(seed).uniform(-100, 100, size)
    blobs = client.encrypt(x)
    assert len(blobs) == -(-size // params.poly_modulus_degree)
    sizes = client.sizes(size)
    got = np.concatenate([client.decrypt(client.load(b, n, "t"), n)
                          for b, n in zip(blobs, sizes, strict=True)])  # fmt: skip
    assert got.shape == (size,)
    assert np.max(np.abs(got - x)) < 2.0**-20


def test_seeded_ciphertexts_halve_the_upload_and_the_server_expands_them(keys) -> None:
    params, client, server = keys
    x = np.random.default_rng(0).uniform(-1, 1, params.poly_modulus_degree)
    seeded = client.encrypt(x)[0]
    unseeded = make_codec(client.ctx, CKKSParams(seeded=False)).encrypt(x)[0]
    assert len(seeded) < 0.55 * len(unseeded)
    # about 8 bytes per real for a 60-bit prime: 2x float32 (TenSEAL's CKKSVector: 32)
    assert len(seeded) / x.size < 8.5
    total = server.load(seeded, x.size, "a")
    server.add_(total, server.load(unseeded, x.size, "b"))
    summed = server.dump(total)  # an expanded ciphertext: both halves
    assert 1.8 * len(seeded) < len(summed) < 2.2 * len(seeded)
    got = client.decrypt(client.load(summed, x.size, "sum"), x.size)
    np.testing.assert_allclose(got, 2 * x, atol=1e-6)


def test_a_party_without_the_secret_key(keys) -> None:
    """The server's codec loads and adds; it can neither decrypt nor encrypt."""
    _, client, server = keys
    ct = server.load(client.encrypt(np.ones(5))[0], 5, "u")
    with pytest.raises(ValueError, match="secret key"):
        server.decrypt(ct, 5)
    with pytest.raises(ValueError, match="no key"):
        server.encrypt(np.ones(5))
    shifted = server.add_plain(ct, [0.5, 0, 0, 0, 0])  # a plaintext needs no key
    np.testing.assert_allclose(client.decrypt(shifted, 5), [1.5, 1, 1, 1, 1], atol=1e-6)


def test_public_key_encryption_is_not_seeded() -> None:
    params = CKKSParams()
    receiver = params.make_context(asymmetric=True)
    sender_ctx = receiver.copy()
    sender_ctx.make_context_public()
    sender = make_codec(sender_ctx, params)
    x = np.linspace(-1, 1, 100)
    blob = sender.encrypt(x)[0]
    assert len(blob) > 12 * params.poly_modulus_degree  # both halves travel
    own = make_codec(receiver, params)
    np.testing.assert_allclose(own.decrypt(own.load(blob, 100, "pk"), 100), x, atol=1e-6)


@pytest.mark.parametrize(
    "blob",
    [b"", b"\x00" * 64, b"SEAL" + bytes(100)],
    ids=["empty", "zeros", "fake-header"],
)
def test_garbage_is_refused(keys, blob) -> None:
    _, _, server = keys
    with pytest.raises(CiphertextError, match="not a CKKS ciphertext"):
        server.load(blob, 10, "junk")
    with pytest.raises(CiphertextError, match="byte blob"):
        server.load(bytearray(blob), 10, "junk")  # type: ignore[arg-type]


def test_wrong_scale_or_length_is_refused(keys) -> None:
    params, client, server = keys
    other = make_codec(client.ctx, CKKSParams(scale_bits=30))
    with pytest.raises(CiphertextError, match="scale"):
        server.load(other.encrypt(np.ones(4))[0], 4, "scaled")
    with pytest.raises(CiphertextError, match="do not fit"):
        server.load(client.encrypt(np.ones(4))[0], params.poly_modulus_degree + 1, "long")


def test_threads_do_not_share_a_scratch_file(keys) -> None:
    params, client, server = keys
    results: dict[int, float] = {}

    def work(i: int) -> None:
        x = np.full(params.poly_modulus_degree, float(i))
        for _ in range(5):
            ct = server.load(client.encrypt(x)[0], x.size, "t")
        results[i] = float(np.max(np.abs(client.decrypt(ct, x.size) - x)))

    # one codec per thread in real use (SEAL objects are not thread-safe); the file is the
    # shared state under test here, so each thread uses its own codecs
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [0, 1, 2, 3] and max(results.values()) < 1e-6


def test_params_packing_checked() -> None:
    with pytest.raises(ValueError, match="packing"):
        CKKSParams(packing="quaternion")
    with pytest.raises(ValueError, match="seeded"):
        CKKSParams(packing="real")  # seeded defaults to True: TenSEAL cannot
    real = CKKSParams(packing="real", seeded=False)
    assert real.values_per_ciphertext == real.slots == 2048
    assert CKKSParams().values_per_ciphertext == 4096
    assert isinstance(make_codec(real.make_context(), real), RealCodec)
    assert isinstance(make_codec(real.make_context(), CKKSParams()), ComplexCodec)


@pytest.mark.parametrize("malicious", [False, True])
def test_bytes_and_precision_at_d_1e5(malicious) -> None:
    """The aggregation at d = 1e5 (10 clients): at most 2.1x the float32 bytes up (target
    4x, stretch 2.5x), the aggregate within 1e-6 of plaintext, 128-bit security."""
    n, d = 10, 100_000
    proto = (SignedCKKSAggregation(experiment_id="bytes") if malicious
             else CKKSAggregation(experiment_id="bytes"))  # fmt: skip
    p = proto.params
    assert sum(p.coeff_mod_bit_sizes) <= MAX_COEFF_BITS_128[p.poly_modulus_degree]
    ids = [f"c{i}" for i in range(n)]
    parties = proto.create_parties(SERVER, ids, d)
    setup_parties(proto, parties, lambda envs: envs)
    rec = Recorder()
    inputs = random_inputs(ids, d, seed=3)
    got = aggregate(proto, parties, 0, inputs, transmit=rec)
    up = [len(e.payload.to_bytes()) for e in rec.sent if e.tag == TAG_UPDATE]
    ratio = max(up) / (4 * d)
    err = float(np.max(np.abs(got.mean - plaintext(inputs).mean)))
    print(f"ckks d=1e5 n={n} malicious={malicious}: up {ratio:.3f}x float32, error {err:.2e}")
    assert ratio <= (2.2 if malicious else 2.1)
    assert err < 1e-6
    down = [e for e in rec.sent if e.tag == TAG_AGGREGATE][0]
    assert isinstance(down.payload, Payload) and len(down.payload.to_bytes()) < 4.4 * 4 * d
