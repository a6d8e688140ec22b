"""A party makes its own keys: ``python -m securefgl.deploy.keygen --party client-3
--keydir keys/client-3 --publish published/`` (what ``securefgl party --keygen`` does,
without reading deploy.toml, so it starts fast)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from securefgl.deploy import keys
from securefgl.deploy.tls import request_fingerprint, tls_request
from securefgl.federation.party import SERVER


def keygen(party_id: str, keydir: Path, publish: Path | None = None) -> list[str]:
    """Make ``party_id``'s keys in ``keydir`` if missing; publish the public signing key,
    the TLS certificate request and (clients) the SuperNode's public key; what to tell the
    registrar and the SuperLink's operator."""
    identity = keys.own_identity(keydir, party_id)
    path = keys.publish(identity, Path(publish or keydir))
    lines = [f"{party_id}: signing key {keys.fingerprint(identity.public)} -> {path}"]
    request = tls_request(keydir, party_id, Path(publish or keydir))
    lines.append(f"{party_id}: TLS key {request_fingerprint(request)}, certificate request -> "
                 f"{request} (for the registrar)")  # fmt: skip
    if party_id != SERVER:  # the server organisation runs the SuperLink, not a SuperNode
        _, node_pub = keys.node_key(keydir)
        if publish is not None:  # the public half only, named by its party
            published = Path(publish) / f"{party_id}.{node_pub.name}"
            published.write_bytes(node_pub.read_bytes())
            node_pub = published
        lines.append(f"{party_id}: SuperNode key -> {node_pub} (for the SuperLink's operator)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m securefgl.deploy.keygen")
    parser.add_argument("--party", required=True)
    parser.add_argument("--keydir", required=True, type=Path)
    parser.add_argument("--publish", type=Path)
    args = parser.parse_args(argv)
    print("\n".join(keygen(args.party, args.keydir, args.publish)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
