"""Parties in other processes or organisations, reached through a transport that carries
bytes: the driver's side (:class:`RemoteExecutor`) and the host's side (:class:`PartyHost`).

Unlike :mod:`~securefgl.federation.ray_executor`, nothing here assumes the driver is
trusted by the parties: a party's process is started by its owner, makes its own keys and
answers only what it checks (``securefgl.deploy.daemon``). The driver finds the parties by
a signed *hello* (:func:`discover`: each party signs the driver's nonce and the endpoint it
answers on with its registered key, so whoever relays the messages cannot re-route a
party), builds each remote party from its recipe *where it lives* (a ``build`` request)
and then sends typed calls by reference (:class:`~securefgl.federation.party.Target`'s
wire form) with wire-encoded arguments. Every request and reply is one
:func:`~securefgl.federation.codec.encode_value` message (no pickle):

* ``{"kind": "hello", "nonce", "where"}`` -> ``{"party", "public", "meta", "signature"}``
* ``{"kind": "build", "party", "session", "seq", "builder", "args"}`` -> ``{"results"}``
* ``{"kind": "calls", "party", "session", "seq", "calls": [[interfaces, method, args]]}``
  -> ``{"results": [[status, data, seconds], ...]}`` (:meth:`PartyHost.run`)

``seq`` grows with every request of a session, so a host refuses a replayed or late
request. The driver keeps the Channel, as with every executor: envelopes a party returns
are decoded, recorded on the transcript and handed to their receivers in their next call,
so the same seed gives the same result and the same bytes as the local executor.

The transport (:class:`Transport`) delivers one request per party and collects the
replies; a party that does not answer within ``party_timeout``, or whose transport reports
it unreachable, is *silent* from then on (:attr:`Executor.silent`), as on Ray.
"""

from __future__ import annotations

import os
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from protocols.base import ProtocolError
from protocols.identity import KeyRegistry, SignatureError, statement
from securefgl.federation.codec import decode_value, encode_value
from securefgl.federation.executor import Executor, LocalExecutor
from securefgl.federation.party import Call, Party, PartyError, Target
from securefgl.federation.ray_executor import PartyTimeoutError
from securefgl.federation.recipes import Recipe, build

HELLO_DOMAIN = "securefgl/remote/hello/v1"
#: modules a host imports role interfaces and builders from (nothing else can be named)
TRUSTED_MODULES = ("securefgl.", "protocols.")


@dataclass(frozen=True)
class Silence:
    """No usable reply from an endpoint, and why (timeout, unreachable, node gone)."""

    reason: str


class Transport(ABC):
    """Carries one request (bytes) per endpoint and brings back the replies."""

    @abstractmethod
    def endpoints(self, expected: int, wait: float) -> list[str]:
        """The endpoints that may host parties (waits up to ``wait`` s for ``expected``)."""

    @abstractmethod
    def push(self, requests: Mapping[str, bytes]) -> Any:
        """Send each endpoint its request; a handle for :meth:`collect`."""

    @abstractmethod
    def collect(self, handle: Any, timeout: float | None) -> dict[str, bytes | Silence]:
        """Every pushed endpoint's reply, or :class:`Silence` after ``timeout`` s."""

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release connections."""


def hello_statement(nonce: bytes, where: str, party: str, meta: Mapping[str, Any]) -> bytes:
    """What a party signs to say it answers on endpoint ``where`` (``meta``: the public
    facts about its data it announces, e.g. its number of features)."""
    return statement(HELLO_DOMAIN, "", None, "hello", party,
                     {"nonce": nonce, "where": where, "meta": dict(meta)})  # fmt: skip


@dataclass(frozen=True)
class Directory:
    """Who answers where, as the parties signed it, and what each announced."""

    endpoint: Mapping[str, str]  # party id -> endpoint
    meta: Mapping[str, Mapping[str, Any]]  # party id -> its announced public facts
    refused: Mapping[str, str]  # endpoint -> why no party was mapped to it


def discover(
    transport: Transport,
    registry: KeyRegistry,
    expected: Collection[str],
    wait: float = 120.0,
    timeout: float = 120.0,
) -> Directory:
    """Ask every endpoint who it hosts; keep the answers whose signature verifies against
    ``registry`` (the registrar's, never the relay's). :class:`PartyError` unless every
    party of ``expected`` answered on exactly one endpoint."""
    endpoints = transport.endpoints(len(expected), wait)
    nonce = os.urandom(16)
    requests = {e: encode_value({"kind": "hello", "nonce": nonce, "where": e}) for e in endpoints}
    replies = transport.collect(transport.push(requests), timeout)
    where: dict[str, str] = {}
    meta: dict[str, Mapping[str, Any]] = {}
    refused: dict[str, str] = {}
    for endpoint, reply in replies.items():
        try:
            if isinstance(reply, Silence):
                raise PartyError(reply.reason)
            hello = decode_value(reply)
            pid = str(hello["party"])
            stmt = hello_statement(nonce, endpoint, pid, hello["meta"])
            registry.verify(pid, stmt, hello["signature"], "hello")
            if pid in where:
                raise PartyError(f"{pid} also answers on {where[pid]}")
        except (PartyError, SignatureError, KeyError, TypeError, ValueError) as err:
            refused[endpoint] = f"{type(err).__name__}: {err}"
            continue
        where[pid], meta[pid] = endpoint, dict(hello["meta"])
    missing = sorted(set(expected) - set(where))
    if missing:
        raise PartyError(
            f"no verified hello from {', '.join(missing)} (refused endpoints: {refused})"
        )
    return Directory(where, meta, refused)


class RemoteExecutor(Executor):
    """Parties of ``parties`` found in ``directory`` live behind ``transport`` (built there
    from their recipes); the others (e.g. the server) live in this process.

    A batch (:meth:`call`, and every protocol phase) sends one request per remote party
    with all of its calls, runs the local calls meanwhile, then collects the replies.
    """

    def __init__(
        self,
        parties: Mapping[str, Party | Recipe],
        transport: Transport,
        directory: Mapping[str, str],
        party_timeout: float | None = None,
    ) -> None:
        self.transport = transport
        self.party_timeout = party_timeout
        self.endpoint = {p: directory[p] for p in parties if p in directory}
        not_recipes = [p for p in self.endpoint if not isinstance(parties[p], Recipe)]
        if not_recipes:
            raise PartyError(f"{', '.join(not_recipes)}: a remote party is built where it "
                             "lives, from a recipe")  # fmt: skip
        self.local = LocalExecutor({p: v for p, v in parties.items() if p not in self.endpoint})
        self.session = secrets.token_hex(8)
        self._seq = 0
        self.seconds_by_party: dict[str, float] = {}
        self.why_silent: dict[str, str] = {}
        builds = {
            pid: {"kind": "build", "builder": r.builder, "args": r.args}
            for pid, r in parties.items()
            if pid in self.endpoint and isinstance(r, Recipe)
        }
        built, _ = self._exchange(builds, tolerate=False)
        for pid, results in built.items():
            status, data, _ = (results or [["error", b"no answer", 0.0]])[0]
            if status != "ok":
                raise PartyError(f"building {pid} failed on its host: {data.decode()}")

    def held(self, party_id: str) -> Party | None:
        return self.local.held(party_id)

    def call(self, calls: Sequence[Call]) -> list[Any]:
        return self._run(calls, tolerate=False)

    def call_survivors(self, calls: Sequence[Call]) -> list[Any | None]:
        return self._run(calls, tolerate=True)

    def _exchange(
        self, requests: Mapping[str, dict[str, Any]], tolerate: bool, local: Sequence[Call] = ()
    ) -> tuple[dict[str, list[Any] | None], list[Any]]:
        """Send each remote party its request, run ``local`` meanwhile; each party's
        replies (None: silent) and the local results."""
        wire = {}
        for pid, request in requests.items():
            self._seq += 1
            body = {**request, "party": pid, "session": self.session, "seq": self._seq}
            wire[self.endpoint[pid]] = encode_value(body)
        handle = self.transport.push(wire) if wire else None
        local_out = self.local.call(local) if local else []
        replies = self.transport.collect(handle, self.party_timeout) if wire else {}
        out: dict[str, list[Any] | None] = {}
        lost, late = [], []
        for pid in requests:
            reply = replies.get(self.endpoint[pid], Silence("no reply"))
            if isinstance(reply, Silence):
                self.silent = self.silent | {pid}
                self.why_silent[pid] = reply.reason
                (late if reply.reason.startswith("timeout") else lost).append(pid)
                out[pid] = None
                continue
            out[pid] = list(decode_value(reply)["results"])
        if (lost or late) and not tolerate:
            if late and not lost:
                raise PartyTimeoutError(sorted(late), self.party_timeout or 0.0)
            why = "; ".join(f"{p}: {self.why_silent[p]}" for p in sorted(lost + late))
            raise PartyError(f"{', '.join(sorted(lost + late))} went silent ({why})")
        return out, local_out

    def _run(self, calls: Sequence[Call], tolerate: bool) -> list[Any]:
        remote: dict[str, list[int]] = {}
        local: list[int] = []
        for i, call in enumerate(calls):
            if call.party in self.silent:
                raise PartyError(f"{call.party} went silent earlier in this run")
            if call.party in self.endpoint:
                remote.setdefault(call.party, []).append(i)
            else:
                local.append(i)
        requests = {
            pid: {"kind": "calls", "calls": [_wire_call(calls[i]) for i in idx]}
            for pid, idx in remote.items()
        }
        answers, local_out = self._exchange(requests, tolerate, [calls[i] for i in local])
        out: list[Any] = [None] * len(calls)
        for i, result in zip(local, local_out, strict=True):
            out[i] = result
        for pid, idx in remote.items():
            results = answers[pid]
            if results is None:
                continue
            for i, (status, data, seconds) in zip(idx, results, strict=False):
                if status != "ok":
                    error = ProtocolError if status == "protocol" else PartyError
                    raise error(f"{calls[i].label} failed on {pid}'s host: {data.decode()}")
                out[i] = decode_value(data)
                self.seconds_by_party[pid] = self.seconds_by_party.get(pid, 0.0) + seconds
            if len(results) < len(idx):
                raise PartyError(f"{pid}'s host answered {len(results)} of {len(idx)} calls")
        return out

    def shutdown(self) -> None:
        self.transport.close()


def _wire_call(call: Call) -> list[Any]:
    interfaces, method = call.target.to_wire()
    return [interfaces, method, encode_value([list(call.args), call.kwargs])]


def check_trusted(path: str, what: str) -> None:
    """PartyError unless ``path`` names something in :data:`TRUSTED_MODULES`."""
    module = path.partition(":")[0]
    if not module.startswith(TRUSTED_MODULES):
        raise PartyError(f"{what} {path!r} is outside {', '.join(TRUSTED_MODULES)}")


class PartyHost:
    """The parties of one process, built here from recipes and called with wire-encoded
    arguments; only classes and builders of :data:`TRUSTED_MODULES` can be named."""

    def __init__(self) -> None:
        self.parties: dict[str, Party] = {}

    def build(self, party_id: str, r: Recipe) -> None:
        check_trusted(r.builder, "builder")
        self.parties[party_id] = build(r)

    def run(self, calls: Sequence[tuple[str, Sequence[str], str, bytes]]) -> list[list[Any]]:
        """Each call's ``[status, encoded result or error text, seconds]``, in order:
        status ``ok``, ``protocol`` (a :class:`ProtocolError`: the protocol run cannot
        complete) or ``error``; the calls after a failed one are not run. A call is
        (party, the import paths of the method's role interfaces, the method's name,
        encoded ``[args, kwargs]``)."""
        out: list[list[Any]] = []
        for pid, interfaces, method, data in calls:
            t0 = time.perf_counter()
            try:
                if pid not in self.parties:
                    raise PartyError(f"no party {pid!r} here")
                for path in interfaces:
                    check_trusted(str(path), "role interface")
                fn = Target.from_wire(list(interfaces), method).bind(self.parties[pid])
                args, kwargs = decode_value(data)
                result = encode_value(fn(*args, **kwargs))
            except Exception as exc:  # reported to the driver, which raises it
                status = "protocol" if isinstance(exc, ProtocolError) else "error"
                out.append([status, f"{type(exc).__name__}: {exc}".encode(), 0.0])
                break
            out.append(["ok", result, time.perf_counter() - t0])
        return out
