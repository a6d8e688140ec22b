"""A party's own process (``securefgl party --config deploy.toml --party client-3``).

It holds the party's data (its view file), the signing key it made itself, the
registrar's signed registry and the party's protocol state across requests, and answers
the requests of :mod:`securefgl.federation.remote` on a Unix socket (mode 0600) that only
its node's Flower ClientApp (or a local driver) talks to, and, given an ``address``, on a
TCP port that takes only mutual-TLS connections from the server's certificate
(:mod:`securefgl.deploy.tls`). What it checks before it acts, since the driver may be the
adversary:

* a *hello* is answered with the party's id, its public facts and its signature over the
  driver's nonce and the endpoint (so no relay can re-route it);
* a *build* names a party builder of securefgl (:class:`~securefgl.federation.remote.PartyHost`);
  its ``view`` argument (a stub) is replaced by the party's own view; its protocol
  settings must equal this party's deploy.toml, and its key registry the registrar's;
* *calls* are method references to role interfaces of securefgl or protocols only;
* every request of a session carries a larger ``seq`` than the last (no replay);
* the party's signing key sits in this process's keystore under the registrar's registry
  only, so a protocol handed any other registry finds no key to sign with.
"""

from __future__ import annotations

import json
import logging
import os
import socketserver
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from protocols.identity import HONEST_BUT_CURIOUS, install_identity, keystore_parties
from securefgl.config import ConfigError
from securefgl.config.families import check_algorithm
from securefgl.deploy.data import public_facts, read_view
from securefgl.deploy.framing import recv_frame, send_frame
from securefgl.deploy.keys import own_identity, read_registry
from securefgl.deploy.settings import DeploySettings
from securefgl.federation.builders import config_from_json, view_payload
from securefgl.federation.codec import decode_value, encode_value
from securefgl.federation.evaluation import EvaluationHost
from securefgl.federation.party import PartyError, class_path, client_party_id
from securefgl.federation.recipes import Recipe
from securefgl.federation.remote import PartyHost, hello_statement
from securefgl.federation.subnormals import subnormals_flushed

log = logging.getLogger(__name__)


class PartyDaemon:
    """One party's state and request handling (transport-free: :meth:`handle`)."""

    def __init__(self, settings: DeploySettings, party_id: str) -> None:
        self.settings = settings
        self.own = settings.party(party_id)
        self.party_id = party_id
        self.identity = own_identity(self.own.keydir, party_id, create=False)
        self.registry = read_registry(settings.registry, settings.registrar_key)
        if self.registry.keys.get(party_id) != self.identity.public:
            raise ConfigError(f"{party_id}: the registrar's registry does not hold my key")
        install_identity(self.registry, self.identity)
        self.view = read_view(self.own.data) if self.own.data is not None else None
        self.host = PartyHost()
        self.session: str | None = None
        self.seq = 0
        self.lock = threading.Lock()

    def facts(self) -> dict[str, Any]:
        return public_facts(self.view) if self.view is not None else {}

    @subnormals_flushed()  # each request runs on its own thread
    def handle(self, data: bytes) -> bytes:
        request = decode_value(data)
        with self.lock:  # one request at a time, in order
            if request.get("kind") == "hello":
                return encode_value(self._hello(request["nonce"], str(request["where"])))
            if request.get("kind") == "status":  # what this process holds (operators, tests)
                return encode_value({"party": self.party_id, "keystore": keystore_parties(),
                                     "parties": sorted(self.host.parties), "pid": os.getpid()})
            try:
                self._admit(request)
                if request["kind"] == "build":
                    self._build(request["builder"], dict(request["args"]))
                    return encode_value({"results": [["ok", encode_value(None), 0.0]]})
                if request["kind"] == "calls":
                    self._check_calls(request["calls"])
                    calls = [(self.party_id, i, m, a) for i, m, a in request["calls"]]
                    return encode_value({"results": self.host.run(calls)})
                raise PartyError(f"unknown request kind {request.get('kind')!r}")
            except (PartyError, ConfigError, KeyError, TypeError, ValueError) as err:
                log.warning("%s: refused: %s", self.party_id, err)
                return encode_value({"results": [["error", f"refused: {err}".encode(), 0.0]]})

    def _hello(self, nonce: bytes, where: str) -> dict[str, Any]:
        facts = self.facts()
        stmt = hello_statement(nonce, where, self.party_id, facts)
        return {"party": self.party_id, "public": self.identity.public, "meta": facts,
                "signature": self.identity.sign(stmt)}  # fmt: skip

    def _admit(self, request: dict[str, Any]) -> None:
        if request.get("party") != self.party_id:
            raise PartyError(f"this is {self.party_id}, not {request.get('party')!r}")
        session, seq = str(request["session"]), int(request["seq"])
        if request["kind"] == "build" and session != self.session:
            self.session, self.seq = session, 0  # a new run; the old one's parties go
            self.host = PartyHost()
        if session != self.session or seq <= self.seq:
            raise PartyError(f"stale or replayed request (session {session}, seq {seq})")
        self.seq = seq

    def _build(self, builder: str, args: dict[str, Any]) -> None:
        if "view" in args:  # the driver sent a stub: this party's own view goes in its place
            if self.view is None:
                raise PartyError(f"{self.party_id} holds no view")
            stub = args["view"]
            if int(stub.meta.get("client_id", -1)) != self.view.client_id:
                raise PartyError(f"a build for client {stub.meta.get('client_id')}")
            args["view"] = view_payload(self.view)
        stack = args.get("stack")
        if "view" in args:  # a party holding this client's data: only the agreed algorithm's
            mine = self.settings.experiment
            family = check_algorithm(self.settings.algorithm, mine.task).name
            if not builder.startswith(f"securefgl.algorithms.{family}."):
                raise PartyError(f"{builder}: this party's data goes only to "
                                 f"{self.settings.algorithm}'s parties (deploy.toml)")  # fmt: skip
            if not isinstance(stack, dict):
                raise PartyError(f"{builder}: this party's data is served only under the "
                                 "deployment's protocol stack")  # fmt: skip
        if isinstance(stack, dict):
            self._check_stack(stack)
        seeded = [a for a in (args, stack or {}) if a.get("noise_seed") is not None]
        if seeded and not self.settings.experiment.protocol.seeded_noise:
            raise PartyError("the driver sends a noise seed: this party draws its privacy "
                             "noise from its own secret source")  # fmt: skip
        self.host.build(self.party_id, Recipe(builder, args))

    def _check_calls(self, calls: list[Any]) -> None:
        """With ``secure_evaluation`` agreed, no call returns predictions (the evaluation
        reaches the server only as a sum), and a secure evaluation is hosted only in the
        agreed threat model, under the registrar's registry, with every client of the
        federation against a malicious server."""
        experiment = self.settings.experiment
        host = class_path(EvaluationHost)
        for interfaces, method, data in calls:
            if experiment.secure_evaluation and method in PREDICTIONS:
                raise PartyError(f"{method}: deploy.toml agrees on secure evaluation; this "
                                 "party's predictions leave it only as a secure sum")  # fmt: skip
            if method != "host" or host not in interfaces:
                continue
            (spec, *_), _ = decode_value(data)
            threat = experiment.protocol.threat_model
            if spec.get("threat_model") != threat:
                raise PartyError(f"a secure evaluation as {spec.get('threat_model')!r}; "
                                 f"deploy.toml says {threat!r}")  # fmt: skip
            if threat != HONEST_BUT_CURIOUS:
                every = sorted(client_party_id(i) for i in range(experiment.clients))
                if sorted(spec.get("clients", ())) != every:
                    raise PartyError("a secure evaluation against a malicious server sums "
                                     "every client of the federation")  # fmt: skip
                if spec.get("registry") != self.registry.to_wire():
                    raise PartyError("the secure evaluation's key registry is not the "
                                     "registrar's")  # fmt: skip

    def _check_stack(self, stack: dict[str, Any]) -> None:
        """The protocol the driver asks for is this party's (deploy.toml), under the
        registrar's registry."""
        experiment, asked = self.settings.experiment, config_from_json(stack["config"])
        mine, theirs = experiment.protocol, asked.protocol
        if theirs != mine:
            raise PartyError(f"the driver asks for protocol {_brief(theirs)}, deploy.toml "
                             f"says {_brief(mine)}")  # fmt: skip
        rounds = (experiment.clients, experiment.clients_per_round, experiment.client_sampling)
        if (asked.clients, int(stack["per_round"]), asked.client_sampling) != rounds:
            raise PartyError(  # the cohort floor and the noise shares follow from these
                f"the driver asks for rounds of {stack['per_round']} of {asked.clients} clients "
                f"({asked.client_sampling}); deploy.toml says {rounds[1]} of {rounds[0]} "
                f"({rounds[2]})"
            )
        registry = stack.get("registry")
        if mine.threat_model != HONEST_BUT_CURIOUS and registry != self.registry.to_wire():
            raise PartyError("the driver's key registry is not the registrar's")


def _brief(settings: Any) -> str:
    return json.dumps({"stack": settings.stack, "threat_model": settings.threat_model})


#: the methods whose replies are a party's predictions (each family's evaluation oracle)
PREDICTIONS = frozenset({"predict", "predict_on"})


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        daemon: PartyDaemon = self.server.daemon  # type: ignore[attr-defined]
        try:
            request = recv_frame(self.request)
        except ConnectionError:
            return
        send_frame(self.request, daemon.handle(request))


class _TlsHandler(socketserver.BaseRequestHandler):
    """A connection on the TLS port: the handshake (TLS 1.3, a client certificate the
    registrar's CA issued to the server), then one request."""

    def handle(self) -> None:
        import ssl

        from securefgl.deploy.tls import peer_name
        from securefgl.federation.party import SERVER

        daemon: PartyDaemon = self.server.daemon  # type: ignore[attr-defined]
        ctx: ssl.SSLContext = self.server.ctx  # type: ignore[attr-defined]
        self.request.settimeout(daemon.settings.party_timeout)
        try:
            with ctx.wrap_socket(self.request, server_side=True) as conn:
                if peer_name(conn) != SERVER:
                    log.warning("%s: refused a TLS client named %r", daemon.party_id,
                                peer_name(conn))  # fmt: skip
                    return
                request = recv_frame(conn)
                send_frame(conn, daemon.handle(request))
        except (ssl.SSLError, ConnectionError, OSError) as err:
            log.info("%s: TLS connection dropped: %s", daemon.party_id, err)


def _serve_tls(daemon: PartyDaemon) -> socketserver.ThreadingTCPServer:
    from securefgl.deploy.tls import daemon_context, split_address

    if daemon.settings.tls_ca is None:
        raise ConfigError(f"{daemon.party_id} has an address but [deployment] no tls_ca")
    ctx = daemon_context(daemon.own.keydir, daemon.settings.tls_ca)
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    server = socketserver.ThreadingTCPServer(split_address(str(daemon.own.address)), _TlsHandler)
    server.daemon_threads = True
    server.daemon = daemon  # type: ignore[attr-defined]
    server.ctx = ctx  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log.info("%s: mutual TLS on %s", daemon.party_id, daemon.own.address)
    return server


def serve(
    daemon: PartyDaemon,
    ready: threading.Event | None = None,
    announce: Callable[[str], None] = log.info,
) -> None:
    """Answer requests on the party's Unix socket (and its TLS port, given an address)
    until interrupted; ``announce`` is told where once both listen."""
    path = Path(daemon.own.socket)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.unlink(missing_ok=True)
    old = os.umask(0o177)  # the socket is created 0600: only this OS user connects
    try:
        server = socketserver.ThreadingUnixStreamServer(str(path), _Handler)
    finally:
        os.umask(old)
    try:  # a failed TLS set-up leaves no socket behind (it would look like a live party)
        tls = _serve_tls(daemon) if daemon.own.address else None
    except BaseException:
        server.server_close()
        path.unlink(missing_ok=True)
        raise
    with server:
        server.daemon = daemon  # type: ignore[attr-defined]
        where = f"{path}" + (f" and {daemon.own.address} (TLS)" if tls is not None else "")
        announce(f"{daemon.party_id}: serving on {where}")
        if ready is not None:
            ready.set()
        try:
            server.serve_forever()
        finally:
            path.unlink(missing_ok=True)
            if tls is not None:
                tls.shutdown()
