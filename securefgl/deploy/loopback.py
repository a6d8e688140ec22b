"""A whole deployment on one machine, loopback only (tests, demos, the benchmark).

:func:`prepare` plays every organisation in turn, each step in its own process as on
separate machines: every party (and the server) makes its keys with
``securefgl party --keygen`` in a process of its own and publishes the public half; this
process plays the registrar (its own key, the signed registry) and the data owners
(``deploy split``: each client's view to its own file). :func:`start_parties` starts one
``securefgl party`` process per party. Every process started here is ended by its own id
(:class:`Processes`), never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from securefgl.deploy import keys
from securefgl.federation.party import SERVER

CKKS_AUTHORITY = "ckks-authority"


def toml_text(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """A small TOML writer: tables of scalars, lists of scalars and sub-tables."""
    lines: list[str] = []

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str | Path):
            return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list | tuple):
            return "[" + ", ".join(value(x) for x in v) + "]"
        raise TypeError(f"cannot write {type(v).__name__} to TOML")

    def table(name: str, body: Mapping[str, Any]) -> None:
        lines.append(f"[{name}]")
        lines.extend(f'"{k}" = {value(v)}' for k, v in body.items() if not isinstance(v, dict))
        lines.append("")
        for k, v in body.items():
            if isinstance(v, dict):
                table(f'{name}."{k}"' if "-" in k else f"{name}.{k}", v)

    for name, body in tables.items():
        table(name, body)
    return "\n".join(lines)


def party_ids(experiment: Mapping[str, Any]) -> list[str]:
    """The parties other than the server: the clients, and CKKS's key authority."""
    ids = [f"client-{i}" for i in range(int(experiment["clients"]))]
    stack = experiment.get("protocol", {}).get("stack", [])
    return ids + ([CKKS_AUTHORITY] if "ckks" in stack else [])


def python_env() -> dict[str, str]:
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def securefgl_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "securefgl.cli", *args]


def prepare(
    folder: Path,
    experiment: Mapping[str, Any],
    deployment: Mapping[str, Any] | None = None,
    first_port: int | None = None,
    tls_port: int | None = None,
) -> Path:
    """A deployment folder for ``experiment`` (the ``[experiment]`` table): deploy.toml,
    every party's keys (made by the party's own process), the signed registry, the
    registrar's TLS certificates and the clients' view files. ``first_port``: SuperNode
    ports from here (deployment engine); ``tls_port``: the daemons' mutual-TLS ports on
    127.0.0.1 from here."""
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    registrar = keys.own_identity(folder / "registrar", keys.REGISTRAR)
    parties = party_ids(experiment)
    tables: dict[str, Any] = {
        "experiment": dict(experiment),
        "deployment": {
            "registry": "registrar/registry.signed", "registrar_key": registrar.public.hex(),
            "server_keydir": "keys/server", "tls_ca": "published/ca.crt",
            **(deployment or {}),
        },  # fmt: skip
        "party": {},
    }
    for i, pid in enumerate(parties):
        table: dict[str, Any] = {"keydir": f"keys/{pid}", "socket": f"run/{pid}.sock"}
        if pid.startswith("client-"):
            table["data"] = f"data/{pid}.view"
        if first_port is not None:
            table["supernode_port"] = first_port + i
        if tls_port is not None:
            table["address"] = f"127.0.0.1:{tls_port + i}"
        tables["party"][pid] = table
    config = folder / "deploy.toml"
    config.write_text(toml_text(tables))
    env = python_env()
    published = folder / "published"
    keydirs = {SERVER: folder / "keys/server", **{p: folder / f"keys/{p}" for p in parties}}
    makers = [  # each party makes its keys in its own process
        subprocess.Popen([sys.executable, "-m", "securefgl.deploy.keygen", "--party", pid,
                          "--keydir", str(keydir), "--publish", str(published)],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for pid, keydir in keydirs.items()
    ]  # fmt: skip
    split = subprocess.run(securefgl_cmd("deploy", "split", "--config", str(config)), env=env,
                           capture_output=True, text=True)  # fmt: skip
    for maker in makers:
        _, err = maker.communicate()
        if maker.returncode:
            raise RuntimeError(f"keygen failed: {err.decode()[-2000:]}")
    if split.returncode:
        raise RuntimeError(f"deploy split failed: {split.stderr[-2000:]}")
    registered = keys.read_published(sorted(published.glob("*.pub.json")))
    signed = keys.sign_registry(registered, registrar)
    (folder / "registrar" / "registry.signed").write_bytes(signed)
    from securefgl.deploy.tls import TLS_CERT, issue

    requests = sorted(published.glob("*.csr.pem"))
    issued = issue(folder / "registrar", requests, published, list(registered))
    for pid, (cert, _) in issued.items():  # each party installs the certificate it got back
        (keydirs[pid] / TLS_CERT).write_bytes(cert.read_bytes())
    return config


class Processes:
    """Processes started here, each in its own session, ended by its own id."""

    def __init__(self, logs: Path) -> None:
        self.logs = Path(logs)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._files: list[IO[bytes]] = []

    def start(self, name: str, cmd: list[str], env: Mapping[str, str] | None = None,
              **kw: Any) -> subprocess.Popen[bytes]:  # fmt: skip
        log = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - closed by stop()
        self._files.append(log)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(env or python_env()), **kw)  # fmt: skip
        self.procs[name] = proc
        return proc

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal the process group of ``name`` (its own session: it and its children)."""
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            if self.procs[name].poll() is None:
                self.kill(name, signal.SIGTERM)
        for fh in self._files:
            fh.close()


def answers(sock: Path) -> bool:
    """Whether a party daemon answers on ``sock`` (a status request)."""
    from securefgl.deploy.framing import exchange
    from securefgl.federation.codec import encode_value

    try:
        exchange(str(sock), encode_value({"kind": "status"}), timeout=30)
    except OSError:
        return False
    return True


def start_parties(config: Path, parties: Iterable[str], procs: Processes,
                  supernode: bool = False, wait: float = 120.0) -> None:  # fmt: skip
    """``securefgl party`` for each of ``parties``; returns when every socket is up."""
    from securefgl.deploy.settings import load

    deploy = load(config)
    for pid in parties:
        deploy.party(pid).socket.unlink(missing_ok=True)  # a stale socket is not a party
        extra = ["--supernode"] if supernode else []
        procs.start(pid, securefgl_cmd("party", "--config", str(config), "--party", pid, *extra))
    deadline = time.monotonic() + wait
    for pid in parties:
        sock = deploy.party(pid).socket
        while not answers(sock):
            if procs.procs[pid].poll() is not None:
                raise RuntimeError(f"{pid} exited: {procs.log(pid)[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{pid} did not start: {procs.log(pid)[-2000:]}")
            time.sleep(0.1)
