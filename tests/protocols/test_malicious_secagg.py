"""SecAgg / SecAgg+ in malicious-server mode: signed keys, the consistency round, refusals.

Each tamper is applied in transit (the server's position); the malicious-server clients
must refuse it before revealing anything, while honest-but-curious clients accept the same
message (what makes the active-server attacks of ``tests/attacks/test_active_server.py``
work there).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from protocols.base import Envelope, ProtocolError, aggregate, no_transport
from protocols.identity import KeyRegistry, Pki, SignatureError
from protocols.secagg import (
    TAG_KEYLIST,
    TAG_ROUTED,
    TAG_UNMASK_REQUEST,
    SecAggPlus,
    SecAggregation,
)
from protocols.secagg.consistency import (
    TAG_CONSISTENCY,
    check_quorum,
    survivor_statement,
)
from protocols.secagg.rounds import RoundInfo

SERVER = "server"
MAL = "malicious"


def _ids(n: int) -> list[str]:
    return [f"c{i:02d}" for i in range(n)]


def _inputs(n: int, d: int, seed: int = 0) -> dict[str, tuple[np.ndarray, float]]:
    rng = np.random.default_rng(seed)
    return {c: (rng.uniform(-2, 2, d), float(rng.integers(1, 4))) for c in _ids(n)}


def _mean(inputs, members) -> np.ndarray:
    return sum(inputs[c][0] * inputs[c][1] for c in members) / sum(inputs[c][1] for c in members)


@pytest.mark.parametrize(
    "protocol",
    [SecAggregation("exp-m", threat_model=MAL), SecAggPlus("exp-m", k=4, threat_model=MAL)],
)
@pytest.mark.parametrize(
    "dropped",
    [
        {},
        {"c01": "share_keys", "c04": "masked_input"},
        {"c02": "sign_survivors", "c05": "unmask"},
        {"c03": "advertise_keys", "c06": "sign_survivors"},
    ],
)
def test_malicious_mode_aggregates_with_dropouts(protocol, dropped) -> None:
    n, d = 9, 6
    inputs = _inputs(n, d)
    result = aggregate(protocol, protocol.create_parties(SERVER, _ids(n), d), 0, inputs,
                       dropped=dropped)  # fmt: skip
    early = {"advertise_keys", "share_keys", "masked_input"}
    members = [c for c in _ids(n) if dropped.get(c) not in early]
    assert result.participants == tuple(members)
    np.testing.assert_allclose(result.mean, _mean(inputs, members), atol=1e-5)


def test_phases_and_pki() -> None:
    honest, mal = SecAggregation("e"), SecAggregation("e", threat_model=MAL)
    methods = [p.method for p in mal.round_phases]
    assert "request_unmask" in [p.method for p in honest.round_phases]
    assert methods.index("sign_survivors") < methods.index("unmask")
    assert "request_unmask" not in methods
    pki = Pki.issue(_ids(4))
    parties = SecAggregation("e", threat_model=MAL, pki=pki).create_parties(SERVER, _ids(4), 2)
    assert parties.clients["c01"].registry is pki.registry
    with pytest.raises(ValueError, match="threat_model"):
        SecAggregation("e", threat_model="evil")


class Tamper:
    """A transmit that rewrites the key list one client receives (the server's position)."""

    def __init__(self, victim: str, edit: Callable[[Envelope], None]) -> None:
        self.victim, self.edit = victim, edit

    def __call__(self, envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            if env.tag == TAG_KEYLIST and env.receiver == self.victim:
                self.edit(env)
        return out


def _flip_key(env: Envelope) -> None:
    env.payload.fields["c_pk"][0, 5] ^= 1


def _own_keys(env: Envelope) -> None:  # the server's own keys for the first peer
    from protocols.crypto.keyagreement import KeyPair

    env.payload.fields["s_pk"][0] = np.frombuffer(KeyPair.generate().public, np.uint8)


@pytest.mark.parametrize("edit", [_flip_key, _own_keys], ids=["tampered", "substituted"])
def test_altered_keys_are_refused_only_in_malicious_mode(edit) -> None:
    n, d = 5, 3
    inputs = _inputs(n, d)
    with pytest.raises(SignatureError, match="keys of c01: signature of 'c01' does not verify"):
        protocol = SecAggregation("exp-t", threat_model=MAL)
        aggregate(protocol, protocol.create_parties(SERVER, _ids(n), d), 0, inputs,
                  transmit=Tamper("c00", edit))  # fmt: skip
    # honest-but-curious: c00 accepts the altered key and shares its secrets under it (the
    # round fails later, or returns a wrong sum: too late either way)
    protocol = SecAggregation("exp-t")
    parties = protocol.create_parties(SERVER, _ids(n), d)
    try:
        result = aggregate(protocol, parties, 0, inputs, transmit=Tamper("c00", edit))
        assert np.abs(result.mean - _mean(inputs, _ids(n))).max() > 1e-3
    except ProtocolError as err:  # a share that does not open, or a garbage sum
        assert "failed authentication" in str(err) or "not positive" in str(err)
    assert parties.clients["c00"]._self_seed is not None  # it did share its secrets


def test_replayed_keys_from_another_round_or_experiment_are_refused() -> None:
    n, d = 5, 3
    pki = Pki.issue(_ids(n))
    kept: dict[str, Envelope] = {}

    def record(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        kept.update({e.receiver: e for e in out if e.tag == TAG_KEYLIST})
        return out

    def replay(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for i, env in enumerate(out):
            if env.tag == TAG_KEYLIST and env.receiver == "c00":
                old = kept["c00"].payload
                old.meta["round"] = env.payload.meta["round"]  # the server rewrites the round
                out[i] = Envelope(env.sender, env.receiver, env.tag, old)
        return out

    first = SecAggregation("exp-r", threat_model=MAL, pki=pki)
    aggregate(first, first.create_parties(SERVER, _ids(n), d), 0, _inputs(n, d), record)
    for experiment, round_idx in (("exp-r", 1), ("exp-other", 0)):
        protocol = SecAggregation(experiment, threat_model=MAL, pki=pki)
        with pytest.raises(SignatureError, match="does not verify"):
            aggregate(protocol, protocol.create_parties(SERVER, _ids(n), d), round_idx,
                      _inputs(n, d), replay)  # fmt: skip


@pytest.mark.parametrize(
    ("strip_macs", "refusal"),
    [(True, "consistency signature: signature of 'c0[1-6]'"),  # falls back to signatures
     (False, "endorsement of 'c0[1-6]' does not verify")],
)  # fmt: skip
def test_inconsistent_survivor_sets_are_refused_before_any_share(strip_macs, refusal) -> None:
    """The server shows one client a survivor set without c04: that client refuses to
    unmask (its quorum signed another set), and nobody answers the unmask request with
    shares of a client listed differently elsewhere."""
    n, d = 7, 3
    protocol = SecAggregation("exp-c", threat_model=MAL)

    def split(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            if env.tag == TAG_CONSISTENCY and env.receiver == "c00":
                env.payload.meta["u3"] = [c for c in env.payload.meta["u3"] if c != "c04"]
            if env.tag == TAG_UNMASK_REQUEST and env.receiver == "c00":  # hide c04's signature
                keep = [i for i, c in enumerate(env.payload.meta["signers"]) if c != "c04"]
                env.payload.meta["signers"] = [env.payload.meta["signers"][i] for i in keep]
                env.payload.fields["sig"] = env.payload.fields["sig"][keep]
                if strip_macs:  # c00 falls back to the signatures
                    env.payload.meta.pop("mac_from")
                    env.payload.fields.pop("mac")
                else:
                    mac_from = env.payload.meta["mac_from"]
                    keep = [i for i, c in enumerate(mac_from) if c != "c04"]
                    env.payload.meta["mac_from"] = [mac_from[i] for i in keep]
                    env.payload.fields["mac"] = env.payload.fields["mac"][keep]
        return out

    parties = protocol.create_parties(SERVER, _ids(n), d)
    with pytest.raises(SignatureError, match=refusal):
        aggregate(protocol, parties, 0, _inputs(n, d), split)
    unmask_sent = [c for c in _ids(n) if parties.clients[c]._answered]
    assert unmask_sent == []


def test_statement_must_match_the_clients_view() -> None:
    n, d = 6, 2
    protocol = SecAggregation("exp-v", threat_model=MAL)

    def lie(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            if env.tag == TAG_CONSISTENCY and env.receiver == "c01":
                for key in ("u2", "u3"):
                    env.payload.meta[key] = [c for c in env.payload.meta[key] if c != "c03"]
        return out

    with pytest.raises(ProtocolError, match="routed shares inconsistently"):
        aggregate(protocol, protocol.create_parties(SERVER, _ids(n), d), 0, _inputs(n, d), lie)


def test_a_client_signs_once_and_never_unmasks_unsigned() -> None:
    n, d = 5, 2
    protocol = SecAggregation("exp-o", threat_model=MAL)
    parties = protocol.create_parties(SERVER, _ids(n), d)
    seen: list[Envelope] = []

    def again(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        seen.extend(e for e in out if e.tag == TAG_CONSISTENCY)
        if out and out[0].tag == TAG_UNMASK_REQUEST:  # a second statement instead
            return [seen[0]]
        return out

    with pytest.raises(ProtocolError, match="expected one 'secagg/unmask-request'"):
        aggregate(protocol, parties, 0, _inputs(n, d), again)
    client = parties.clients["c00"]
    with pytest.raises(ProtocolError, match="second survivor set"):
        client.sign_survivors([seen[0]])


@pytest.mark.parametrize(("n", "k"), [(9, None), (30, 6)])
def test_quorum_checks_only_what_it_needs(n: int, k: int | None) -> None:
    pki = Pki.issue(_ids(n))
    config = (SecAggregation if k is None else SecAggPlus)("q", **({"k": k} if k else {}))
    cfg = config.config_for(n)
    info = RoundInfo.build(cfg, 0, _ids(n))
    stmt = survivor_statement(cfg, 0, _ids(n), _ids(n), _ids(n), bytes(32))
    sigs = {c: pki.identity(c).sign(stmt) for c in _ids(n)}
    me = "c00"
    targets = [me, *info.graph.neighbours(me)]
    checked: list[str] = []

    def verify(signer: str) -> None:
        pki.registry.verify(signer, stmt, sigs[signer], "test")
        checked.append(signer)

    count = check_quorum(verify, sigs, info.graph, targets, info.t, me, me)
    bound = info.t - 1 if k is None else info.graph.holders_per_client - 1
    assert count == len(checked) <= bound
    # MAC endorsements first: without dropouts the neighbours alone meet every quorum
    checked.clear()
    check_quorum(verify, sigs, info.graph, targets, info.t, me, me,
                 cheap=info.graph.neighbours(me))  # fmt: skip
    assert set(checked) <= set(info.graph.neighbours(me))
    sigs["c01" if k is None else info.graph.neighbours(me)[0]] = bytes(64)
    with pytest.raises(SignatureError):
        check_quorum(verify, sigs, info.graph, targets, info.t, me, me)


@pytest.mark.parametrize("protocol", [SecAggregation("exp-e", threat_model=MAL),
                                      SecAggPlus("exp-e", k=4, threat_model=MAL)])  # fmt: skip
def test_endorsements_replace_signature_checks_and_a_forged_one_aborts(protocol, monkeypatch):
    n, d = 9, 3
    inputs = _inputs(n, d)
    calls: list[str] = []
    verify = KeyRegistry.verify

    def counting(self, party_id, message, signature, what=""):
        calls.append(what)
        return verify(self, party_id, message, signature, what)

    monkeypatch.setattr(KeyRegistry, "verify", counting)
    result = aggregate(protocol, protocol.create_parties(SERVER, _ids(n), d), 0, inputs)
    np.testing.assert_allclose(result.mean, _mean(inputs, _ids(n)), atol=1e-5)
    assert not [w for w in calls if "consistency" in w]  # every quorum met by MACs

    def forge(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            if env.tag == TAG_UNMASK_REQUEST and env.receiver == "c00":
                env.payload.fields["mac"][0, 0] ^= 1
        return out

    parties = protocol.create_parties(SERVER, _ids(n), d)
    with pytest.raises(SignatureError, match="endorsement of .* does not verify"):
        aggregate(protocol, parties, 0, inputs, forge)
    assert not parties.clients["c00"]._answered


@pytest.mark.parametrize("threat_model", ["honest-but-curious", MAL])
def test_a_client_refuses_a_reused_round_index(threat_model) -> None:
    n, d = 4, 2
    protocol = SecAggregation("exp-u", threat_model=threat_model)
    parties = protocol.create_parties(SERVER, _ids(n), d)
    aggregate(protocol, parties, 3, _inputs(n, d))
    with pytest.raises(ProtocolError, match="round 3 was already used"):
        parties.clients["c00"].begin_round(3, np.zeros(d), 1.0)
    parties.clients["c00"].begin_round(4, np.zeros(d), 1.0)  # a fresh index is fine


@pytest.mark.parametrize("protocol", [SecAggregation("exp-k", threat_model=MAL),
                                      SecAggPlus("exp-k", k=2, threat_model=MAL)])  # fmt: skip
def test_the_survivor_statement_binds_the_round_keys(protocol) -> None:
    """The server lists other keys for a neighbour of c00 in the statement: c00 refuses to
    sign it, and nobody reveals a share."""
    n, d = 6, 2
    parties = protocol.create_parties(SERVER, _ids(n), d)
    peer = RoundInfo.build(protocol.config_for(n), 0, _ids(n)).graph.neighbours("c00")[0]
    edited: list[str] = []

    def other_keys(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            keys = env.payload.fields.get("keys")
            if env.tag == TAG_CONSISTENCY and env.receiver == "c00" and keys is not None:
                keys = env.payload.fields["keys"] = keys.copy()
                keys[env.payload.meta["keyed"].index(peer), 0] ^= 1
                edited.append(peer)
        return out

    with pytest.raises(ProtocolError, match="round keys other than"):
        aggregate(protocol, parties, 0, _inputs(n, d), other_keys)
    assert edited and not any(c._answered for c in parties.clients.values())
    cfg, ids = protocol.config_for(n), _ids(n)
    assert survivor_statement(cfg, 0, ids, ids, ids, bytes(32)) != survivor_statement(
        cfg, 0, ids, ids, ids, bytes(31) + b"\x01"
    )


def test_an_unmask_request_signed_from_outside_u3_is_refused() -> None:
    """c04 drops before its masked input (in U2, not in U3); the server lists it among the
    signers of c00's unmask request (with a copied signature row). c00 refuses before any
    signature check: the quorum alone would be met by the other endorsements, so c00 would
    otherwise answer."""
    n, d = 7, 2
    protocol = SecAggregation("exp-s", threat_model=MAL)
    parties = protocol.create_parties(SERVER, _ids(n), d)
    added: list[str] = []

    def outsider(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            if env.tag == TAG_UNMASK_REQUEST and env.receiver == "c00":
                assert "c04" not in env.payload.meta["signers"]
                env.payload.meta["signers"] = [*env.payload.meta["signers"], "c04"]
                sig = env.payload.fields["sig"]
                env.payload.fields["sig"] = np.concatenate([sig, sig[:1]])
                added.append("c04")
        return out

    with pytest.raises(ProtocolError, match="signatures from clients outside the signed U3"):
        aggregate(protocol, parties, 0, _inputs(n, d), outsider,
                  dropped={"c04": "masked_input"})  # fmt: skip
    assert added and not parties.clients["c00"]._answered


@pytest.mark.parametrize(
    ("protocol", "n"),
    [(SecAggregation("exp-a", threat_model=MAL), 5),
     (SecAggPlus("exp-a", k=4, threat_model=MAL), 9)],
    ids=["secagg", "secagg+"],
)  # fmt: skip
def test_a_statement_leaving_fewer_than_t_share_holders_is_not_signed(protocol, n) -> None:
    """The server shows c00 a U3 (inside the true U2, so the statement matches c00's view)
    in which only t - 1 of c00's share holders survive (for SecAgg+ plus every
    non-neighbour): c00 refuses to sign it, and nobody reveals a share."""
    d = 2
    info = RoundInfo.build(protocol.config_for(n), 0, _ids(n))
    near = info.graph.neighbours("c00")
    far = [c for c in _ids(n) if c != "c00" and c not in near]
    shown = ["c00", *near[: info.t - 2], *far]
    parties = protocol.create_parties(SERVER, _ids(n), d)

    def few(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            if env.tag == TAG_CONSISTENCY and env.receiver == "c00":
                assert set(shown) <= set(env.payload.meta["u2"])
                env.payload.meta["u3"] = [c for c in env.payload.meta["u3"] if c in shown]
        return out

    with pytest.raises(ProtocolError, match=rf"c00: only {info.t - 1} of its share holders "
                                            rf"survive \(t={info.t}\)"):  # fmt: skip
        aggregate(protocol, parties, 0, _inputs(n, d), few)
    assert parties.clients["c00"]._signed is None
    assert not any(c._answered for c in parties.clients.values())


@pytest.mark.parametrize("threat_model", [MAL, "honest-but-curious"])
def test_a_share_routed_from_a_non_neighbour_is_refused(threat_model) -> None:
    """SecAgg+: the server forwards to c00 a sealed share that a non-neighbour w sealed for
    one of w's own neighbours. c00 holds no key of w and refuses it by name."""
    n, d = 9, 2
    protocol = SecAggPlus("exp-n", k=4, threat_model=threat_model)
    info = RoundInfo.build(protocol.config_for(n), 0, _ids(n))
    far = [c for c in _ids(n) if c != "c00" and c not in info.graph.neighbours("c00")]
    assert far and not info.graph.complete
    parties = protocol.create_parties(SERVER, _ids(n), d)
    injected: list[str] = []

    def misroute(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        if not out or out[0].tag != TAG_ROUTED:
            return out
        blobs = {name: env.payload.fields[name] for env in out for name in env.payload.fields}
        name = next(f"from:{w}" for w in far if f"from:{w}" in blobs)
        for env in out:
            if env.receiver == "c00":
                env.payload.fields[name] = blobs[name]
                injected.append(name)
        return out

    with pytest.raises(ProtocolError, match=r"c00: routed a share from non-neighbour 'c0\d'"):
        aggregate(protocol, parties, 0, _inputs(n, d), misroute)
    assert injected
