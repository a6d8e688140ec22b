"""Every party in its own process on this machine, reached on its Unix socket (no Flower):
the deployed run equals the local executor's, a party killed mid-round is a dropout, no
process holds another party's signing key. Each test is well under a minute once its
deployment is up (preparing one takes longer on a loaded machine: the parties import
torch)."""

from __future__ import annotations

import signal
import subprocess

import pytest

from securefgl.deploy.driver import Progress, run_deployment
from securefgl.deploy.sockets import SocketTransport
from securefgl.federation import SERVER
from tests.securefgl.deploy.conftest import assert_same_as_local


def _sockets(deployment):
    return SocketTransport([p.socket for p in deployment.settings.parties.values()])


def test_fedavg_secagg_plus_malicious_across_processes_is_the_local_run(fedavg_deployment):
    run = run_deployment(fedavg_deployment.settings, _sockets(fedavg_deployment))
    assert_same_as_local(run.to_dict(), fedavg_deployment)
    assert sorted(run.directory.endpoint) == [f"client-{i}" for i in range(5)]
    # no process but a party's own ever holds its signing key
    assert run.server_keystore == [SERVER]
    for party in fedavg_deployment.settings.parties:
        status = fedavg_deployment.status(party)
        assert status["keystore"] == [party] and status["parties"] == [party]


def test_fedstruct_masked_abar_across_processes_is_the_local_run(fedstruct_deployment):
    run = run_deployment(fedstruct_deployment.settings, _sockets(fedstruct_deployment))
    assert_same_as_local(run.to_dict(), fedstruct_deployment)
    assert run.result.protection["Ā hop sums (pre-training)"].startswith("masked")
    assert run.server_keystore == [SERVER]


class _KillBefore(Progress):
    """Kills a party's process (SIGKILL, its whole session) before the first batch whose
    label contains ``label``: mid-round, after the keys are shared."""

    def __init__(self, deployment, party: str, label: str) -> None:
        super().__init__()
        self.deployment, self.party, self.label, self.done = deployment, party, label, False

    def batch(self, calls) -> None:
        if not self.done and any(self.label in c.target.label for c in calls):
            self.deployment.procs.kill(self.party, signal.SIGKILL)
            self.done = True


def test_a_party_killed_mid_round_is_a_dropout_the_survivors_finish(fedavg_deployment):
    killer = _KillBefore(fedavg_deployment, "client-4", "masked_input")
    try:
        run = run_deployment(fedavg_deployment.settings, _sockets(fedavg_deployment), killer)
    finally:
        fedavg_deployment.start("client-4")  # the other tests want it back
    assert killer.done
    assert list(run.silent) == ["client-4"] and "unreachable" in run.silent["client-4"]
    assert len(run.result.history) == 2 and run.result.silent == {"client-4": 0}
    # against a malicious server every secure evaluation sums every client: none ran
    assert run.result.refused_evaluations == [1] and "test_acc" not in run.result.final
    assert run.result.history[0]["bytes_up"] > 0


def test_a_party_whose_key_the_registrar_did_not_register_cannot_start(fedavg_deployment):
    import shutil

    from securefgl.deploy import loopback

    settings = fedavg_deployment.settings
    impostor = settings.path.parent / "impostor-keys"
    shutil.rmtree(impostor, ignore_errors=True)
    text = settings.path.read_text().replace('"keys/client-2"', f'"{impostor}"')
    config = settings.path.with_name("impostor.toml")
    config.write_text(text)
    env = loopback.python_env()
    made = subprocess.run(loopback.securefgl_cmd("party", "--config", str(config), "--party",
                                                 "client-2", "--keygen"), env=env)  # fmt: skip
    assert made.returncode == 0
    done = subprocess.run(
        loopback.securefgl_cmd("party", "--config", str(config), "--party", "client-2"),
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "registry does not hold my key" in done.stderr


@pytest.mark.parametrize("party", ["client-0"])
def test_the_daemon_keeps_its_key_file_private(fedavg_deployment, party):
    keydir = fedavg_deployment.settings.party(party).keydir
    assert (keydir / "signing.key").stat().st_mode & 0o777 == 0o600
    assert keydir.stat().st_mode & 0o777 == 0o700
    sock = fedavg_deployment.settings.party(party).socket
    assert sock.stat().st_mode & 0o777 == 0o600


def test_with_secure_evaluation_agreed_no_call_returns_predictions(fedavg_deployment):
    """The driver (the server's organisation) can neither ask a client for its predictions
    nor host the evaluation's sum in another threat model or over fewer clients."""
    from protocols.identity import clear_keystore
    from securefgl.algorithms.fedavg.parties import RoundClient
    from securefgl.deploy.daemon import PartyDaemon
    from securefgl.federation.codec import encode_value
    from securefgl.federation.evaluation import EvaluationHost
    from securefgl.federation.party import PartyError, Target

    daemon = PartyDaemon(fedavg_deployment.settings, "client-0")  # its key, in this process
    try:
        predict = Target.of(RoundClient.predict).to_wire()
        with pytest.raises(PartyError, match="secure sum"):
            daemon._check_calls([(*predict, encode_value([[], {}]))])
        host = Target.of(EvaluationHost.host).to_wire()
        spec = {"threat_model": "malicious", "clients": ["client-0", "client-1"],
                "registry": daemon.registry.to_wire()}  # fmt: skip
        for bad, message in (({"threat_model": "honest-but-curious"}, "deploy.toml says"),
                             ({}, "every client of the federation")):  # fmt: skip
            with pytest.raises(PartyError, match=message):
                daemon._check_calls([(*host, encode_value([[{**spec, **bad}], {}]))])
    finally:
        clear_keystore(daemon.registry)
