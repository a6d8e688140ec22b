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


def test_register_signs_into_a_new_folder_and_certifies_registered_names_only(tmp_path, capsys):
    from securefgl.cli import main

    assert main(["deploy", "registrar-keygen", "--keydir", str(tmp_path / "registrar")]) == 0
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for party in ("client-0", "server"):
        (tmp_path / party).mkdir()
        keygen(party, tmp_path / party, inbox)
    out = tmp_path / "published" / "registry.signed"  # published/ does not exist yet
    argv = ["deploy", "register", "--keydir", str(tmp_path / "registrar"), "--out", str(out)]
    stray = inbox / "server.pub.json"
    stray.rename(tmp_path / "held-back.json")  # the server's key not registered...
    files = [*inbox.glob("*.pub.json"), *inbox.glob("*.csr.pem")]
    assert main([*argv, *map(str, files)]) == 2  # ...but its CSR sent
    assert "'server', which has no registered key" in capsys.readouterr().err
    assert not out.exists()  # nothing signed or issued for a refused batch
    (tmp_path / "held-back.json").rename(stray)
    assert main([*argv, str(stray), *map(str, files)]) == 0
    printed = capsys.readouterr().out
    assert out.is_file() and "client-0: TLS key " in printed and "server: signing key" in printed


def test_flower_app_needs_no_deploy_toml(tmp_path, capsys):
    from securefgl.cli import main

    assert main(["deploy", "flower-app", "--out", str(tmp_path / "app")]) == 0
    assert any((tmp_path / "app").iterdir())
