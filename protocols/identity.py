"""Party identities against an actively malicious server: Ed25519 keys and a key registry.

Bonawitz et al. (CCS 2017, Sec. 6, the actively secure variant) assume a PKI: every party
holds a long-term signing key whose public half reaches the others through a party they
trust, never through the server. Here that registrar is the experiment (the simulator,
which also creates every party's state): :meth:`Pki.issue` draws one Ed25519 key per party
(``cryptography``, OS randomness) and publishes a :class:`KeyRegistry` (party id -> public
key) to all parties. Each party's private :class:`Identity` is installed in a
process-local keystore (:func:`local_identity`), as a party's own machine would hold it;
only the registry travels (e.g. inside a secure-sum spec); :func:`clear_keystore` (or
:meth:`Pki.clear`) forgets them when the run ends. When parties live in other
processes (the Ray executor), the registrar provisions each party's key to the one process
that hosts it, and that process sees every other party through :meth:`Pki.held` (public
keys only).

Every signed message is a :func:`statement`: canonical JSON binding a domain (protocol),
the experiment id, the round, the protocol step, the signer and the content (public keys,
id lists, digests), so a tampered, replayed (other round, step or experiment) or
impersonated message fails :meth:`KeyRegistry.verify` with :class:`SignatureError`.

Threat model: the server may drop, reorder, replay, alter or inject any message; it holds
no client's signing key. Unverified: the registrar itself is trusted (it could register a
key of its choosing for any party); no revocation, rotation or key expiry; signatures do
not make a party's *content* honest (a malicious client may sign bad inputs).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from protocols.base import ProtocolError
from protocols.names import HONEST_BUT_CURIOUS as HONEST_BUT_CURIOUS  # re-exported
from protocols.names import MALICIOUS as MALICIOUS
from protocols.names import THREAT_MODELS

PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
DEFAULT_REGISTRAR = "experiment"


class SignatureError(ProtocolError):
    """A signature is missing, malformed, from an unregistered party or does not verify."""


def check_threat_model(threat_model: object) -> str:
    """``threat_model`` if it is one of :data:`THREAT_MODELS`, else ``ValueError``."""
    if threat_model not in THREAT_MODELS:
        raise ValueError(f"threat_model must be one of {THREAT_MODELS}, got {threat_model!r}")
    return str(threat_model)


def digest(*parts: bytes) -> bytes:
    """SHA-256 over length-prefixed parts (no ambiguity between concatenations)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()


def _canonical(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, list | tuple):
        if all(type(v) is str for v in value):  # id lists: the common case, no recursion
            return list(value)
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    if value is None or isinstance(value, bool | int | str):
        return value
    raise TypeError(f"cannot sign a {type(value).__name__}")


def statement(
    domain: str, experiment_id: str, round_idx: int | None, step: str, signer: str, *content: Any
) -> bytes:
    """The bytes a party signs: ``[version, domain, experiment, round, step, signer,
    content...]`` as canonical JSON (bytes as hex; pass large blobs as :func:`digest`)."""
    return json.dumps(
        [
            "securefgl/signed/v1",
            domain,
            experiment_id,
            round_idx,
            step,
            signer,
            *(_canonical(c) for c in content),
        ],
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


class Identity:
    """A party's long-term Ed25519 signing key (it leaves the registrar only for the one
    process that hosts its owner)."""

    __slots__ = ("_key", "party_id", "public")

    def __init__(self, party_id: str, key: Ed25519PrivateKey) -> None:
        self.party_id = party_id
        self._key = key
        self.public = key.public_key().public_bytes_raw()

    @classmethod
    def generate(cls, party_id: str) -> Identity:
        return cls(party_id, Ed25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, party_id: str, raw: bytes) -> Identity:
        return cls(party_id, Ed25519PrivateKey.from_private_bytes(raw))

    def private_bytes(self) -> bytes:
        """The raw private key: only for the registrar to provision the party's own process."""
        return self._key.private_bytes_raw()

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)

    def __repr__(self) -> str:
        return f"Identity({self.party_id!r}, public={self.public.hex()[:16]}...)"


class ForeignIdentity(Identity):
    """Another party's registered public key, in a process where that party does not live:
    protocol objects built here for it (never called) hold this, which cannot sign."""

    __slots__ = ()

    def __init__(self, party_id: str, public: bytes) -> None:
        self.party_id, self.public, self._key = party_id, public, None

    def private_bytes(self) -> bytes:
        raise ProtocolError(f"{self.party_id!r} does not live in this process: no key here")

    def sign(self, message: bytes) -> bytes:
        raise ProtocolError(f"{self.party_id!r} does not live in this process: no key here")


@dataclass(frozen=True)
class KeyRegistry:
    """Party id -> Ed25519 public key, as published by the registrar (not the server)."""

    keys: Mapping[str, bytes]
    registrar: str = DEFAULT_REGISTRAR
    _parsed: dict[str, Ed25519PublicKey] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys = dict(self.keys)
        for pid, key in keys.items():
            if not isinstance(pid, str) or not isinstance(key, bytes):
                raise ValueError("a key registry maps party ids (str) to raw public keys")
            if len(key) != PUBLIC_KEY_BYTES:
                raise ValueError(f"Ed25519 public key of {pid!r} has {len(key)} bytes")
        if len(set(keys.values())) != len(keys):
            raise ValueError("two parties share one signing key")
        object.__setattr__(self, "keys", MappingProxyType(keys))

    def __contains__(self, party_id: object) -> bool:
        return party_id in self.keys

    @property
    def fingerprint(self) -> bytes:
        items = sorted(self.keys.items())
        return digest(self.registrar.encode(), *(p.encode() + k for p, k in items))

    def verify(self, party_id: str, message: bytes, signature: object, what: str = "") -> None:
        """Raise :class:`SignatureError` unless ``signature`` is ``party_id``'s on
        ``message``."""
        label = what or "message"
        key = self.keys.get(party_id) if isinstance(party_id, str) else None
        if key is None:
            raise SignatureError(f"{label}: {party_id!r} is not in the key registry")
        if not isinstance(signature, bytes) or len(signature) != SIGNATURE_BYTES:
            raise SignatureError(f"{label}: missing or malformed signature of {party_id!r}")
        public = self._parsed.get(party_id)
        if public is None:
            public = self._parsed[party_id] = Ed25519PublicKey.from_public_bytes(key)
        try:
            public.verify(signature, message)
        except InvalidSignature:
            raise SignatureError(
                f"{label}: signature of {party_id!r} does not verify (tampered, replayed from "
                "another round, step or experiment, or not sent by it)"
            ) from None

    def to_wire(self) -> dict[str, Any]:
        return {"registrar": self.registrar, "keys": dict(self.keys)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> KeyRegistry:
        return cls(dict(data["keys"]), str(data.get("registrar", DEFAULT_REGISTRAR)))


#: process-local keystore: (registry fingerprint, party id) -> that party's identity
_KEYSTORE: dict[tuple[bytes, str], Identity] = {}


def install_identity(registry: KeyRegistry, identity: Identity) -> None:
    """Put ``identity`` in this process's keystore (as its registered party)."""
    if registry.keys.get(identity.party_id) != identity.public:
        raise ValueError(f"{identity.party_id!r}: identity does not match the registry")
    _KEYSTORE[registry.fingerprint, identity.party_id] = identity


def install_provisioned(provisioning: Mapping[str, Any], party_id: str) -> None:
    """Install ``party_id``'s key from :meth:`Pki.provisioning` (nothing if it has none)."""
    raw = provisioning["keys"].get(party_id)
    if raw is not None:
        registry = KeyRegistry.from_wire(provisioning["registry"])
        install_identity(registry, Identity.from_private_bytes(party_id, raw))


def clear_keystore(registry: KeyRegistry | None = None) -> int:
    """Forget the signing keys this process holds for ``registry`` (None: every registry),
    when the run that needed them ends; returns how many were removed. The key objects are
    dropped, not wiped: Python and OpenSSL may keep copies until the memory is reused."""
    doomed = [k for k in _KEYSTORE if registry is None or k[0] == registry.fingerprint]
    for key in doomed:
        del _KEYSTORE[key]
    return len(doomed)


def keystore_parties() -> list[str]:
    """The parties whose signing keys this process holds (any registry)."""
    return sorted({pid for _, pid in _KEYSTORE})


def local_identity(registry: KeyRegistry, party_id: str) -> Identity:
    """``party_id``'s signing key for ``registry`` from this process's keystore."""
    try:
        return _KEYSTORE[registry.fingerprint, party_id]
    except KeyError:
        raise ProtocolError(
            f"{party_id!r} holds no signing key for this key registry (malicious-server mode "
            "needs the experiment's Pki.issue in this process)"
        ) from None


@dataclass(frozen=True)
class Pki:
    """The registrar's output: the public registry and every party's identity."""

    registry: KeyRegistry
    identities: Mapping[str, Identity]

    @classmethod
    def issue(cls, party_ids: Iterable[str], registrar: str = DEFAULT_REGISTRAR) -> Pki:
        """Fresh Ed25519 keys for ``party_ids``, installed in this process's keystore."""
        ids = list(dict.fromkeys(party_ids))
        identities = {pid: Identity.generate(pid) for pid in ids}
        registry = KeyRegistry({pid: i.public for pid, i in identities.items()}, registrar)
        for identity in identities.values():
            install_identity(registry, identity)
        return cls(registry, MappingProxyType(identities))

    @classmethod
    def held(cls, registry: KeyRegistry) -> Pki:
        """``registry`` as seen from this process: the identities its keystore holds (the
        parties that live here, provisioned by the registrar), the others public only."""
        fp = registry.fingerprint
        identities: dict[str, Identity] = {
            pid: _KEYSTORE.get((fp, pid)) or ForeignIdentity(pid, key)
            for pid, key in registry.keys.items()
        }
        return cls(registry, MappingProxyType(identities))

    def identity(self, party_id: str) -> Identity:
        try:
            return self.identities[party_id]
        except KeyError:
            raise ValueError(f"{party_id!r} has no identity in this PKI") from None

    def provisioning(self, party_ids: Iterable[str]) -> dict[str, Any]:
        """Wire data that lets another process hold some of these parties' keys: the
        registry and each listed party's private key (:func:`install_provisioned`, which
        installs only the key of the party it is given)."""
        keys = {p: self.identities[p].private_bytes() for p in party_ids if p in self.identities}
        return {"registry": self.registry.to_wire(), "keys": keys}

    def covers(self, party_ids: Sequence[str]) -> bool:
        return all(p in self.identities for p in party_ids)

    def clear(self) -> int:
        """Remove this PKI's keys from this process's keystore (:func:`clear_keystore`)."""
        return clear_keystore(self.registry)
