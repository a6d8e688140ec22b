"""A party's key generation publishes exactly the public halves its peers need."""

from __future__ import annotations

from pathlib import Path

from securefgl.deploy.keygen import keygen
from securefgl.federation import SERVER


def test_keygen_publishes_public_halves_only(tmp_path: Path) -> None:
    keydir, outbox = tmp_path / "keys", tmp_path / "outbox"
    keydir.mkdir()
    outbox.mkdir()
    lines = keygen("client-3", keydir, outbox)
    published = sorted(path.name for path in outbox.iterdir())
    assert published == ["client-3.csr.pem", "client-3.pub.json", "client-3.supernode.key.pub"]
    assert (outbox / "client-3.supernode.key.pub").read_bytes().startswith(b"ecdsa-sha2-nistp384 ")
    assert not any(b"PRIVATE" in (outbox / name).read_bytes() for name in published)
    assert any(str(outbox / "client-3.supernode.key.pub") in line for line in lines)


def test_the_server_publishes_no_supernode_key(tmp_path: Path) -> None:
    keydir, outbox = tmp_path / "keys", tmp_path / "outbox"
    keydir.mkdir()
    outbox.mkdir()
    keygen(SERVER, keydir, outbox)
    assert not list(outbox.glob("*supernode*"))
