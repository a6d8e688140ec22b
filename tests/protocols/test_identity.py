"""Party identities: Ed25519 signatures over statements bound to experiment, round, step."""

from __future__ import annotations

import pytest

from protocols.base import ProtocolError
from protocols.identity import (
    Identity,
    KeyRegistry,
    Pki,
    SignatureError,
    check_threat_model,
    install_provisioned,
    local_identity,
    statement,
)


@pytest.fixture
def pki() -> Pki:
    return Pki.issue(["server", "c0", "c1"])


def test_signature_verifies_only_the_statement_it_signed(pki: Pki) -> None:
    msg = statement("secagg", "exp", 3, "keys", "c0", b"\x01" * 32)
    sig = pki.identity("c0").sign(msg)
    pki.registry.verify("c0", msg, sig)
    variants = {
        "tampered content": statement("secagg", "exp", 3, "keys", "c0", b"\x02" * 32),
        "replayed round": statement("secagg", "exp", 4, "keys", "c0", b"\x01" * 32),
        "other experiment": statement("secagg", "exp2", 3, "keys", "c0", b"\x01" * 32),
        "other step": statement("secagg", "exp", 3, "consistency", "c0", b"\x01" * 32),
        "other protocol": statement("ckks", "exp", 3, "keys", "c0", b"\x01" * 32),
    }
    for what, other in variants.items():
        with pytest.raises(SignatureError, match="does not verify"):
            pki.registry.verify("c0", other, sig, what)


def test_impersonation_and_unknown_parties_are_refused(pki: Pki) -> None:
    msg = statement("secagg", "exp", 0, "keys", "c1", b"k")
    forged = pki.identity("server").sign(msg)  # the server signs in c1's name
    with pytest.raises(SignatureError, match="'c1' does not verify"):
        pki.registry.verify("c1", msg, forged)
    with pytest.raises(SignatureError, match="not in the key registry"):
        pki.registry.verify("c9", msg, forged)
    for bad in (None, b"", b"\0" * 63, "x" * 64):
        with pytest.raises(SignatureError, match="malformed"):
            pki.registry.verify("c1", msg, bad)


def test_registry_round_trips_and_keystore_holds_each_identity(pki: Pki) -> None:
    again = KeyRegistry.from_wire(pki.registry.to_wire())
    assert again == pki.registry and again.fingerprint == pki.registry.fingerprint
    assert local_identity(again, "c0").public == pki.identity("c0").public
    other = Pki.issue(["c0"])  # a second experiment: its own key for the same id
    assert local_identity(other.registry, "c0").public != pki.identity("c0").public
    with pytest.raises(ValueError, match="share one signing key"):
        KeyRegistry({"a": b"\1" * 32, "b": b"\1" * 32})
    with pytest.raises(ValueError, match="33 bytes"):
        KeyRegistry({"a": b"\1" * 33})
    assert "c0" in pki.registry and "nobody" not in pki.registry
    assert "Identity('c0'" in repr(pki.identity("c0"))  # no private key in the repr


def test_threat_model_names() -> None:
    assert check_threat_model("malicious") == "malicious"
    with pytest.raises(ValueError, match="threat_model"):
        check_threat_model("paranoid")


def test_a_process_holds_only_the_keys_provisioned_to_it() -> None:
    """The registrar's keys reach another process one party at a time; that process sees
    the rest of the registry as public keys that cannot sign."""
    issued = {p: Identity.generate(p) for p in ("server", "c0", "c1")}  # not installed here
    registry = KeyRegistry({p: i.public for p, i in issued.items()})
    pki = Pki(registry, issued)
    provisioning = pki.provisioning(["c0", "elsewhere"])
    assert set(provisioning["keys"]) == {"c0"}
    before = Pki.held(registry)
    with pytest.raises(ProtocolError, match="does not live in this process"):
        before.identity("c0").sign(b"m")
    install_provisioned(provisioning, "c1")  # c1 has no key in it: nothing installed
    install_provisioned(provisioning, "c0")
    held = Pki.held(registry)
    msg = statement("secagg", "exp", 0, "keys", "c0", b"\x01")
    registry.verify("c0", msg, held.identity("c0").sign(msg))
    assert held.identity("c0").public == issued["c0"].public
    for other in ("server", "c1"):
        with pytest.raises(ProtocolError, match="does not live in this process"):
            held.identity(other).sign(msg)


def test_the_keystore_is_cleared_when_the_run_ends() -> None:
    from protocols.identity import clear_keystore, keystore_parties

    ended, other = Pki.issue(["ended-a", "ended-b"]), Pki.issue(["still-running"])
    assert local_identity(ended.registry, "ended-a") is ended.identity("ended-a")
    assert ended.clear() == 2
    with pytest.raises(ProtocolError, match="holds no signing key"):
        local_identity(ended.registry, "ended-a")
    with pytest.raises(ProtocolError, match="does not live in this process"):
        Pki.held(ended.registry).identity("ended-b").sign(b"statement")
    assert local_identity(other.registry, "still-running") is other.identity("still-running")
    assert clear_keystore(other.registry) == 1 and "still-running" not in keystore_parties()
