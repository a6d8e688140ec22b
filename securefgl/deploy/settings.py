"""``deploy.toml``: one file that every organisation of a deployment holds a copy of.

```toml
[experiment]            # the experiment (securefgl run's keys): every party checks that
algorithms = ["fedavg"] # the server asks for this protocol stack and nothing weaker
...

[deployment]
registry = "registrar/registry.signed"  # the registrar's signed key registry (out of band)
registrar_key = "9f1c..."              # the registrar's Ed25519 public key (hex), pinned
party_timeout = 120.0                  # seconds before a party that does not answer is silent
server_keydir = "keys/server"          # the server organisation's own keys
superlink = "127.0.0.1:9092"           # Flower's SuperLink (deployment engine only)
root_certificates = "certs/ca.crt"     # the CA that signed the SuperLink's TLS certificate
tls_ca = "published/ca.crt"            # the registrar's CA (mutual TLS to the daemons)

[party.client-3]         # one table per party (client-<i>, and ckks-authority with ckks)
keydir = "keys/client-3"               # made by `securefgl party --keygen`; mode 0700
data = "data/client-3.view"            # its own view (clients only)
socket = "run/client-3.sock"           # where its daemon listens (mode 0600)
supernode_port = 9103                  # its SuperNode's local port (deployment engine)
address = "10.0.0.3:9300"              # where its daemon takes mutual-TLS connections
```

Relative paths are relative to the file's folder.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from securefgl.config import ConfigError, ExperimentConfig
from securefgl.federation.party import SERVER

TABLES = ("deployment", "party")
DEPLOYABLE = ("fedavg", "fedprox", "fedstruct", "fedgcn", "fedgcn-1hop")


@dataclass(frozen=True)
class PartySettings:
    party_id: str
    keydir: Path
    socket: Path
    data: Path | None = None
    supernode_port: int | None = None
    address: str | None = None  # host:port of its mutual-TLS listener


@dataclass(frozen=True)
class DeploySettings:
    path: Path
    experiment: ExperimentConfig
    registry: Path
    registrar_key: str
    server_keydir: Path
    parties: dict[str, PartySettings]
    party_timeout: float = 120.0
    superlink: str | None = None
    root_certificates: Path | None = None
    tls_ca: Path | None = None  # the registrar's CA certificate (mutual TLS)

    @property
    def algorithm(self) -> str:
        return self.experiment.algorithms[0]

    @property
    def seed(self) -> int:
        return int(self.experiment.seeds[0])

    def party(self, party_id: str) -> PartySettings:
        if party_id == SERVER:
            raise ConfigError("the server is not started with `securefgl party`")
        try:
            return self.parties[party_id]
        except KeyError:
            raise ConfigError(
                f"{self.path}: no [party.{party_id}] table (parties: {sorted(self.parties)})"
            ) from None


def load(path: str | Path) -> DeploySettings:
    """Read and check ``deploy.toml``."""
    path = Path(path).resolve()
    config = ExperimentConfig.from_toml(path, tables=TABLES)
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    dep = _table(raw, "deployment", path)
    root = path.parent

    def where(value: Any, key: str) -> Path:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{path}: {key} must be a path (a string)")
        p = Path(value)
        return p if p.is_absolute() else root / p

    def number(value: Any, key: str, kind: type) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ConfigError(f"{path}: {key} must be a positive number, got {value!r}")
        return kind(value)

    def address(value: Any, key: str) -> str:
        host, _, port = str(value).rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"{path}: {key} must be host:port, got {value!r}")
        return str(value)

    registrar_key = dep.get("registrar_key")
    try:
        if len(bytes.fromhex(str(registrar_key))) != 32:
            raise ValueError
    except ValueError:
        raise ConfigError(f"{path}: deployment.registrar_key must be the registrar's Ed25519 "
                          f"public key (64 hex digits), got {registrar_key!r}") from None
    parties = {}
    for pid, table in _table(raw, "party", path).items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [party.{pid}] must be a table")
        unknown = set(table) - {"keydir", "socket", "data", "supernode_port", "address"}
        if unknown:
            raise ConfigError(f"{path}: [party.{pid}] has unknown keys {sorted(unknown)}")
        parties[pid] = PartySettings(
            pid, where(table.get("keydir"), f"party.{pid}.keydir"),
            where(table.get("socket"), f"party.{pid}.socket"),
            where(table["data"], f"party.{pid}.data") if "data" in table else None,
            number(table["supernode_port"], f"party.{pid}.supernode_port", int)
            if "supernode_port" in table else None,
            address(table["address"], f"party.{pid}.address") if "address" in table else None,
        )  # fmt: skip
    unknown = set(dep) - {"registry", "registrar_key", "server_keydir", "party_timeout",
                          "superlink", "root_certificates", "tls_ca"}  # fmt: skip
    if unknown:
        raise ConfigError(f"{path}: [deployment] has unknown keys {sorted(unknown)}")
    settings = DeploySettings(
        path, config, where(dep.get("registry"), "deployment.registry"),
        str(registrar_key), where(dep.get("server_keydir"), "server_keydir"),
        parties, number(dep.get("party_timeout", 120.0), "deployment.party_timeout", float),
        dep.get("superlink"),
        where(dep["root_certificates"], "root_certificates") if "root_certificates" in dep
        else None,
        where(dep["tls_ca"], "tls_ca") if "tls_ca" in dep else None,
    )  # fmt: skip
    check(settings)
    return settings


def _table(raw: dict[str, Any], name: str, path: Path) -> dict[str, Any]:
    table = raw.get(name)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: a [{name}] table is needed")
    return table


def check(settings: DeploySettings) -> None:
    """What a deployment can run: one algorithm whose parties are clients and one server
    (plus a key authority that is its own party), one seed, everything federated."""
    config = settings.experiment
    if len(config.algorithms) != 1 or len(config.seeds) != 1:
        raise ConfigError("a deployment runs one algorithm with one seed")
    if settings.algorithm not in DEPLOYABLE:
        raise ConfigError(
            f"{settings.algorithm} does not run across organisations yet (deployable: "
            f"{', '.join(DEPLOYABLE)}; docs/deployment.md says what the others need)"
        )
    fedstruct = config.sections.get("fedstruct")
    if settings.algorithm == "fedstruct" and getattr(fedstruct, "abar", "") == "oracle":
        raise ConfigError("fedstruct's abar = 'oracle' is the simulator's (it needs the "
                          "whole graph): use abar = 'federated'")  # fmt: skip
    clients = [f"client-{i}" for i in range(config.clients)]
    missing = [c for c in clients if c not in settings.parties]
    if missing:
        raise ConfigError(f"{settings.path}: no [party.*] table for {', '.join(missing)}")
    no_data = [c for c in clients if settings.parties[c].data is None]
    if no_data:
        raise ConfigError(f"{settings.path}: clients without data: {', '.join(no_data)}")
