"""CKKS aggregation in malicious-server mode: signed deliveries, checked aggregates."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.base import Envelope, ProtocolError, aggregate, no_transport, setup_parties
from protocols.ckks import (
    TAG_AGGREGATE,
    TAG_CLIENT_KEY,
    TAG_PUBLIC_CONTEXT,
    TAG_SECRET_CONTEXT,
    TAG_UPDATE,
    CKKSAggregation,
    CKKSParams,
    _chunk_blobs,
    _chunk_sizes,
)
from protocols.ckks_signed import CheckKey, SignedCKKSAggregation, check_slots, tolerance
from protocols.identity import SignatureError
from protocols.registry import make_transport
from tests.protocols.tampering import edit_transmit

SERVER = "server"
MAL = "malicious"
IDS = ["c0", "c1", "c2", "c3"]


def _inputs(d: int, seed: int = 0) -> dict[str, tuple[np.ndarray, float]]:
    rng = np.random.default_rng(seed)
    return {c: (rng.uniform(-1, 1, d), float(i + 1)) for i, c in enumerate(IDS)}


def _mean(inputs, members) -> np.ndarray:
    return sum(inputs[c][0] * inputs[c][1] for c in members) / sum(inputs[c][1] for c in members)


def _setup(threat_model: str = MAL, d: int = 40, transmit=no_transport, protocol=None):
    protocol = protocol or make_transport("ckks", "exp-ckks", threat_model=threat_model)
    parties = protocol.create_parties(SERVER, IDS, d)
    setup_parties(protocol, parties, transmit)
    return protocol, parties


@pytest.mark.parametrize("dim", [40, 5000])
def test_malicious_mode_aggregates_with_dropouts(dim: int) -> None:
    protocol, parties = _setup(d=dim)
    inputs = _inputs(dim)
    result = aggregate(protocol, parties, 0, inputs, dropped={"c2": "encrypt"})
    members = ["c0", "c1", "c3"]
    assert result.participants == tuple(members)
    np.testing.assert_allclose(result.mean, _mean(inputs, members), atol=1e-6)
    assert check_slots(dim) == 2 + 2 * -(-(dim + 1) // 32)
    assert isinstance(protocol, SignedCKKSAggregation) and protocol.threat_model == MAL


def _drop_signature_rows(env: Envelope) -> None:
    env.payload.fields["sigs"] = env.payload.fields["sigs"][:1]


def _wrong_digest(env: Envelope) -> None:
    env.payload.fields["digests"][1, 0] ^= 1


def _fake_participant(env: Envelope) -> None:  # claims c3 without its update
    participants = env.payload.meta["participants"]
    env.payload.meta["participants"] = [p for p in participants if p != "c3"]
    keep = [i for i, p in enumerate(participants) if p != "c3"]
    env.payload.fields["digests"] = env.payload.fields["digests"][keep]
    env.payload.fields["sigs"] = env.payload.fields["sigs"][keep]


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (_drop_signature_rows, "no per-update signatures"),
        (_wrong_digest, "does not verify"),
        (_fake_participant, "tag check"),
    ],
)
def test_forged_attestations_are_refused(edit, match) -> None:
    protocol, parties = _setup()
    with pytest.raises(ProtocolError, match=match):
        aggregate(protocol, parties, 0, _inputs(40), transmit=edit_transmit(TAG_AGGREGATE, edit))


def test_the_same_forgery_passes_unnoticed_when_honest_but_curious() -> None:
    """Honest-but-curious clients that decrypt the aggregate themselves accept one listing a
    client it leaves out."""
    protocol, parties = _setup(protocol=CKKSAggregation(experiment_id="exp-ckks"))
    inputs = _inputs(40)

    def drop_c3(env: Envelope) -> None:
        if env.receiver != "c3":  # c3 itself would notice
            env.payload.meta["participants"] = [p for p in env.payload.meta["participants"]
                                                if p != "c3"]  # fmt: skip

    result = aggregate(protocol, parties, 0, inputs, transmit=edit_transmit(TAG_AGGREGATE, drop_c3))
    np.testing.assert_allclose(result.mean, _mean(inputs, IDS), atol=1e-6)  # sum of all four
    assert result.participants == ("c0", "c1", "c2")  # ...reported as three


def test_key_delivery_is_signed() -> None:
    def tamper_secret(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            if env.tag == TAG_SECRET_CONTEXT and env.receiver == "c1":
                env.payload.fields["authority_public"] = bytes(31) + b"\x09"
        return out

    with pytest.raises(SignatureError, match="secret context: signature of 'key-authority'"):
        _setup(transmit=tamper_secret)

    def impersonate(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            if env.tag == TAG_CLIENT_KEY and env.sender == "c2":
                env.payload.fields["sig"] = bytes(64)
        return out

    with pytest.raises(SignatureError, match="client key: signature of 'c2'"):
        _setup(transmit=impersonate)


def test_check_key_tags_and_sketches() -> None:
    key = CheckKey(bytes(range(32)), "e")
    tags = key.tags(0, "c0")
    assert tags.shape == (2,) and np.all(np.abs(tags) <= 1)
    assert not np.allclose(tags, key.tags(1, "c0")) and not np.allclose(tags, key.tags(0, "c1"))
    values = np.arange(70, dtype=float)
    alpha = key.alphas(0, values.size)
    assert alpha.shape == (2, 3, 32)
    sketch = CheckKey.sketch(alpha, values)
    np.testing.assert_allclose(sketch[0], alpha[0, 0] @ values[:32])
    # the sketch coefficients are fresh each round (and the cached ones are not reused)
    assert not np.allclose(key.alphas(1, values.size), alpha)
    np.testing.assert_array_equal(key.alphas(0, values.size), alpha)
    assert tolerance(CKKSParams(), 100) < 1e-4


def test_clients_refuse_an_aggregate_below_the_minimum_cohort() -> None:
    """A server that leaves clients out (claimed dropouts) cannot go below the cohort the
    clients enforce: by default a majority of the federation (3 of 4)."""
    protocol, parties = _setup()
    assert protocol.min_summands(len(IDS)) == 3
    inputs = _inputs(40)
    with pytest.raises(ProtocolError, match="minimum cohort of 3"):
        aggregate(protocol, parties, 0, inputs, dropped={"c1": "encrypt", "c2": "encrypt"})
    lax = make_transport("ckks", "exp-ckks", threat_model=MAL, min_cohort=2)
    lax_parties = lax.create_parties(SERVER, IDS, 40)
    setup_parties(lax, lax_parties, no_transport)
    result = aggregate(lax, lax_parties, 0, inputs, dropped={"c1": "encrypt", "c2": "encrypt"})
    np.testing.assert_allclose(result.mean, _mean(inputs, ["c0", "c3"]), atol=1e-6)
    everyone = make_transport("ckks", "exp-ckks", threat_model=MAL, min_cohort=4)
    assert everyone.min_summands(len(IDS)) == 4  # the whole federation is a valid cohort
    too_many = make_transport("ckks", "exp-ckks", threat_model=MAL, min_cohort=5)
    with pytest.raises(ValueError, match="min_cohort=5 exceeds the 4 clients"):
        too_many.create_parties(SERVER, IDS, 40)


@pytest.mark.parametrize("threat_model", [MAL, "honest-but-curious"])
def test_a_reused_round_index_is_refused(threat_model: str) -> None:
    """The tags, sketches and signatures are bound to (round, client): a server that ran a
    round index twice could show a client the other clients' signed updates of the first
    run beside its fresh one, and every check would pass. Clients refuse the reuse."""
    protocol, parties = _setup(threat_model, d=8)
    aggregate(protocol, parties, 0, _inputs(8))
    with pytest.raises(ProtocolError, match="round 0 was already used"):
        aggregate(protocol, parties, 0, _inputs(8, seed=1))
    result = aggregate(protocol, parties, 1, _inputs(8, seed=1))
    np.testing.assert_allclose(result.mean, _mean(_inputs(8, seed=1), IDS), atol=1e-6)


def test_a_client_refuses_an_aggregate_listing_another_update_as_its_own() -> None:
    """The server lists, for c0 only, c1's digest in c0's own row. The aggregate itself is
    untouched and c0 checks no signature on its own row, so only the comparison with the
    digest c0 signed catches it (without it the round completes)."""
    protocol, parties = _setup(d=8)
    swapped: list[str] = []

    def other_own_digest(env: Envelope) -> None:
        if env.receiver == "c0":
            row = env.payload.meta["participants"].index("c0")
            digests = env.payload.fields["digests"] = env.payload.fields["digests"].copy()
            digests[row] = digests[(row + 1) % len(digests)]
            swapped.append(env.receiver)

    with pytest.raises(ProtocolError, match="c0: the server listed a different own update"):
        transmit = edit_transmit(TAG_AGGREGATE, other_own_digest)
        aggregate(protocol, parties, 0, _inputs(8), transmit=transmit)
    assert swapped and parties.clients["c0"].result() is None


def test_a_client_counted_twice_is_refused() -> None:
    """With c2 and c3 dropped the server adds c1's ciphertext a second time and lists c1
    twice (its digest and signature repeated): the tags match the listed participants and
    three rows meet the majority cohort, so only the distinct-participants check stops a
    sum of two clients with one of them weighted double."""
    protocol, parties = _setup(d=8)
    server = parties.server
    honest = server._sum_updates

    def doubled(inbox):
        fields, meta, senders = honest(inbox)
        sizes = _chunk_sizes(server.payload_dim, server.params.values_per_ciphertext)
        blobs = _chunk_blobs(server._received["c1"], len(sizes), "c1", server.update_extra)
        names = sorted(k for k in fields if k.startswith("ct"))
        fields = dict(fields)
        for name, blob, size in zip(names, blobs, sizes, strict=True):
            total = server.codec.load(fields[name], size, "sum")
            server.codec.add_(total, server.codec.load(blob, size, "c1"))
            fields[name] = server.codec.dump(total)
        rows = [meta["participants"].index(c) for c in ("c0", "c1", "c1")]
        fields["digests"], fields["sigs"] = fields["digests"][rows], fields["sigs"][rows]
        return fields, {**meta, "participants": ["c0", "c1", "c1"]}, senders

    server._sum_updates = doubled
    with pytest.raises(SignatureError, match="c0: the aggregate carries no per-update signatures"):
        aggregate(protocol, parties, 0, _inputs(8), dropped={"c2": "encrypt", "c3": "encrypt"})


def test_a_client_refuses_an_aggregate_that_leaves_its_own_update_out() -> None:
    """The server drops c3's update but still sends c3 the others' aggregate: every listed
    signature and tag checks out, so only c3's own-membership check stops it from
    decrypting a sum of the others."""

    def drop_c3_update(envelopes: list[Envelope]) -> list[Envelope]:
        out = [e for e in no_transport(envelopes) if (e.tag, e.sender) != (TAG_UPDATE, "c3")]
        to_c0 = [e for e in out if e.tag == TAG_AGGREGATE and e.receiver == "c0"]
        return out + [Envelope(e.sender, "c3", e.tag, e.payload) for e in to_c0]

    protocol, parties = _setup(d=8)
    with pytest.raises(ProtocolError, match="c3: own update is not in the aggregate"):
        aggregate(protocol, parties, 0, _inputs(8), transmit=drop_c3_update)
    assert parties.clients["c3"].result() is None


def test_the_server_refuses_an_unsigned_public_context() -> None:
    def forge_public(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            if env.tag == TAG_PUBLIC_CONTEXT:
                env.payload.fields["sig"] = bytes(64)
        return out

    with pytest.raises(SignatureError, match="server: public context"):
        _setup(transmit=forge_public)


@pytest.mark.parametrize("coordinate", [0, 35, 40])
def test_a_plaintext_offset_in_any_block_is_refused(coordinate: int) -> None:
    """The server adds a plaintext 0.25 to one slot of the sum (no key needed; tags left
    alone): in the first block, a later one, or the weight slot. Each block has its own
    secret sketches, and every one is compared with the decrypted sum."""
    protocol, parties = _setup(d=40)
    server = parties.server
    honest = server._sum_updates

    def offset(inbox):
        fields, meta, senders = honest(inbox)
        size = _chunk_sizes(server.payload_dim, server.params.values_per_ciphertext)[0]
        delta = np.zeros(size)
        delta[coordinate] = 0.25
        total = server.codec.load(fields["ct00000"], size, "sum")
        fields = {**fields, "ct00000": server.codec.dump(server.codec.add_plain(total, delta))}
        return fields, meta, senders

    server._sum_updates = offset
    with pytest.raises(ProtocolError, match="does not match its secret sketches"):
        aggregate(protocol, parties, 0, _inputs(40))
