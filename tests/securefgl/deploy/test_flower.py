"""The parties carried by Flower (the ``flower`` extra): its simulation engine (virtual
SuperNodes reaching the parties' daemons) and its deployment engine (a SuperLink with TLS
and SuperNode authentication, one SuperNode per party, ``flwr run``), loopback only.

The deployment engine costs seconds per message on a loaded 2-core machine (a process
per message, polling at every hop), so a run takes minutes: those tests run only with
``SECUREFGL_DEPLOYMENT_TESTS=1`` (``make test-deploy``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from securefgl.federation import SERVER
from tests.securefgl.deploy.conftest import FEDAVG, FEDSTRUCT, Deployment, assert_same_as_local

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("flwr") is None,
    reason="Flower is not installed (pip install 'securefgl[flower]'; make test installs it)",
)
deployment_engine = pytest.mark.skipif(
    os.environ.get("SECUREFGL_DEPLOYMENT_TESTS") != "1",
    reason="Flower's deployment engine takes minutes per run here: make test-deploy",
)


def test_flower_simulation_engine_gives_the_local_run(fedavg_deployment, tmp_path):
    from securefgl.deploy import loopback

    out = tmp_path / "run.json"
    done = subprocess.run(
        loopback.securefgl_cmd("deploy", "run", "--engine", "flower-sim", "--config",
                               str(fedavg_deployment.config), "--out", str(out)),
        env=loopback.python_env(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(out.read_text())
    assert_same_as_local(run, fedavg_deployment)
    assert run["server_keystore"] == [SERVER]


PORT = 19491  # the SuperLink's; SuperNodes from PORT + 10


@pytest.fixture(scope="module")
def flower_deployment(tmp_path_factory):
    from securefgl.deploy import flower_launch as fl

    deployment = Deployment(tmp_path_factory.mktemp("flower-deploy"), FEDAVG, PORT)
    try:
        fl.start_superlink(deployment.folder, PORT, deployment.procs)
        for pid in deployment.settings.parties:
            _, public = fl.node_key(deployment.settings.party(pid).keydir)
            fl.register_node(deployment.folder, PORT, public, pid)
        deployment.start(supernode=True)
        yield deployment
    finally:
        deployment.procs.stop()


def _flwr_run(deployment: Deployment, name: str, pause_before: str = "") -> tuple[Path, Path]:
    from securefgl.deploy import flower_launch as fl

    result, progress = deployment.folder / f"{name}.json", deployment.folder / f"{name}.jsonl"
    fl.flwr_run(deployment.folder, PORT, deployment.procs, deployment.config, result, progress,
                pause_before)  # fmt: skip
    return result, progress


def _wait(path: Path, deployment: Deployment, timeout: float = 1800.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, deployment.procs.log("superlink")[-3000:]
        time.sleep(1.0)


@deployment_engine
def test_flower_deployment_engine_gives_the_local_run(flower_deployment):
    result, _ = _flwr_run(flower_deployment, "same")
    _wait(result, flower_deployment)
    run = json.loads(result.read_text())
    assert_same_as_local(run, flower_deployment)
    assert run["server_keystore"] == [SERVER]  # the ServerApp's process held no party's key
    assert all(e.isdigit() for e in run["endpoints"].values())  # Flower node ids


@deployment_engine
def test_flower_deployment_engine_survives_a_node_killed_mid_round(flower_deployment):
    result, progress = _flwr_run(flower_deployment, "kill", pause_before="masked_input")
    deadline = time.monotonic() + 1800
    while "paused" not in (progress.read_text() if progress.exists() else ""):
        assert time.monotonic() < deadline
        time.sleep(1.0)
    flower_deployment.procs.kill("client-4")  # its daemon and its SuperNode
    progress.with_suffix(".go").touch()
    _wait(result, flower_deployment)
    run = json.loads(result.read_text())
    assert list(run["silent"]) == ["client-4"]
    assert len(run["result"]["history"]) == FEDAVG["rounds"]


@deployment_engine
@pytest.mark.parametrize(
    ("case", "key", "extra", "why"),
    [
        ("unregistered key", "fresh", [], "Failed to activate"),
        ("no key", None, [], "must be registered"),
        ("plaintext", "client-0", ["--insecure"], "secure TLS"),
        ("another CA", "client-0", ["--root-certificates", "other"], "CERTIFICATE_VERIFY_FAILED"),
    ],
)  # fmt: skip
def test_flower_refuses_a_node_without_valid_credentials(flower_deployment, case, key, extra,
                                                          why):  # fmt: skip
    from securefgl.deploy import flower_launch as fl
    from securefgl.deploy.keys import node_key

    folder = flower_deployment.folder
    cmd = [fl.flower_bin("flower-supernode"), "--superlink", f"127.0.0.1:{PORT}",
           "--max-retries", "2", "--max-wait-time", "20", "--port", str(PORT + 40)]  # fmt: skip
    if key == "fresh":
        cmd += ["--auth-supernode-private-key", str(node_key(folder / "intruder")[0])]
    elif key is not None:
        cmd += ["--auth-supernode-private-key", str(node_key(folder / "keys" / key)[0])]
    if "other" in extra:
        fl.make_certificates(folder / "other-ca")
        extra = ["--root-certificates", str(folder / "other-ca" / "ca.crt")]
    elif "--insecure" not in extra:
        extra = ["--root-certificates", str(folder / "certs" / "ca.crt")]
    # output to a file and the node's own session: the SuperExec it spawns outlives it and
    # would hold pipes open; the whole group is ended by its id once the node has exited
    log = folder / f"refused-{case.replace(' ', '-')}.log"
    env = fl.flower_env(folder / "homes" / case.replace(" ", "-"))
    with log.open("wb") as out:
        node = subprocess.Popen(cmd + extra, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)  # fmt: skip
        try:
            code = node.wait(timeout=300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
    assert code != 0
    assert why in log.read_text(errors="replace")


@deployment_engine
def test_flower_deployment_engine_runs_fedstruct_masked_abar(tmp_path_factory):
    from securefgl.deploy import flower_launch as fl

    port = PORT + 100
    deployment = Deployment(tmp_path_factory.mktemp("flower-fedstruct"), FEDSTRUCT, port)
    try:
        fl.start_superlink(deployment.folder, port, deployment.procs)
        for pid in deployment.settings.parties:
            _, public = fl.node_key(deployment.settings.party(pid).keydir)
            fl.register_node(deployment.folder, port, public, pid)
        deployment.start(supernode=True)
        result, progress = deployment.folder / "r.json", deployment.folder / "r.jsonl"
        fl.flwr_run(deployment.folder, port, deployment.procs, deployment.config, result,
                    progress)  # fmt: skip
        _wait(result, deployment, 3600)
        assert_same_as_local(json.loads(result.read_text()), deployment)
    finally:
        deployment.procs.stop()
