"""``securefgl party`` (a party's own process) and ``securefgl deploy`` (the registrar's,
the data owners' and the server's steps); ``docs/deployment.md`` has the recipe."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from securefgl.config import ConfigError

Handler = Callable[[argparse.Namespace], int]


def register_commands(sub: Any) -> dict[str, Handler]:
    party = sub.add_parser(
        "party", help="run one party of a deployment in this process (its own keys and data)"
    )
    party.add_argument("--config", required=True, help="deploy.toml")
    party.add_argument("--party", required=True, help="e.g. client-3 (or server with --keygen)")
    party.add_argument("--keygen", action="store_true",
                       help="make this party's keys if missing, publish the public ones, exit")
    party.add_argument("--publish", help="folder for the public key file (default: keydir)")
    party.add_argument("--supernode", action="store_true",
                       help="also start this party's Flower SuperNode (deploy.toml's superlink)")
    dep = sub.add_parser("deploy", help="registrar, data and server steps of a deployment")
    steps = dep.add_subparsers(dest="step", required=True)
    rk = steps.add_parser("registrar-keygen", help="the registrar's own signing key")
    rk.add_argument("--keydir", required=True, help="its folder (signing.key, mode 0600)")
    reg = steps.add_parser("register", help="sign the registry of the published public keys")
    reg.add_argument("--keydir", required=True, help="the registrar's (registrar-keygen)")
    reg.add_argument("--out", required=True, help="the signed registry to publish")
    reg.add_argument("published", nargs="+", help="the parties' <party>.pub.json files and "
                     "<party>.csr.pem TLS certificate requests (certificates go beside --out)")
    split = steps.add_parser(
        "split", help="demo data: write each client's view of the experiment to its data path"
    )
    split.add_argument("--config", required=True, help="deploy.toml")
    run = steps.add_parser("run", help="the server side: run the experiment over the parties")
    run.add_argument("--config", required=True, help="deploy.toml")
    run.add_argument("--engine", choices=("tls", "sockets", "flower-sim"), default="tls",
                     help="tls: the daemons' addresses over mutual TLS; sockets: their Unix "
                     "sockets on this machine; flower-sim: Flower's simulation engine (the "
                     "flower extra; the deployment engine runs with `flwr run`)")  # fmt: skip
    run.add_argument("--out", help="write the run (result, endpoints, key store) as JSON")
    run.add_argument("--wait", type=float, default=300.0, metavar="S",
                     help="seconds to wait for every party's signed hello (default 300)")
    app = steps.add_parser("flower-app", help="write the Flower app to submit with `flwr run`")
    app.add_argument("--out", required=True, help="folder (created)")
    return {"party": _cmd_party, "deploy": _cmd_deploy}


def _cmd_party(args: argparse.Namespace) -> int:
    from securefgl.deploy import settings
    from securefgl.federation.party import SERVER

    if args.publish and not args.keygen:
        raise ConfigError("--publish goes with --keygen")
    if args.keygen and args.supernode:
        raise ConfigError("--supernode starts a SuperNode beside the daemon: not with --keygen")
    deploy = settings.load(args.config)
    if args.keygen:
        from securefgl.deploy.keygen import keygen

        keydir = deploy.server_keydir if args.party == SERVER else deploy.party(args.party).keydir
        print("\n".join(keygen(args.party, keydir, Path(args.publish) if args.publish else None)))
        return 0
    import signal

    from securefgl.deploy.daemon import PartyDaemon, serve

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a clean stop removes the socket
    daemon = PartyDaemon(deploy, args.party)
    node = None
    if args.supernode:
        from securefgl import extras
        from securefgl.deploy.flower_launch import start_supernode

        extras.check("flower", "--supernode")

        node = start_supernode(deploy, args.party)
    try:
        serve(daemon, announce=lambda line: print(line, flush=True))
    finally:
        if node is not None:
            node.terminate()
    return 0


def _cmd_deploy(args: argparse.Namespace) -> int:
    from securefgl.deploy import keys

    if args.step == "flower-app":  # needs no deploy.toml
        from securefgl.deploy.flower_launch import write_flower_app

        print(write_flower_app(Path(args.out)))
        return 0
    if args.step == "registrar-keygen":
        identity = keys.own_identity(Path(args.keydir), keys.REGISTRAR)
        print(identity.public.hex())
        return 0
    if args.step == "register":
        registrar = keys.own_identity(Path(args.keydir), keys.REGISTRAR, create=False)
        files = [Path(p) for p in args.published]
        if odd := [str(p) for p in files if not p.name.endswith((".pub.json", ".csr.pem"))]:
            raise ConfigError(f"register takes <party>.pub.json and <party>.csr.pem files, "
                              f"not {', '.join(odd)}")  # fmt: skip
        published = keys.read_published([p for p in files if p.name.endswith(".pub.json")])
        if not published:
            raise ConfigError("register: no <party>.pub.json among the files")
        out = Path(args.out)
        requests = [p for p in files if p.name.endswith(".csr.pem")]
        issued: dict[str, tuple[Path, str]] = {}
        if requests:
            from securefgl.deploy.tls import issue

            try:
                issued = issue(Path(args.keydir), requests, out.parent, list(published))
            except ValueError as err:
                raise ConfigError(f"register: {err}") from None
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(keys.sign_registry(published, registrar))
        for pid, key in sorted(published.items()):
            print(f"{pid}: signing key {keys.fingerprint(key)}")
        for pid, (cert, tls_key) in sorted(issued.items()):
            print(f"{pid}: TLS key {tls_key}, certificate {cert}")
        return 0
    from securefgl.deploy import settings

    deploy = settings.load(args.config)
    if args.step == "split":
        from securefgl.deploy.data import split_for_deployment, write_view

        for pid, view in split_for_deployment(deploy.experiment, deploy.seed).items():
            target = deploy.party(pid).data
            if target is not None:
                print(f"{pid}: {write_view(view, target)}")
        return 0
    return _run(deploy, args)


def _run(deploy: Any, args: argparse.Namespace) -> int:

    logging.getLogger("securefgl").setLevel(logging.INFO)
    if args.engine == "flower-sim":
        from securefgl import extras

        extras.check("flower", "--engine flower-sim")
        extras.check("ray", "--engine flower-sim (Flower's simulation engine)")
        from securefgl.deploy.flower_server import run_simulation

        run = run_simulation(deploy)
    elif args.engine == "tls":
        from securefgl.deploy.driver import run_deployment
        from securefgl.deploy.tls import TlsTransport, server_context

        addresses = [p.address for p in deploy.parties.values()]
        if deploy.tls_ca is None or None in addresses:
            raise ConfigError("--engine tls needs [deployment] tls_ca and every party's address")
        ctx = server_context(deploy.server_keydir, deploy.tls_ca)
        run = run_deployment(deploy, TlsTransport([str(a) for a in addresses], ctx),
                             wait=args.wait)  # fmt: skip
    else:
        from securefgl.deploy.driver import run_deployment
        from securefgl.deploy.sockets import SocketTransport

        sockets = [p.socket for p in deploy.parties.values()]
        run = run_deployment(deploy, SocketTransport(sockets), wait=args.wait)
    from securefgl.experiment.results import dumps_strict

    text = dumps_strict(run.to_dict(), indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(dumps_strict(run.result.final), file=sys.stdout)
    return 0
