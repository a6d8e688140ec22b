"""Flower's deployment engine around securefgl's parties: the Flower app to submit, a
party's SuperNode, and (on one machine, loopback only) the server organisation's SuperLink,
node registration and ``flwr run``. Flower's executables are looked up beside this
Python's (the ``flower`` extra installs them); every process gets Flower's telemetry and
update checks switched off.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from securefgl.deploy.keys import node_key
from securefgl.deploy.loopback import Processes, python_env
from securefgl.deploy.settings import DeploySettings

APP_CONFIG = ("deploy-config", "result-file", "progress-file", "pause-before")


def flower_bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: pip install 'securefgl[flower]'")
    return found


def write_flower_app(folder: Path) -> Path:
    """The Flower app that ``flwr run`` submits: only a pyproject naming securefgl's
    ServerApp and ClientApp (the code is the securefgl installed on each machine; nodes
    keep runtime dependency installation off)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = "\n".join(f'{key} = ""' for key in APP_CONFIG)
    (folder / "pyproject.toml").write_text(f"""[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "securefgl-deployment"
version = "0.1.0"
description = "securefgl parties across organisations (securefgl.deploy)"
license = {{ file = "LICENSE" }}
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "securefgl"

[tool.flwr.app.components]
serverapp = "securefgl.deploy.flower_server:app"
clientapp = "securefgl.deploy.flower_client:app"

[tool.flwr.app.config]
{config}
""")
    (folder / "LICENSE").write_text("MIT\n")
    (folder / "securefgl_deployment.py").write_text('"""See securefgl.deploy."""\n')
    return folder


def flower_env(home: Path) -> dict[str, str]:
    """Flower's home folder ``home``; its executables (which spawn each other by name)
    first on the PATH."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    env = {**python_env(), "FLWR_HOME": str(home)}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def supernode_cmd(settings: DeploySettings, party_id: str) -> list[str]:
    own = settings.party(party_id)
    if settings.superlink is None or settings.root_certificates is None:
        raise ValueError("deploy.toml's [deployment] needs superlink and root_certificates")
    private, _ = node_key(own.keydir)
    cmd = [
        flower_bin("flower-supernode"), "--superlink", settings.superlink,
        "--root-certificates", str(settings.root_certificates),
        "--auth-supernode-private-key", str(private),
        "--node-config", f'party-socket="{own.socket}"',
    ]  # fmt: skip
    if own.supernode_port is not None:
        cmd += ["--host", "127.0.0.1", "--port", str(own.supernode_port)]
    return cmd


def start_supernode(settings: DeploySettings, party_id: str) -> subprocess.Popen[bytes]:
    """The party's SuperNode as a child of its daemon's process (for a stricter set-up run
    it as another OS user: docs/deployment.md)."""
    home = settings.party(party_id).keydir / "flwr-home"
    return subprocess.Popen(supernode_cmd(settings, party_id), env=flower_env(home))


def make_certificates(folder: Path, hosts: tuple[str, ...] = ("127.0.0.1",)) -> Path:
    """A test CA and the SuperLink's TLS certificate for ``hosts`` (loopback deployments;
    an organisation uses its own PKI): ``ca.crt``, ``server.pem``, ``server.key``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "securefgl test CA")])

    def cert(subject: x509.Name, key: ec.EllipticCurvePrivateKey, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
        )  # fmt: skip
        if ca:
            builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
        else:
            names = [x509.IPAddress(ipaddress.ip_address(h)) for h in hosts]
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName("localhost"), *names]), False
            ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        return builder.sign(ca_key, hashes.SHA384())

    server_key = ec.generate_private_key(ec.SECP384R1())
    server_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "superlink")])
    pem = serialization.Encoding.PEM
    (folder / "ca.crt").write_bytes(cert(ca_name, ca_key, True).public_bytes(pem))
    (folder / "server.pem").write_bytes(cert(server_name, server_key, False).public_bytes(pem))
    key = folder / "server.key"
    key.write_bytes(server_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ))  # fmt: skip
    key.chmod(0o600)
    return folder


def start_superlink(folder: Path, port: int, procs: Processes) -> subprocess.Popen[bytes]:
    """The server organisation's SuperLink on 127.0.0.1:``port``: TLS, SuperNode
    authentication on, no runtime dependency installation."""
    certs = folder / "certs"
    cmd = [
        flower_bin("flower-superlink"), "--ssl-ca-certfile", str(certs / "ca.crt"),
        "--ssl-certfile", str(certs / "server.pem"), "--ssl-keyfile", str(certs / "server.key"),
        "--enable-supernode-auth", "--disable-runtime-dependency-installation",
        "--database", str(folder / "superlink.db"), "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    return procs.start("superlink", cmd, flower_env(folder / "homes" / "superlink"))


def operator_env(folder: Path, port: int) -> dict[str, str]:
    """The ``flwr`` CLI of the SuperLink's operator (a connection named ``deploy``)."""
    home = folder / "homes" / "operator"
    env = flower_env(home)
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "deploy"\n\n[superlink.deploy]\naddress = "127.0.0.1:{port}"\n'
        f'root-certificates = "{folder / "certs" / "ca.crt"}"\n'
    )
    return env


def register_node(folder: Path, port: int, public_key: Path, name: str,
                  wait: float = 120.0) -> str:  # fmt: skip
    """``flwr supernode register``: the SuperLink admits the node holding this key (tried
    again while the SuperLink is starting, up to ``wait`` s)."""
    deadline = time.monotonic() + wait
    while True:
        done = subprocess.run(
            [flower_bin("flwr"), "supernode", "register", str(public_key), "deploy", "--name",
             name], env=operator_env(folder, port), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode == 0 or "unavailable" not in done.stdout + done.stderr:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(1.0)
    if done.returncode:
        raise RuntimeError(f"registering {name} failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def flwr_run(folder: Path, port: int, procs: Processes, config: Path, result: Path,
             progress: Path, pause_before: str = "") -> subprocess.Popen[bytes]:  # fmt: skip
    """Submit the securefgl app to the SuperLink (``flwr run``)."""
    app = write_flower_app(folder / "app")
    run_config = " ".join([
        f'deploy-config="{config}"', f'result-file="{result}"',
        f'progress-file="{progress}"', f'pause-before="{pause_before}"',
    ])  # fmt: skip
    cmd = [flower_bin("flwr"), "run", str(app), "deploy", "--run-config", run_config, "--stream"]
    return procs.start("flwr-run", cmd, operator_env(folder, port))


def server_env_ok() -> bool:
    """Whether Flower's executables are installed beside this Python."""
    try:
        flower_bin("flower-superlink")
    except FileNotFoundError:
        return False
    return os.access(flower_bin("flower-superlink"), os.X_OK)
