"""Parties in Ray actors (Moritz et al., OSDI 2018), on one machine or a cluster.

Each of ``workers`` actors (:class:`PartyWorker`, one process each) hosts a share of the
parties, as Flower's simulation engine hosts many virtual clients per actor. A party is
built inside its actor from its :class:`~securefgl.federation.recipes.Recipe` (a client's
own view and the experiment's settings, as wire values), so no process but its own ever
holds its data. Between the driver and the actors only ids and wire-format bytes travel
(:mod:`securefgl.federation.codec`: call arguments and results; no pickled object).

Payloads go from actor to actor: a payload a party returns (in an envelope or bare) is put
in the Ray object store by its actor, which returns only a reference with the payload's
size and SHA-256; the driver keeps the Channel and records each envelope (sender,
receiver, tag, size, digest) on the transcript, and hands the reference to the receiver's
actor, which fetches the bytes from the sender's and checks the digest. Payload bytes reach
the driver only when the transcript keeps payloads (``--store-payloads``) or driver code
reads one; both are counted (:attr:`RayExecutor.driver_fetched_bytes`, and
:attr:`RayExecutor.driver_put_bytes` for payloads the driver itself sends). Same seed, same
result and same bytes as the local executor.

A batch of calls (:meth:`RayExecutor.call`, and every protocol phase) is split per actor
and the actors run their shares at the same time; the calls on one actor run in order.
``party_timeout`` bounds each batch. A worker that dies or does not answer in time is
ended and its parties are *silent* from then on (:attr:`RayExecutor.silent`): inside a
protocol phase they count as dropped clients (the protocol's dropout handling decides
whether the round completes, e.g. SecAgg above its threshold); any other call to them
raises :class:`PartyError` (:class:`PartyTimeoutError` for a timeout). Parties that share
a worker go silent together.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from protocols import base as protocols_base
from protocols.base import ProtocolError
from protocols.identity import install_provisioned, keystore_parties
from protocols.wire import Payload
from securefgl.config import ConfigError
from securefgl.extras import require
from securefgl.federation.codec import DeferredPayload, checked, decode_value, encode_value
from securefgl.federation.executor import Executor
from securefgl.federation.party import Call, PartyError, Target
from securefgl.federation.recipes import (
    Recipe,
    build,
    builder_modules,
    import_builder_modules,
)
from securefgl.federation.subnormals import subnormals_flushed


class PartyTimeoutError(PartyError):
    """Parties did not answer within the executor's ``party_timeout``."""

    def __init__(self, parties: Sequence[str], seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} s from {', '.join(parties)}")
        self.parties = list(parties)


SECUREFGL_ROOT = Path(__file__).resolve().parents[1]  # the package this process imports


@functools.cache
def code_digest() -> str:
    """SHA-256 of this process's securefgl and protocols sources: a worker must run the
    driver's code (a worker started elsewhere may import another checkout)."""
    digest = hashlib.sha256()
    for root in (SECUREFGL_ROOT, Path(protocols_base.__file__).resolve().parent):
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def check_ray_address(address: str | None, timeout: float = 10.0) -> None:
    """:class:`ConfigError` when ``address`` (``host:port`` or ``ray://host:port``; None and
    ``auto`` are not checked) does not accept a connection within ``timeout`` seconds."""
    if address is None or address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"ray_address {address!r}: expected host:port or ray://host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as err:
        raise ConfigError(f"ray_address {address}: no Ray cluster answers there ({err})") from None


class PartyWorker:
    """One actor's parties: built from recipes here, called with wire-encoded arguments."""

    def __init__(self, threads: int = 1, modules: bytes = b"", digest: str = "") -> None:
        import torch

        if digest and digest != code_digest():
            raise RuntimeError(
                f"this Ray worker runs securefgl from {SECUREFGL_ROOT}, "
                "other code than the driver's: start the workers from the driver's "
                "installation (the same checkout and version)"
            )
        torch.set_num_threads(threads)
        # the code it will run (wire-encoded module names): part of starting the worker
        started = time.perf_counter()
        import_builder_modules(decode_value(modules) if modules else [])
        self._import_seconds = time.perf_counter() - started
        self.parties: dict[str, Any] = {}

    def import_seconds(self) -> float:
        """Seconds this worker spent importing its parties' builder modules when it started."""
        return self._import_seconds

    @subnormals_flushed()  # per call: Ray may run an actor's methods on any thread
    def build(self, party_id: str, data: bytes) -> None:
        spec = decode_value(data)
        for keys in spec["keys"]:  # malicious-server model: this party's signing keys
            install_provisioned(keys, party_id)
        self.parties[party_id] = build(Recipe(spec["builder"], spec["args"]))

    @subnormals_flushed()
    def run(
        self, calls: list[tuple[str, list[str], str, bytes]], refs: Sequence[Any] = ()
    ) -> tuple[list[tuple[str, bytes, float]], list[Any]]:
        """Each call's (status, encoded result or error text, seconds), in order: status
        ``ok``, ``protocol`` (a :class:`ProtocolError`: the protocol run cannot complete) or
        ``error``; the calls after a failed one are not run. A call is (party, the import
        paths of the method's role interfaces, the method's name, encoded [args, kwargs]);
        the payloads in its arguments are references into ``refs`` (object-store refs).
        Returned beside: the refs of the payloads these calls sent."""
        import ray

        out: list[tuple[str, bytes, float]] = []
        sent: list[Any] = []

        def fetch(index: int, nbytes: int, digest: str) -> Payload:
            return Payload.from_bytes(checked(ray.get(refs[index]), nbytes, digest), nbytes)

        def put(payload: Payload) -> tuple[int, int, str]:
            return _put_payload(ray, sent, payload.to_bytes())

        for pid, interfaces, method, data in calls:
            t0 = time.perf_counter()
            try:
                if pid not in self.parties:
                    raise PartyError(f"no party {pid!r} on this worker")
                fn = Target.from_wire(interfaces, method).bind(self.parties[pid])
                args, kwargs = decode_value(data, unstash=fetch)
                result = encode_value(fn(*args, **kwargs), stash=put)
            except Exception as exc:  # reported to the driver, which raises it
                status = "protocol" if isinstance(exc, ProtocolError) else "error"
                out.append((status, f"{type(exc).__name__}: {exc}".encode(), 0.0))
                break
            out.append(("ok", result, time.perf_counter() - t0))
        return out, sent

    def held(self) -> list[str]:
        return sorted(self.parties)

    def signing_keys(self) -> list[str]:
        """The parties whose signing keys this worker holds (malicious-server model)."""
        return keystore_parties()

    def peak_rss_bytes(self) -> int:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB

    def where(self) -> tuple[str, int]:
        """(Ray node id, process id) of this worker."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def float_row_digests(self, min_columns: int = 2) -> list[str]:
        """SHA-256 of every row of every float matrix reachable in this process (numpy
        arrays and torch tensors): lets a test check that no other client's features are
        here."""
        import gc
        import hashlib

        import numpy as np
        import torch

        digests: set[str] = set()
        for obj in gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.dim() == 2 and obj.is_floating_point():
                arr = obj.detach().to(torch.float32).numpy()
            elif isinstance(obj, np.ndarray) and obj.ndim == 2 and obj.dtype.kind == "f":
                arr = obj.astype(np.float32)
            else:
                continue
            if arr.shape[1] >= min_columns:
                digests.update(hashlib.sha256(row.tobytes()).hexdigest() for row in arr)
        return sorted(digests)


def _put_payload(ray: Any, refs: list[Any], data: bytes) -> tuple[int, int, str]:
    """Put a payload's bytes in this process's object store; (its index in ``refs``, its
    size, its SHA-256) for a wire reference."""
    refs.append(ray.put(data))
    return len(refs) - 1, len(data), hashlib.sha256(data).hexdigest()


def ray_module() -> Any:
    """The ``ray`` module, or :class:`~securefgl.extras.MissingExtraError` naming the
    ``ray`` extra (Ray is optional: ``pip install 'securefgl[ray]'``)."""
    return require("ray", "--executor ray")


class RayExecutor(Executor):
    """Parties in ``workers`` Ray actors; see the module docstring.

    ``address``: a running cluster (``ray start --head`` prints it); None starts a local
    Ray with ``workers`` CPUs if none is running. ``threads``: torch threads per actor.
    ``keys``: the registrars' :meth:`~protocols.identity.Pki.provisioning` of these parties
    (malicious-server model), one per PKI; each worker receives the keys of the parties it
    hosts only.

    ``clients``: the parties that may share a worker (spread over ``workers`` actors); every
    other party (the server, edge servers, key authorities, third parties) gets an actor of
    its own, so no server-side code runs in a process that holds a client's data or keys.
    None: every party is pooled. ``co_host``: pool every party anyway (fewer processes).
    Either way the driver is trusted: it deals the signing keys, routes every message (their
    sizes and digests, not their payloads) and could run code in any actor
    (``docs/architecture.md``).
    """

    def __init__(
        self,
        parties: Mapping[str, Recipe],
        workers: int = 2,
        address: str | None = None,
        party_timeout: float | None = None,
        threads: int = 1,
        keys: Sequence[Mapping[str, Any]] = (),
        clients: Collection[str] | None = None,
        co_host: bool = False,
    ) -> None:
        not_recipes = [pid for pid, p in parties.items() if not isinstance(p, Recipe)]
        if not_recipes:
            raise PartyError(
                f"the ray executor builds every party where it lives, from a recipe; "
                f"{', '.join(not_recipes[:3])} were built in the driver (this algorithm "
                "runs on the local executor only)"
            )
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        started = time.perf_counter()
        modules = encode_value(builder_modules(parties.values()))
        ray = ray_module()
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address is None:
                options["num_cpus"] = workers
            check_ray_address(address)
            ray.init(address=address, **options)
        self.ray = ray
        self.party_timeout = party_timeout
        actor = ray.remote(num_cpus=0)(PartyWorker)
        nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])  # workers round-robin
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as OnNode

        pooled = [p for p in parties if co_host or clients is None or p in clients]
        alone = [p for p in parties if p not in pooled]
        # clients spread round-robin over ``workers`` actors; the others one actor each
        self.home = {pid: i % workers for i, pid in enumerate(pooled)}
        self.home |= {pid: workers + j for j, pid in enumerate(alone)}
        self.workers = [
            actor.options(scheduling_strategy=OnNode(nodes[i % len(nodes)], soft=False)).remote(
                threads, modules, code_digest()
            )
            for i in range(workers + len(alone))
        ]
        #: of the start-up, the slowest worker's import of the builder modules
        self.import_seconds = max(ray.get([w.import_seconds.remote() for w in self.workers]))
        #: starting Ray and the worker processes, with the modules of the parties' builders
        #: imported (as the driver has them), not building the parties
        self.startup_seconds = time.perf_counter() - started
        self.seconds_by_party: dict[str, float] = {}
        #: payload bytes brought into the driver (kept transcripts, driver code reading one)
        self.driver_fetched_bytes = 0
        #: payload bytes of envelopes the driver itself sent (put in the object store)
        self.driver_put_bytes = 0
        #: encoded call arguments sent and results received by the driver (ids, settings,
        #: numbers the driver code uses; envelopes only as references)
        self.driver_call_bytes = 0
        self.driver_result_bytes = 0
        self.peak_rss_by_worker: list[int | None] = []
        self._lost: set[int] = set()

        def own_key(pid: str) -> list[dict[str, Any]]:
            return [{"registry": k["registry"], "keys": {pid: k["keys"][pid]}}
                    for k in keys if pid in k["keys"]]  # fmt: skip

        pending = [
            self.workers[self.home[pid]].build.remote(
                pid, encode_value({"builder": r.builder, "args": r.args, "keys": own_key(pid)})
            )
            for pid, r in parties.items()
        ]
        try:  # no party_timeout here: start-up is not a party's answer
            ray.get(pending)
        except ray.exceptions.RayError as exc:
            raise PartyError(f"building the parties failed: {exc}") from None

    def call(self, calls: Sequence[Call]) -> list[Any]:
        return self._run(calls, tolerate=False)

    def call_survivors(self, calls: Sequence[Call]) -> list[Any | None]:
        return self._run(calls, tolerate=True)

    def _lose(self, worker: int) -> list[str]:
        """Worker ``worker`` died or hung: end it; its parties are silent from now on."""
        self.ray.kill(self.workers[worker])
        self._lost.add(worker)
        lost = [pid for pid, w in self.home.items() if w == worker]
        self.silent = self.silent | frozenset(lost)
        return lost

    def _run(self, calls: Sequence[Call], tolerate: bool) -> list[Any]:
        per_worker: dict[int, list[int]] = {}
        for i, call in enumerate(calls):
            if call.party not in self.home:
                raise PartyError(f"no party {call.party!r} in this executor")
            if call.party in self.silent:
                raise PartyError(f"{call.party} went silent earlier in this run")
            per_worker.setdefault(self.home[call.party], []).append(i)
        refs = {
            self.workers[w].run.remote(*self._wire_calls([calls[i] for i in idx])): w
            for w, idx in per_worker.items()
        }
        ready, late = self.ray.wait(list(refs), num_returns=len(refs), timeout=self.party_timeout)
        out: list[Any] = [None] * len(calls)
        lost: list[str] = []
        for ref in late:
            lost += self._lose(refs[ref])
        for ref in ready:
            w = refs[ref]
            try:
                answer, sent = self.ray.get(ref)
            except self.ray.exceptions.RayActorError:
                lost += self._lose(w)
                continue

            def deferred(index: int, nbytes: int, digest: str,
                         sent: list[Any] = sent) -> Payload:  # fmt: skip
                return DeferredPayload(sent[index], nbytes, digest, self._fetch)

            for i, (status, data, seconds) in zip(per_worker[w], answer, strict=False):
                call = calls[i]
                if status != "ok":
                    where = call.label
                    error = ProtocolError if status == "protocol" else PartyError
                    raise error(f"{where} failed on worker {w}: {data.decode()}")
                self.driver_result_bytes += len(data)
                out[i] = decode_value(data, unstash=deferred)
                self.seconds_by_party[call.party] = (
                    self.seconds_by_party.get(call.party, 0.0) + seconds
                )
        if lost and not tolerate:
            named = sorted({c.party for c in calls} & set(lost))
            if late:
                raise PartyTimeoutError(named, self.party_timeout or 0.0)
            raise PartyError(f"{', '.join(named)} went silent: their worker died")
        return out

    def _wire_calls(self, calls: Sequence[Call]) -> tuple[list[tuple[str, list[str], str, bytes]],
                                                           list[Any]]:  # fmt: skip
        """One actor's batch as wire calls, and the payload refs its envelopes point to: a
        payload held in an actor's object store is passed on by reference; one the driver
        made is put in the store here (counted in :attr:`driver_put_bytes`)."""
        refs: list[Any] = []

        def stash(payload: Payload) -> tuple[int, int, str]:
            if isinstance(payload, DeferredPayload):
                refs.append(payload.handle)
                return len(refs) - 1, payload.nbytes, payload.digest
            data = payload.to_bytes()
            self.driver_put_bytes += len(data)
            return _put_payload(self.ray, refs, data)

        wire = []
        for call in calls:
            interfaces, method = call.target.to_wire()
            args = encode_value([list(call.args), call.kwargs], stash=stash)
            self.driver_call_bytes += len(args)
            wire.append((call.party, interfaces, method, args))
        return wire, refs

    def _fetch(self, handle: Any) -> bytes:
        data: bytes = self.ray.get(handle)
        self.driver_fetched_bytes += len(data)
        return data

    def shutdown(self) -> None:
        """End the worker actors (Ray itself keeps running); their peak resident memory
        is kept in :attr:`peak_rss_by_worker` (bytes; None for a lost worker)."""
        refs = [None if i in self._lost else w.peak_rss_bytes.remote()
                for i, w in enumerate(self.workers)]  # fmt: skip
        self.peak_rss_by_worker = []
        for i, ref in enumerate(refs):
            try:
                self.peak_rss_by_worker.append(None if ref is None else self.ray.get(ref))
            except self.ray.exceptions.RayActorError:
                self.peak_rss_by_worker.append(None)
            self.ray.kill(self.workers[i])
        self.workers = []
