"""``ckks`` sums under the clients' shared key: who holds the key, what travels, refusals."""

from __future__ import annotations

import numpy as np
import pytest
import tenseal as ts

from protocols.base import Envelope, ProtocolError
from protocols.ckks_codec import make_codec
from protocols.crypto.aead import IntegrityError
from protocols.registry import make_secure_sum
from protocols.secure_sum import CKKSSum, SharedKeyCKKSSum, run_secure_sums
from protocols.secure_sum.ckks_shared import TAG_FORWARDED, TAG_KEY, TAG_SEALED, dealer_of
from protocols.secure_sum.parties import TAG_CONTRIBUTION
from protocols.wire import Payload
from tests.protocols.secure_sum.helpers import (
    SERVER,
    Recorder,
    client_ids,
    make_parties,
    simple_jobs,
)


def _contexts(blob: bytes) -> ts.Context | None:
    try:
        return ts.context_from(blob)
    except (ValueError, RuntimeError, TypeError):
        return None


def test_every_client_holds_the_one_key_and_the_server_none() -> None:
    rec = Recorder()
    protocol, parties = make_parties("ckks-shared", 4, rec)
    clients = list(parties.clients.values())
    assert all(c.own_context is not None and c.own_context.is_private() for c in clients)
    x = np.linspace(-1, 1, 100)
    for a, b in zip(clients, clients[1:], strict=False):  # one key: b decrypts what a encrypts
        enc, dec = make_codec(a.own_context, a.params), make_codec(b.own_context, b.params)
        (blob,) = enc.encrypt(x)
        np.testing.assert_allclose(dec.decrypt(dec.load(blob, x.size, "t"), x.size), x, atol=1e-6)
    assert not any(ctx.is_private() for ctx in parties.server.contexts.values())
    for env in rec.log:  # the transcript: X25519 keys, parameters, sealed blobs; no key
        for blob in env.payload.fields.values():
            ctx = _contexts(blob)
            assert ctx is None or not ctx.is_private(), env.tag
    sealed = [e for e in rec.log if e.tag == TAG_FORWARDED]
    assert sorted(e.receiver for e in sealed) == client_ids(4)[1:]  # all but the dealer
    out = run_secure_sums(protocol, parties, simple_jobs(4), rec)
    for r, blocks in simple_jobs(4).items():
        np.testing.assert_allclose(out[r].total, sum(blocks.values()), atol=1e-6)


def test_uploads_are_seeded_half_the_receiver_keys_bytes() -> None:
    rng = np.random.default_rng(0)
    d = 3 * CKKSSum().params.values_per_ciphertext
    jobs = {"c00": {"c01": rng.uniform(-1, 1, d), "c02": rng.uniform(-1, 1, d)}}
    sizes = {}
    for mode in ("ckks", "ckks-shared"):
        rec = Recorder()
        protocol, parties = make_parties(mode, 3, rec)
        run_secure_sums(protocol, parties, jobs, rec)
        sizes[mode] = sum(len(e.payload.to_bytes()) for e in rec.log if e.tag == TAG_CONTRIBUTION)
    assert sizes["ckks-shared"] < 0.55 * sizes["ckks"]
    assert SharedKeyCKKSSum().bytes_per_value(3) == CKKSSum().bytes_per_value(3) / 2


def test_a_tampered_sealed_context_is_refused() -> None:
    def flip(env: Envelope) -> Envelope:
        if env.tag != TAG_FORWARDED:
            return env
        blob = bytearray(env.payload.blob("sealed_context"))
        blob[-1] ^= 1
        return Envelope(env.sender, env.receiver, env.tag,
                        Payload({"sealed_context": bytes(blob)}, {}))  # fmt: skip

    with pytest.raises(IntegrityError):
        make_parties("ckks-shared", 3, Recorder(flip))


@pytest.mark.parametrize("fault", ["secret-params", "missing-client"])
def test_the_server_refuses_a_faulty_dealer_bundle(fault: str) -> None:
    def faulty(env: Envelope) -> Envelope:
        if env.tag != TAG_SEALED:
            return env
        fields = dict(env.payload.fields)
        if fault == "secret-params":
            fields["params"] = CKKSSum().params.make_context().serialize(save_secret_key=True)
        else:
            fields.pop("to:c02")
        return Envelope(env.sender, env.receiver, env.tag, Payload(fields, {}))

    with pytest.raises(ProtocolError, match="parameters only|every client"):
        make_parties("ckks-shared", 3, Recorder(faulty))


def test_a_client_refuses_a_key_bundle_without_the_dealer() -> None:
    def drop(env: Envelope) -> Envelope:
        if env.receiver != "c02" or env.sender != SERVER or not env.payload.fields:
            return env
        return Envelope(env.sender, env.receiver, env.tag, Payload({"c01": b"\x09" * 32}, {}))

    with pytest.raises(ProtocolError, match="exactly"):
        make_parties("ckks-shared", 3, Recorder(drop))


def test_registry_options_and_refusals() -> None:
    assert isinstance(make_secure_sum("ckks", "e", keys="shared"), SharedKeyCKKSSum)
    assert type(make_secure_sum("ckks", "e")) is CKKSSum
    with pytest.raises(ValueError, match="keys"):
        make_secure_sum("ckks", "e", keys="everyone")
    with pytest.raises(ValueError, match="malicious server"):
        make_secure_sum("ckks", "e", keys="shared", threat_model="malicious")
    assert dealer_of(["c2", "c10", "c1"]) == "c1"
    assert TAG_KEY != TAG_SEALED
