"""What a party and the driver check before they act, in one process (fast): the
registrar's signature, the hello, the build (protocol, registry, view, builder) and the
request order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocols.identity import Identity, SignatureError, clear_keystore
from securefgl.config import ConfigError
from securefgl.deploy import keys, loopback
from securefgl.deploy.daemon import PartyDaemon
from securefgl.deploy.data import public_facts, stub_view
from securefgl.deploy.settings import load
from securefgl.federation.builders import view_payload
from securefgl.federation.codec import decode_value, encode_value
from securefgl.federation.party import PartyError
from securefgl.federation.remote import Silence, Transport, discover


def _registry(tmp_path: Path, parties: list[str]) -> tuple[Identity, dict[str, Identity], Path]:
    registrar = keys.own_identity(tmp_path / "registrar", keys.REGISTRAR)
    ids = {p: keys.own_identity(tmp_path / p, p) for p in parties}
    path = tmp_path / "registry.signed"
    path.write_bytes(keys.sign_registry({p: i.public for p, i in ids.items()}, registrar))
    return registrar, ids, path


def test_only_the_pinned_registrar_s_registry_is_accepted(tmp_path):
    registrar, ids, path = _registry(tmp_path, ["server", "client-0"])
    registry = keys.read_registry(path, registrar.public.hex())
    assert registry.keys["client-0"] == ids["client-0"].public
    other = Identity.generate("registrar")
    with pytest.raises(SignatureError):
        keys.read_registry(path, other.public.hex())
    data = decode_value(path.read_bytes())  # the server swaps in a key of its own
    data["registry"]["keys"]["client-0"] = Identity.generate("client-0").public
    path.write_bytes(encode_value(data))
    with pytest.raises(SignatureError):
        keys.read_registry(path, registrar.public.hex())


def test_a_key_file_others_can_read_is_refused(tmp_path):
    from securefgl.deploy.tls import tls_request

    keydir = tmp_path / "keys"
    keys.own_identity(keydir, "client-0")
    tls_request(keydir, "client-0", tmp_path / "out")
    keys.node_key(keydir)
    for name in (keys.SIGNING_KEY, "tls.key", keys.NODE_KEY):
        os.chmod(keydir / name, 0o644)
        with pytest.raises(PermissionError, match="chmod 600"):
            keys.check_private(keydir / name)
        os.chmod(keydir / name, 0o600)
    with pytest.raises(PermissionError):
        os.chmod(keydir / keys.SIGNING_KEY, 0o644)
        keys.own_identity(keydir, "client-0")
    os.chmod(keydir / keys.SIGNING_KEY, 0o600)
    os.chmod(keydir, 0o755)  # a keydir others can list and enter
    with pytest.raises(PermissionError, match="chmod 700"):
        keys.own_identity(keydir, "client-0")


def _daemon(tmp_path: Path, experiment: dict) -> PartyDaemon:
    registrar, ids, registry = _registry(tmp_path, ["server", "client-0", "client-1"])
    config = tmp_path / "deploy.toml"
    config.write_text(loopback.toml_text({
        "experiment": experiment,
        "deployment": {"registry": str(registry), "registrar_key": registrar.public.hex(),
                       "server_keydir": str(tmp_path / "server")},
        "party": {p: {"keydir": str(tmp_path / p), "socket": str(tmp_path / f"{p}.sock"),
                      "data": str(tmp_path / f"{p}.view")} for p in ["client-0", "client-1"]},
    }))  # fmt: skip
    settings = load(config)
    from securefgl.deploy.data import split_for_deployment, write_view

    for pid, view in split_for_deployment(settings.experiment, settings.seed).items():
        write_view(view, settings.party(pid).data)
    return PartyDaemon(settings, "client-0")


EXPERIMENT = {"dataset": "csbm", "clients": 2, "rounds": 1, "algorithms": ["fedavg"],
              "seeds": [0], "protocol": {"stack": ["secagg"], "threat_model": "malicious"}}


@pytest.fixture
def daemon(tmp_path):
    made = _daemon(tmp_path, EXPERIMENT)
    yield made
    clear_keystore()


def _request(daemon: PartyDaemon, **body) -> dict:
    return decode_value(daemon.handle(encode_value(body)))


def _stack(daemon: PartyDaemon, per_round: int = 2, noise_seed: int | None = None,
           **changes) -> dict:  # fmt: skip
    from securefgl.federation.builders import config_json

    config = daemon.settings.experiment.replace(**changes)
    stack = {"token": "t", "config": config_json(config), "per_round": per_round,
             "experiment_id": "run|seed=0", "noise_seed": noise_seed, "server": "server",
             "clients": ["client-0", "client-1"], "dim": 4,
             "registry": daemon.registry.to_wire()}  # fmt: skip
    return stack


def _build(daemon, seq=1, session="s", client=0, **stack_changes) -> dict:
    view = view_payload(stub_view({**public_facts(daemon.view), "client_id": client}))
    args = {"view": view, "stack": _stack(daemon, **stack_changes), "noise_seed": None, "seed": 0}
    return _request(daemon, kind="build", party="client-0", session=session, seq=seq,
                    builder="securefgl.algorithms.fedavg.parties:fedavg_client", args=args)


def test_a_build_gets_the_party_s_own_view_in_place_of_the_stub(daemon):
    assert _build(daemon)["results"][0][0] == "ok"
    client = daemon.host.parties["client-0"]
    assert client.data.num_nodes == daemon.view.num_nodes > 0


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"client": 1}, "a build for client 1"),
        ({"protocol": {"stack": ["plain"], "threat_model": "malicious"}}, "asks for protocol"),
        ({"per_round": 1}, "rounds of 1 of 2 clients"),
        ({"noise_seed": 7}, "its own secret source"),
    ],
)
def test_a_build_the_party_did_not_agree_to_is_refused(daemon, change, why):
    client = change.pop("client", 0)
    status, data, _ = _build(daemon, client=client, **change)["results"][0]
    assert status == "error" and why in data.decode() and not daemon.host.parties


def test_the_party_s_data_goes_only_to_its_algorithm_s_parties_under_its_stack(daemon):
    view = view_payload(stub_view({**public_facts(daemon.view), "client_id": 0}))
    other = {"view": view, "training": {}, "seed": 0}  # another family's builder, no stack
    out = _request(daemon, kind="build", party="client-0", session="s", seq=1,
                   builder="securefgl.algorithms.common.edge.parties:local_client", args=other)
    assert "only to fedavg's parties" in out["results"][0][1].decode()
    bare = {"view": view, "noise_seed": None, "seed": 0}  # the right builder, no stack
    out = _request(daemon, kind="build", party="client-0", session="s", seq=2,
                   builder="securefgl.algorithms.fedavg.parties:fedavg_client", args=bare)
    assert "only under the deployment's protocol stack" in out["results"][0][1].decode()
    assert not daemon.host.parties


def test_a_role_interface_is_named_by_its_own_path_only(daemon):
    assert _build(daemon)["results"][0][0] == "ok"
    sneaky = [[["securefgl.federation.party:Party.__base__"], "predict", encode_value([[], {}])]]
    out = _request(daemon, kind="calls", party="client-0", session="s", seq=2, calls=sneaky)
    status, text, _ = out["results"][0]
    assert status == "error" and "not a class of its own" in text.decode()


def test_requests_out_of_order_and_outside_securefgl_are_refused(daemon):
    assert _build(daemon, seq=5)["results"][0][0] == "ok"
    calls = [[["securefgl.algorithms.fedavg.parties:RoundClient"], "training_weight",
              encode_value([[], {}])]]  # fmt: skip
    ok = _request(daemon, kind="calls", party="client-0", session="s", seq=6, calls=calls)
    assert ok["results"][0][0] == "ok" and decode_value(ok["results"][0][1]) > 0
    again = _request(daemon, kind="calls", party="client-0", session="s", seq=6, calls=calls)
    assert "stale or replayed" in again["results"][0][1].decode()
    outside = [[["os:PathLike"], "fspath", encode_value([[], {}])]]
    out = _request(daemon, kind="calls", party="client-0", session="s", seq=7, calls=outside)
    assert out["results"][0][0] == "error" and "outside" in out["results"][0][1].decode()
    with pytest.raises(PartyError, match="outside"):
        from securefgl.federation.recipes import Recipe
        from securefgl.federation.remote import PartyHost

        PartyHost().build("x", Recipe("os:system", {"command": "true"}))


class _Loop(Transport):
    """Endpoints answered in this process by ``daemons`` (a forged one among them)."""

    def __init__(self, daemons: dict[str, object]) -> None:
        self.daemons = daemons

    def endpoints(self, expected: int, wait: float) -> list[str]:
        return list(self.daemons)

    def push(self, requests):
        return {e: self.daemons[e].handle(r) for e, r in requests.items()}

    def collect(self, handle, timeout):
        return {e: (r if isinstance(r, bytes) else Silence("gone")) for e, r in handle.items()}


class _Impostor:
    """Answers the hello as client-0, signing with a key the registrar never saw."""

    def __init__(self, real: PartyDaemon) -> None:
        self.real, self.key = real, Identity.generate("client-0")

    def handle(self, data: bytes) -> bytes:
        from securefgl.federation.remote import hello_statement

        request = decode_value(data)
        facts = self.real.facts()
        stmt = hello_statement(request["nonce"], request["where"], "client-0", facts)
        return encode_value({"party": "client-0", "public": self.key.public, "meta": facts,
                             "signature": self.key.sign(stmt)})  # fmt: skip


def test_discovery_maps_only_signed_hellos_and_refuses_a_forged_or_rerouted_one(daemon):
    found = discover(_Loop({"node-a": daemon}), daemon.registry, ["client-0"])
    assert found.endpoint == {"client-0": "node-a"}
    assert found.meta["client-0"]["num_features"] == daemon.view.num_features
    with pytest.raises(PartyError, match="no verified hello from client-0"):
        discover(_Loop({"node-b": _Impostor(daemon)}), daemon.registry, ["client-0"])

    class Rerouted(_Loop):  # the relay delivers node-a's hello to node-b's party
        def push(self, requests):
            data = decode_value(requests["node-a"])
            data["where"] = "node-b"
            return {"node-a": daemon.handle(encode_value(data))}

    with pytest.raises(PartyError, match="does not verify"):
        discover(Rerouted({"node-a": daemon}), daemon.registry, ["client-0"])


def test_deploy_toml_refuses_what_does_not_run_across_organisations(tmp_path):
    text = loopback.toml_text({
        "experiment": {**EXPERIMENT, "algorithms": ["fedsage+"]},
        "deployment": {"registry": "r", "registrar_key": "00" * 32, "server_keydir": "k"},
        "party": {},
    })  # fmt: skip
    (tmp_path / "deploy.toml").write_text(text)
    with pytest.raises(ConfigError, match="does not run across organisations"):
        load(tmp_path / "deploy.toml")


@pytest.mark.parametrize(
    ("deployment", "party", "message"),
    [
        ({"registrar_key": "00"}, {}, "64 hex digits"),
        ({"party_timeout": "sixty"}, {}, "party_timeout must be a positive number"),
        ({}, {"address": "127.0.0.1"}, "must be host:port"),
        ({}, {"supernode_port": "x9"}, "supernode_port must be a positive number"),
    ],
)
def test_deploy_toml_values_are_checked_when_read(tmp_path, deployment, party, message):
    text = loopback.toml_text({
        "experiment": EXPERIMENT,
        "deployment": {"registry": "r", "registrar_key": "00" * 32, "server_keydir": "k",
                       **deployment},
        "party": {"client-0": {"keydir": "k0", "socket": "s0", **party}},
    })  # fmt: skip
    (tmp_path / "deploy.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load(tmp_path / "deploy.toml")
