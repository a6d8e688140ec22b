"""Flower's ServerApp for securefgl, and the transport that carries call batches as
Flower Messages (needs the ``flower`` extra).

Each request of :mod:`securefgl.federation.remote` to a party is one Message of type
``query.sfgl`` to the party's node, its bytes in a ConfigRecord; the reply carries the
daemon's bytes. Replies are pulled every ``pull_interval`` s (``Grid.send_and_receive``
sleeps 3 s between pulls). An Error reply (node unavailable, ClientApp crashed, daemon
unreachable) or no reply within the party timeout makes the party silent. The ServerApp
runs :func:`~securefgl.deploy.driver.run_deployment`: the run's configuration is the
deploy.toml named by the run config's ``deploy-config``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

from securefgl.deploy.driver import DeployedRun, Progress, run_deployment
from securefgl.deploy.flower_client import ACTION, RECORD, simulation_app
from securefgl.deploy.settings import DeploySettings, load
from securefgl.experiment.results import dumps_strict
from securefgl.federation.remote import Silence, Transport

MESSAGE_TYPE = f"query.{ACTION}"


class FlowerTransport(Transport):
    """Endpoints are Flower node ids (as strings); see the module docstring."""

    def __init__(self, grid: Grid, ttl: float = 600.0, pull_interval: float = 0.05) -> None:
        self.grid = grid
        self.ttl = ttl
        self.pull_interval = pull_interval
        self.group = 0

    def endpoints(self, expected: int, wait: float) -> list[str]:
        deadline = time.monotonic() + wait
        while len(nodes := sorted(self.grid.get_node_ids())) < expected:
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        return [str(n) for n in nodes]

    def push(self, requests: Mapping[str, bytes]) -> dict[str, str]:
        self.group += 1
        msgs = [
            Message(RecordDict({RECORD: ConfigRecord({"request": data})}), int(endpoint),
                    MESSAGE_TYPE, ttl=self.ttl, group_id=str(self.group))
            for endpoint, data in requests.items()
        ]  # fmt: skip
        ids = list(self.grid.push_messages(msgs))
        return {mid: endpoint for mid, endpoint in zip(ids, requests, strict=True) if mid}

    def collect(self, handle: Any, timeout: float | None) -> dict[str, bytes | Silence]:
        pending: dict[str, str] = dict(handle)
        out: dict[str, bytes | Silence] = {}
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while pending:
            for reply in self.grid.pull_messages(list(pending)):
                endpoint = pending.pop(reply.metadata.reply_to_message_id, None)
                if endpoint is None:
                    continue
                if reply.has_error():
                    out[endpoint] = Silence(f"node error {reply.error.code}: {reply.error.reason}")
                else:
                    out[endpoint] = bytes(reply.content[RECORD]["reply"])
            if pending and time.monotonic() > deadline:
                break
            if pending:
                time.sleep(self.pull_interval)
        for endpoint in pending.values():
            out[endpoint] = Silence(f"timeout: no reply within {timeout} s")
        return out


def _serve(grid: Grid, settings: DeploySettings, progress: Progress) -> DeployedRun:
    ttl = max(2 * settings.party_timeout, 60.0)
    return run_deployment(settings, FlowerTransport(grid, ttl), progress)


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """The deployment engine's entry point (``flwr run``)."""
    cfg = context.run_config
    settings = load(str(cfg["deploy-config"]))
    progress = Progress(str(cfg.get("progress-file", "")) or None,
                        str(cfg.get("pause-before", "")))  # fmt: skip
    run = _serve(grid, settings, progress)
    out = str(cfg.get("result-file", ""))
    if out:
        Path(out).write_text(dumps_strict(run.to_dict(), indent=1))


def run_simulation(settings: DeploySettings, progress: Progress | None = None) -> DeployedRun:
    """The deployment under Flower's simulation engine: one virtual SuperNode per party,
    each reaching that party's daemon (started by its owner) on its socket."""
    from flwr.simulation import run_simulation as simulate

    sockets = [str(p.socket) for p in settings.parties.values()]
    done: list[DeployedRun] = []
    server = ServerApp()

    @server.main()
    def sim_main(grid: Grid, context: Context) -> None:
        done.append(_serve(grid, settings, progress or Progress()))

    backend = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
               "init_args": {"num_cpus": 2, "include_dashboard": False}}  # fmt: skip
    simulate(server, simulation_app(sockets), len(sockets), backend_config=backend)  # type: ignore[arg-type]
    if not done:
        raise RuntimeError("the simulation ended without a result (see Flower's log above)")
    return done[0]
