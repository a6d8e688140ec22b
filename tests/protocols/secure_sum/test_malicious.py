"""Secure sums in malicious-server mode: signed set-up keys and signed requests."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.base import Envelope, ProtocolError, no_transport
from protocols.crypto.keyagreement import KeyPair
from protocols.identity import Pki, SignatureError
from protocols.registry import make_secure_sum
from protocols.secure_sum import CKKSSum, MaskedSum, Support, run_secure_sums, setup_secure_sums
from protocols.secure_sum.ckks import TAG_CONTEXTS
from protocols.secure_sum.masked import TAG_KEY, TAG_KEYLIST
from protocols.secure_sum.parties import TAG_ROUTED_REQUEST
from tests.protocols.tampering import edit_transmit

SERVER = "server"
IDS = ["c0", "c1", "c2", "c3"]
MAL = "malicious"


def _jobs(seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return {"c0": {"c1": rng.random((3, 5)), "c2": rng.random((3, 5)), "c3": rng.random((3, 5))},
            "c2": {"c0": rng.random((3, 5)), "c1": rng.random((3, 5))}}  # fmt: skip


@pytest.mark.parametrize(
    "make", [lambda: MaskedSum("exp-s", threat_model=MAL),
             lambda: CKKSSum(threat_model=MAL, experiment_id="exp-s")],  # fmt: skip
    ids=["masked", "ckks"],
)
def test_malicious_mode_sums_correctly(make) -> None:
    protocol = make()
    parties = protocol.create_parties(SERVER, IDS)
    setup_secure_sums(protocol, parties)
    jobs = _jobs()
    out = run_secure_sums(protocol, parties, jobs, round_idx=0)
    for r, job in jobs.items():
        np.testing.assert_allclose(out[r].total, sum(job.values()), atol=1e-6)


def _substitute_key(env: Envelope) -> None:
    env.payload.fields["keys"][0] = np.frombuffer(KeyPair.generate().public, np.uint8)


def test_substituted_setup_key_is_refused_only_in_malicious_mode() -> None:
    for threat_model in ("honest-but-curious", MAL):
        protocol = MaskedSum("exp-k", threat_model=threat_model)
        parties = protocol.create_parties(SERVER, IDS)
        transmit = edit_transmit(TAG_KEYLIST, _substitute_key)
        if threat_model == MAL:
            with pytest.raises(SignatureError, match="setup-key of 'c[0-3]'"):
                setup_secure_sums(protocol, parties, transmit)
        else:
            setup_secure_sums(protocol, parties, transmit)  # accepted: the server's own key


def test_substituted_ckks_context_is_refused() -> None:
    protocol = CKKSSum(threat_model=MAL, experiment_id="exp-k")
    parties = protocol.create_parties(SERVER, IDS)
    other = CKKSSum(threat_model=MAL, experiment_id="exp-k").create_parties(SERVER, IDS)
    setup_secure_sums(CKKSSum(), other)  # unsigned contexts the server could hand out

    def swap(env: Envelope) -> None:
        name = sorted(k for k in env.payload.fields if k.startswith("ctx:"))[0]
        peer = name[4:]
        ctx = other.clients[peer].own_context
        assert ctx is not None
        env.payload.fields[name] = ctx.serialize(save_secret_key=False)

    with pytest.raises(SignatureError, match="setup-context"):
        setup_secure_sums(protocol, parties, edit_transmit(TAG_CONTEXTS, swap))


def test_altered_or_replayed_requests_are_refused() -> None:
    pki = Pki.issue(IDS)
    protocol = MaskedSum("exp-q", threat_model=MAL, registry=pki.registry)
    parties = protocol.create_parties(SERVER, IDS)
    setup_secure_sums(protocol, parties)

    def one_sender_less(env: Envelope) -> None:  # the server trims the sender list
        env.payload.meta["senders"] = env.payload.meta["senders"][:2]

    with pytest.raises(SignatureError, match="request of 'c[02]'"):
        run_secure_sums(protocol, parties, {"c0": _jobs()["c0"]}, round_idx=0,
                        transmit=edit_transmit(TAG_ROUTED_REQUEST, one_sender_less))  # fmt: skip

    kept: list[Envelope] = []

    def record(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        kept.extend(e for e in out if e.tag == TAG_ROUTED_REQUEST)
        return out

    run_secure_sums(protocol, parties, {"c0": _jobs()["c0"]}, round_idx=1, transmit=record)

    def replay(env: Envelope) -> None:  # round 1's signature in round 2
        env.payload.fields["sig"] = kept[0].payload.fields["sig"]

    with pytest.raises(SignatureError, match="does not verify"):
        run_secure_sums(protocol, parties, {"c0": _jobs(1)["c0"]}, round_idx=2,
                        transmit=edit_transmit(TAG_ROUTED_REQUEST, replay))  # fmt: skip


def test_registry_travels_as_wire_data() -> None:
    pki = Pki.issue(IDS)
    spec = {"threat_model": MAL, "registry": pki.registry.to_wire()}
    protocol = make_secure_sum("masked", "exp-w", **spec)
    parties = protocol.create_parties(SERVER, IDS)
    assert parties.clients["c1"].registry == pki.registry
    setup_secure_sums(protocol, parties)
    unknown = MaskedSum("exp-w", threat_model=MAL, registry=Pki.issue(["x"]).registry)
    with pytest.raises(ProtocolError, match="holds no signing key"):
        setup_secure_sums(unknown, unknown.create_parties(SERVER, IDS))


def _narrower_support(meta: dict, fields: dict) -> None:
    for name in [n for n in fields if n.startswith("support_")]:
        del fields[name]
    fields.update(Support.product((3, 5), rows=[0, 1]).to_fields())


@pytest.mark.parametrize(
    "edit",
    [_narrower_support, lambda meta, fields: meta.update(sparse_result=True)],
    ids=["support", "sparse_result"],
)
def test_the_signed_request_covers_its_support_and_result_kind(edit) -> None:
    pki = Pki.issue(IDS)
    protocol = MaskedSum("exp-p", threat_model=MAL, registry=pki.registry)
    parties = protocol.create_parties(SERVER, IDS)
    setup_secure_sums(protocol, parties)
    jobs = {"c0": {"c1": np.ones((3, 5)), "c2": np.ones((3, 5))}}
    supports = {"c0": Support.product((3, 5), rows=[0, 1, 2])}

    def tamper(env: Envelope) -> None:
        edit(env.payload.meta, env.payload.fields)

    with pytest.raises(SignatureError, match="request of 'c0'"):
        run_secure_sums(protocol, parties, jobs, round_idx=0, supports=supports,
                        transmit=edit_transmit(TAG_ROUTED_REQUEST, tamper))  # fmt: skip


def test_unsigned_keys_are_refused() -> None:
    """A key list stripped of its signatures (clients), a key sent without one (server)."""
    protocol = MaskedSum("exp-u", threat_model=MAL)
    parties = protocol.create_parties(SERVER, IDS)
    with pytest.raises(ProtocolError, match="the key list carries no signatures"):
        strip = edit_transmit(TAG_KEYLIST, lambda env: env.payload.fields.pop("sigs"))
        setup_secure_sums(protocol, parties, strip)
    with pytest.raises(ProtocolError, match="server: a public key arrived without its signature"):
        unsigned = edit_transmit(TAG_KEY, lambda env: env.payload.fields.pop("sig"))
        setup_secure_sums(protocol, parties, unsigned)
