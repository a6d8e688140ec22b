"""The server organisation's side of a deployment: find the parties, run the experiment.

:func:`run_deployment` is ``securefgl run`` for one algorithm and seed, with the client
views replaced by the stubs their owners announce (:mod:`securefgl.deploy.data`) and every
party but the server behind a :class:`~securefgl.deploy.settings` transport
(:class:`~securefgl.federation.remote.RemoteExecutor`): the same parties, the same calls,
the same channel and transcript, so the same seed gives the result and the bytes of the
local executor. The server's signing key is its own (``server_keydir``); the process holds
no other party's (:attr:`DeployedRun.server_keystore` records what it held mid-run).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from protocols.identity import HONEST_BUT_CURIOUS, Pki, install_identity, keystore_parties
from securefgl.algorithms.registry import algorithm_class, check_config
from securefgl.config import ConfigError
from securefgl.deploy.data import PUBLIC_FACTS, stub_view
from securefgl.deploy.keys import own_identity, read_registry
from securefgl.deploy.settings import DeploySettings
from securefgl.experiment.runner import (
    RunResult,
    _privacy,
    evaluation,
    protection,
    train_rounds,
)
from securefgl.federation import SERVER, Call, Channel, Transcript, client_party_id
from securefgl.federation.executor import Executor
from securefgl.federation.federation import Federation
from securefgl.federation.party import Party
from securefgl.federation.recipes import Recipe
from securefgl.federation.remote import Directory, RemoteExecutor, Transport, discover
from securefgl.federation.stack import build_stack
from securefgl.federation.transcript import SETUP

log = logging.getLogger(__name__)


@dataclass
class DeployedRun:
    result: RunResult
    directory: Directory
    server_keystore: list[str]  # the parties whose signing keys the server's process held
    wall_seconds: float
    silent: dict[str, str] = field(default_factory=dict)  # party -> why it went silent
    transcript: Transcript | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "result": self.result.to_dict(), "transcript_bytes": self.transcript_bytes(),
            "endpoints": dict(self.directory.endpoint), "refused": dict(self.directory.refused),
            "server_keystore": self.server_keystore, "wall_seconds": self.wall_seconds,
            "silent": self.silent,
            "messages": len(self.transcript.entries) if self.transcript else None,
            "transcript_digest": transcript_digest(self.transcript) if self.transcript else None,
        }  # fmt: skip

    def transcript_bytes(self) -> int:
        r = self.result
        rounds = sum(h["bytes_up"] + h["bytes_down"] + h["bytes_p2p"] for h in r.history)
        return int(r.setup_bytes + rounds)


def transcript_digest(transcript: Transcript) -> str:
    """SHA-256 of every message's (round, sender, receiver, tag, size), in order: equal
    digests mean the same messages of the same sizes."""
    rows = [[e.round, e.sender, e.receiver, e.tag, e.nbytes] for e in transcript.entries]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


class Progress:
    """Where the run is, as JSON lines in ``path`` (None: nowhere). ``pause_before``: a
    test hook; the run waits before the first batch whose label contains it until the
    file ``<path>.go`` exists (a test stops a party there)."""

    def __init__(self, path: str | Path | None = None, pause_before: str = "") -> None:
        self.path = Path(path) if path else None
        self.pause_before = pause_before

    def __call__(self, **event: Any) -> None:
        if self.path is None:
            return
        with self.path.open("a") as fh:
            fh.write(json.dumps({"t": time.time(), **event}, default=str) + "\n")

    def batch(self, calls: Sequence[Call]) -> None:
        labels = sorted({c.target.label for c in calls})
        self(event="batch", labels=labels, parties=len(calls))
        if self.pause_before and self.path is not None and any(
            self.pause_before in label for label in labels
        ):
            self(event="paused", before=self.pause_before)
            go = self.path.with_suffix(".go")
            deadline = time.monotonic() + 600
            while not go.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            self.pause_before = ""


class _Watched(RemoteExecutor):
    def __init__(self, *args: Any, watch: Callable[[Sequence[Call]], None], **kw: Any) -> None:
        self.watch = watch
        super().__init__(*args, **kw)

    def _run(self, calls: Sequence[Call], tolerate: bool) -> list[Any]:
        self.watch(calls)
        return super()._run(calls, tolerate)


def run_deployment(
    settings: DeploySettings,
    transport: Transport,
    progress: Progress | None = None,
    wait: float = 300.0,
) -> DeployedRun:
    """Run the deployment's experiment with the parties behind ``transport``."""
    t0 = time.perf_counter()
    progress = progress or Progress()
    config = check_config(settings.experiment)
    algorithm, seed = settings.algorithm, settings.seed
    registry = read_registry(settings.registry, settings.registrar_key)
    malicious = config.protocol.threat_model != HONEST_BUT_CURIOUS
    if malicious:  # the server signs with its own key, made in its own organisation
        identity = own_identity(settings.server_keydir, SERVER, create=False)
        if registry.keys.get(SERVER) != identity.public:
            raise ConfigError("the registrar's registry does not hold the server's key")
        install_identity(registry, identity)
    remote = sorted(settings.parties)
    directory = discover(transport, registry, remote, wait=wait, timeout=settings.party_timeout)
    progress(event="discovered", endpoints=dict(directory.endpoint))
    ids = [client_party_id(i) for i in range(config.clients)]
    stubs = [stub_view(dict(directory.meta[c])) for c in ids]
    _check_facts(directory, ids)
    cls = algorithm_class(algorithm, config.task)
    torch.manual_seed(seed)  # as securefgl run: the driver's draws (the initial model)
    np.random.seed(seed)
    noise_seed = seed if config.protocol.seeded_noise else None
    experiment_id = f"{config.name or 'run'}|seed={seed}"
    pki = Pki.held(registry) if malicious else None
    stack = build_stack(config, config.clients_per_round, experiment_id, noise_seed, pki=pki)
    channel = Channel(Transcript(store_payloads=config.store_payloads))
    held: list[str] = []

    def make(parties: Mapping[str, Party | Recipe]) -> Executor:
        return _Watched(parties, transport, directory.endpoint, settings.party_timeout,
                        watch=watch)  # fmt: skip

    def watch(calls: Sequence[Call]) -> None:
        held[:] = sorted(set(held) | set(keystore_parties()))
        progress.batch(calls)

    federation = Federation(stubs, channel, stack, seed, False, noise_seed, "remote",
                            executor_factory=make)  # fmt: skip
    algo = cls(config)
    with closing(federation):
        t_setup = time.perf_counter()
        with channel.transcript.family_scope(SETUP):  # the algorithm marks its structure
            algo.setup(federation)
        setup_seconds = time.perf_counter() - t_setup
        transcript = channel.transcript
        setup_bytes = transcript.total_bytes()
        progress(event="set up", seconds=setup_seconds, bytes=setup_bytes)
        evaluate = evaluation(config, algo, federation, stubs[0].num_classes)
        history = train_rounds(config, algo, stack, transcript, evaluate,
                               f"{algorithm} seed={seed}")  # fmt: skip
        silent = {p: w for ex in federation._made if isinstance(ex, RemoteExecutor)
                  for p, w in ex.why_silent.items()}  # fmt: skip
    final = {k: v for k, v in history[-1].items() if k.endswith(("_acc", "_f1"))}
    result = RunResult(
        algorithm, seed, algo.federated, final, history, {}, setup_bytes,
        _privacy(stack.privacy(), algo.privacy(), config.protocol.seeded_noise),
        None, None, setup_seconds, protection(config, algo), algo.model_label(), algo.model_short(),
        algo.setting, algo.local_work(), bytes_by_family=transcript.bytes_by_family(),
    )  # fmt: skip
    progress(event="done", final=final)
    return DeployedRun(result, directory, held, time.perf_counter() - t0, silent, transcript)


def _check_facts(directory: Directory, ids: list[str]) -> None:
    """Every client announced itself as who it is, and the sizes all must share agree."""
    for i, pid in enumerate(ids):
        if int(directory.meta[pid].get("client_id", -1)) != i:
            raise ConfigError(f"{pid} announces client id {directory.meta[pid].get('client_id')}")
    for fact in PUBLIC_FACTS[1:]:
        values = {str(directory.meta[p][fact]) for p in ids}
        if len(values) > 1:
            raise ConfigError(f"the clients disagree on {fact}: {sorted(values)}")
