"""Issue 50's acceptance on the loopback interface: this process is the server side, and
each party (K = 5 clients) is a ``securefgl party`` process of its own that listens on
127.0.0.1 only, over mutual TLS with certificates the registrar issued. The run equals the
local executor's (metrics, bytes, the transcript's messages); a party killed mid-round is
a dropout the survivors finish without; a client without the server's certificate gets
nothing; no process but a party's own holds its secret keys. Each run is well under a
minute once the deployment is up."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest

from protocols.identity import keystore_parties
from securefgl.deploy import loopback
from securefgl.deploy.driver import run_deployment
from securefgl.deploy.framing import recv_frame, send_frame
from securefgl.deploy.tls import (
    TLS_CERT,
    TLS_KEY,
    TlsTransport,
    issue,
    server_context,
    split_address,
    tls_exchange,
    tls_request,
)
from securefgl.federation import SERVER
from securefgl.federation.codec import decode_value, encode_value
from tests.securefgl.deploy.conftest import assert_same_as_local
from tests.securefgl.deploy.test_parties import _KillBefore


def _tls(deployment) -> TlsTransport:
    settings = deployment.settings
    ctx = server_context(settings.server_keydir, settings.tls_ca)
    return TlsTransport([str(p.address) for p in settings.parties.values()], ctx)


def _listening(pid: int) -> list[tuple[str, int]]:
    """The TCP (v4 and v6) addresses process ``pid`` listens on, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # state LISTEN, one of its sockets
                host, port = cols[1].split(":")
                raw = bytes.fromhex(host)
                if table == "tcp":
                    addr = socket.inet_ntop(socket.AF_INET, raw[::-1])
                else:
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                    addr = socket.inet_ntop(socket.AF_INET6, words)
                found.append((addr, int(port, 16)))
    return found


def test_every_party_is_its_own_process_listening_on_loopback_only(fedavg_deployment):
    pids = set()
    for pid, own in fedavg_deployment.settings.parties.items():
        status = fedavg_deployment.status(pid)
        pids.add(status["pid"])
        assert _listening(status["pid"]) == [split_address(str(own.address))]
        assert own.address.startswith("127.0.0.1:")
    assert len(pids) == len(fedavg_deployment.settings.parties) == 5


def test_fedavg_secagg_plus_malicious_over_mutual_tls_is_the_local_run(fedavg_deployment):
    run = run_deployment(fedavg_deployment.settings, _tls(fedavg_deployment))
    assert_same_as_local(run.to_dict(), fedavg_deployment)
    assert all(e.startswith("127.0.0.1:") for e in run.directory.endpoint.values())
    assert run.result.protection["model updates (clients -> server)"] == "secagg+"


def test_fedstruct_masked_abar_over_mutual_tls_is_the_local_run(fedstruct_deployment):
    run = run_deployment(fedstruct_deployment.settings, _tls(fedstruct_deployment))
    assert_same_as_local(run.to_dict(), fedstruct_deployment)
    assert run.result.protection["Ā hop sums (pre-training)"].startswith("masked")


def test_a_node_killed_mid_round_over_tls_is_a_dropout_the_survivors_finish(fedavg_deployment):
    killer = _KillBefore(fedavg_deployment, "client-4", "masked_input")
    try:
        run = run_deployment(fedavg_deployment.settings, _tls(fedavg_deployment), killer)
    finally:
        fedavg_deployment.start("client-4")
    assert killer.done and list(run.silent) == ["client-4"]
    local = fedavg_deployment.local()
    assert len(run.result.history) == 2 and run.result.history[1]["loss"] > 0
    # malicious secure evaluation sums every client: with client-4 gone, none ran
    assert run.result.refused_evaluations == [1]
    assert run.transcript_bytes() < local["bytes"]  # client-4 sent nothing from then on


def _status_over(conn: ssl.SSLSocket | socket.socket) -> dict:
    send_frame(conn, encode_value({"kind": "status"}))
    return decode_value(recv_frame(conn))


def _client_ctx(keydir: Path | None, ca: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca))
    ctx.check_hostname = False
    if keydir is not None:
        ctx.load_cert_chain(str(keydir / TLS_CERT), str(keydir / TLS_KEY))
    return ctx


def _ask(address: str, ctx: ssl.SSLContext) -> dict:
    raw = socket.create_connection(split_address(address), timeout=30)
    with raw, ctx.wrap_socket(raw) as conn:
        return _status_over(conn)


def test_only_the_server_s_certificate_gets_an_answer_and_the_traffic_is_tls(
    fedavg_deployment, tmp_path
):
    settings = fedavg_deployment.settings
    address, ca = str(settings.party("client-0").address), settings.tls_ca
    ctx = server_context(settings.server_keydir, ca)  # the server's: answered, over TLS 1.3
    raw = socket.create_connection(split_address(address), timeout=30)
    with raw, ctx.wrap_socket(raw) as conn:
        assert conn.version() == "TLSv1.3"
        assert _status_over(conn)["party"] == "client-0"
    raw = socket.create_connection(split_address(address), timeout=30)
    with raw, pytest.raises((ConnectionError, OSError)):  # plaintext: no answer
        _status_over(raw)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):  # no certificate
        _ask(address, _client_ctx(None, ca))
    other = tmp_path / "other"  # a certificate another CA issued to "server"
    issue(tmp_path / "other-ca", [tls_request(other, SERVER)], other, [SERVER])
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        _ask(address, _client_ctx(other, ca))
    # the registrar's certificate, but a party's, not the server's: refused by the daemon
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        _ask(address, _client_ctx(settings.party("client-1").keydir, ca))
    # the server refuses a daemon whose certificate the registrar did not issue
    impostor = tmp_path / "impostor"
    issue(tmp_path / "other-ca", [tls_request(impostor, "client-0")], impostor, ["client-0"])
    listener = socket.create_server(("127.0.0.1", 0))
    fake = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    fake.load_cert_chain(str(impostor / "client-0.crt"), str(impostor / TLS_KEY))
    port = listener.getsockname()[1]

    def answer() -> None:
        conn, _ = listener.accept()
        try:
            with fake.wrap_socket(conn, server_side=True) as tls:
                send_frame(tls, recv_frame(tls))
        except (ssl.SSLError, OSError):
            pass

    threading.Thread(target=answer, daemon=True).start()
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_exchange(f"127.0.0.1:{port}", b"hello", ctx, timeout=30)
    listener.close()


def test_the_server_process_key_store_holds_no_party_secret_key(fedavg_deployment, tmp_path):
    """The server side in a process of its own (``securefgl deploy run``): what its key
    store held at every batch of the run, and what every party's holds."""
    settings = fedavg_deployment.settings
    out = tmp_path / "run.json"
    done = subprocess.run(
        loopback.securefgl_cmd("deploy", "run", "--engine", "tls", "--config",
                               str(settings.path), "--out", str(out)),
        env=loopback.python_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(out.read_text())
    assert run["server_keystore"] == [SERVER]  # only its own signing key, at every batch
    assert_same_as_local(run, fedavg_deployment)
    for pid in settings.parties:
        assert fedavg_deployment.status(pid)["keystore"] == [pid]
    # the server organisation's key folder holds its own keys only
    assert sorted(p.name for p in settings.server_keydir.iterdir() if "key" in p.name) == [
        "signing.key", TLS_KEY,
    ]  # fmt: skip
    assert keystore_parties() in ([], [SERVER])  # this test process: nobody else's either
