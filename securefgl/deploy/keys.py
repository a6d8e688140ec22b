"""A party's own keys, and the registrar's signed key registry.

Each party makes its keys in its own process (:func:`own_identity`: an Ed25519 signing
key in ``keydir/signing.key``, mode 0600 in a 0700 folder; :func:`node_key`: the EC P-384
key its Flower SuperNode authenticates with) and publishes only the public halves
(:func:`publish`). The registrar, an organisation that is not the server (or an offline
step all parties trust), checks each published key with its owner out of band, builds the
:class:`~protocols.identity.KeyRegistry` and signs it with its own key
(:func:`sign_registry`); every party and the server pin the registrar's public key in
``deploy.toml`` and accept only a registry it signed (:func:`read_registry`), so the server
cannot register a key of its choosing for anyone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from protocols.identity import Identity, KeyRegistry, SignatureError, statement
from securefgl.federation.codec import decode_value, encode_value

SIGNING_KEY = "signing.key"
NODE_KEY = "supernode.key"
REGISTRY_DOMAIN = "securefgl/deploy/registry/v1"
REGISTRAR = "registrar"


def _private_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def check_private(path: Path) -> Path:
    """``path``, a private key file: :class:`PermissionError` if others can read it or its
    folder (the key files are 0600 in a 0700 keydir), :class:`FileNotFoundError` naming it
    if it is missing."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such key file")
    if path.stat().st_mode & 0o077:
        raise PermissionError(f"{path} is readable by others: chmod 600 it")
    if path.parent.stat().st_mode & 0o077:
        raise PermissionError(f"{path.parent} is open to others: chmod 700 it")
    return path


def own_identity(keydir: Path, party_id: str, create: bool = True) -> Identity:
    """``party_id``'s signing key from ``keydir``, made here on first use (``create``)."""
    path = Path(keydir) / SIGNING_KEY
    if path.exists():
        return Identity.from_private_bytes(party_id, check_private(path).read_bytes())
    if not create:
        raise FileNotFoundError(f"{path}: no signing key (securefgl party --keygen makes it)")
    identity = Identity.generate(party_id)
    _private_write(path, identity.private_bytes())
    return identity


def node_key(keydir: Path) -> tuple[Path, Path]:
    """The SuperNode's authentication key (EC P-384, OpenSSH format, as Flower reads it),
    made on first use; (private key path, public key path)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private, public = Path(keydir) / NODE_KEY, Path(keydir) / f"{NODE_KEY}.pub"
    if private.exists():
        check_private(private)
    else:
        key = ec.generate_private_key(ec.SECP384R1())
        _private_write(private, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        ))  # fmt: skip
        public.write_bytes(key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) + b"\n"
        )  # fmt: skip
    return private, public


def publish(identity: Identity, folder: Path) -> Path:
    """The public half of ``identity`` as ``folder/<party>.pub.json`` (what goes to the
    registrar); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{identity.party_id}.pub.json"
    record = {"party": identity.party_id, "ed25519": identity.public.hex()}
    path.write_text(json.dumps(record, sort_keys=True) + "\n")
    return path


def fingerprint(public: bytes) -> str:
    """A short fingerprint of a public key, to read out to its owner."""
    import hashlib

    digest = hashlib.sha256(public).hexdigest()[:32]
    return ":".join(digest[i : i + 4] for i in range(0, 32, 4))


def read_published(paths: list[Path]) -> dict[str, bytes]:
    keys: dict[str, bytes] = {}
    for path in paths:
        record = json.loads(Path(path).read_text())
        pid, key = str(record["party"]), bytes.fromhex(record["ed25519"])
        if pid in keys:
            raise ValueError(f"two published keys for {pid}")
        keys[pid] = key
    return keys


def _registry_statement(registry: KeyRegistry) -> bytes:
    return statement(REGISTRY_DOMAIN, "", None, "registry", registry.registrar,
                     {"fingerprint": registry.fingerprint})  # fmt: skip


def sign_registry(keys: dict[str, bytes], registrar: Identity) -> bytes:
    """The registry of ``keys`` signed by the registrar (wire bytes)."""
    registry = KeyRegistry(keys, REGISTRAR)
    signature = registrar.sign(_registry_statement(registry))
    return encode_value({"registry": registry.to_wire(), "signature": signature})


def read_registry(path: Path, registrar_key: str) -> KeyRegistry:
    """The registry in ``path``, if the registrar whose public key is ``registrar_key``
    (hex, pinned in deploy.toml) signed it; :class:`SignatureError` otherwise."""
    try:
        pinned = bytes.fromhex(registrar_key)
    except ValueError:
        raise SignatureError("registrar_key in deploy.toml is not a hex public key") from None
    data: dict[str, Any] = decode_value(Path(path).read_bytes())
    registry = KeyRegistry.from_wire(data["registry"])
    check = KeyRegistry({REGISTRAR: pinned}, REGISTRAR)
    check.verify(REGISTRAR, _registry_statement(registry), data.get("signature"), "registry")
    return registry
