"""Deployments on this machine (loopback only): every party in its own process, started
as its owner would (``securefgl party``), with keys it made itself.

A deployment takes a while to prepare on a loaded 2-core machine (each party's process
imports torch), so each experiment's deployment is made once per test session and its
parties' daemons are shared by the tests that use it (each run is a new session to them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from securefgl.deploy import loopback
from securefgl.deploy.settings import DeploySettings, load
from securefgl.experiment.runner import load_graph, run_single

# min_cohort 3: a round goes on with a client gone (malicious secagg+ otherwise insists
# on every client of the round; a public parameter all parties agree on)
FEDAVG = {
    "dataset": "csbm", "clients": 5, "rounds": 2, "algorithms": ["fedavg"], "seeds": [0],
    "protocol": {"stack": ["secagg+"], "threat_model": "malicious", "min_cohort": 3},
    "secure_evaluation": True,
}  # fmt: skip
# FedStruct's masked Ā sends dense N x N hop sums: a 600-node graph keeps them small
FEDSTRUCT = {
    "dataset": "csbm", "csbm": {"num_nodes": 600}, "clients": 5, "rounds": 2,
    "algorithms": ["fedstruct"], "seeds": [0],
    "cross_edges": "known",
    "protocol": {"stack": ["secagg+"], "threat_model": "malicious", "min_cohort": 3},
    "fedstruct": {"sum_mode": "masked", "structure_hops": 2, "nsf_dim": 8,
                  "structure_hidden": [8], "feature_hidden": [8]},
}  # fmt: skip


class Deployment:
    """A prepared deployment folder and its running parties."""

    def __init__(self, folder: Path, experiment: dict, flower_port: int | None = None,
                 tls_port: int | None = None) -> None:  # fmt: skip
        extra = {"party_timeout": 60.0}
        if flower_port is not None:
            from securefgl.deploy.flower_launch import make_certificates

            make_certificates(folder / "certs")
            extra |= {"superlink": f"127.0.0.1:{flower_port}", "root_certificates": "certs/ca.crt",
                      "party_timeout": 180.0}  # seconds per message under Flower (see test_flower)
        self.config = loopback.prepare(folder, experiment, extra,
                                       None if flower_port is None else flower_port + 10,
                                       tls_port)  # fmt: skip
        self.folder = folder
        self.settings: DeploySettings = load(self.config)
        self.procs = loopback.Processes(folder / "logs")
        self._local: dict | None = None

    def start(self, *parties: str, supernode: bool = False) -> None:
        loopback.start_parties(self.config, parties or list(self.settings.parties), self.procs,
                               supernode=supernode)  # fmt: skip

    def status(self, party: str) -> dict:
        from securefgl.deploy.framing import exchange
        from securefgl.federation.codec import decode_value, encode_value

        sock = str(self.settings.party(party).socket)
        return decode_value(exchange(sock, encode_value({"kind": "status"}), timeout=60))

    def local(self) -> dict:
        """The local executor's run of the same experiment: final metrics, bytes, digest."""
        if self._local is None:
            from securefgl.deploy.driver import transcript_digest
            from securefgl.federation import Transcript

            config = self.settings.experiment
            transcript = Transcript()
            result = run_single(config, self.settings.algorithm, self.settings.seed,
                                load_graph(config), progress=False, transcript=transcript)
            rounds = sum(h["bytes_up"] + h["bytes_down"] + h["bytes_p2p"]
                         for h in result.history)  # fmt: skip
            self._local = {"final": result.final, "bytes": result.setup_bytes + rounds,
                           "digest": transcript_digest(transcript),
                           "messages": len(transcript.entries)}  # fmt: skip
        return self._local


def assert_same_as_local(run: dict, deployment: Deployment) -> None:
    """A deployed run (``DeployedRun.to_dict()``) equals the local executor's exactly."""
    local = deployment.local()
    assert run["result"]["final"] == local["final"]
    assert run["transcript_bytes"] == local["bytes"]
    assert run["messages"] == local["messages"] and run["transcript_digest"] == local["digest"]
    json.dumps(run, default=str)


# The daemons' mutual-TLS ports on 127.0.0.1 (a deployment's parties take consecutive ones)
TLS_PORTS = {"fedavg": 29610, "fedstruct": 29630}


def _deployment(tmp_path_factory, name: str, experiment: dict) -> Iterator[Deployment]:
    port = TLS_PORTS[name.split("-")[0]]
    deployment = Deployment(tmp_path_factory.mktemp(name), experiment, tls_port=port)
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.procs.stop()


@pytest.fixture(scope="session")
def fedavg_deployment(tmp_path_factory) -> Iterator[Deployment]:
    yield from _deployment(tmp_path_factory, "fedavg-deploy", FEDAVG)


@pytest.fixture(scope="session")
def fedstruct_deployment(tmp_path_factory) -> Iterator[Deployment]:
    yield from _deployment(tmp_path_factory, "fedstruct-deploy", FEDSTRUCT)
