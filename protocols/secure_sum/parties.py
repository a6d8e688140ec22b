"""The parties of a secure sum: client (receiver and sender), server (relay), the protocol.

Clients have no direct links: every message goes client -> server -> client through
:func:`protocols.base.run_phases`. Round phases, identical in every mode: receiver
``announce`` (its public request) -> server ``route_requests`` (one message per request
and sender, the same bytes for every sender) -> sender ``contribute`` (its mode-encoded
block per receiver, all in one message: :mod:`protocols.bundles`) -> server ``deliver``
(the blocks, or ONE aggregate) -> receiver ``finish``. Each party only gets its own inputs
(:meth:`SecureSumClient.expect_sum`, :meth:`SecureSumClient.add_contribution`); the modes
subclass the three classes.

Public in every mode (server, receiver, its senders): the receiver, the sender set, the
block shape, the support, message sizes and timing. A receiver's own block stays with it as
a local term. No dropout recovery (unlike SecAgg): a missing term makes the result wrong,
so a dropped sender aborts the batch with :class:`ProtocolError` (re-run with a fresh
``round_idx``).

Malicious-server mode (``threat_model="malicious"``, a :class:`~protocols.identity.KeyRegistry`
from the experiment): every set-up key or context and every receiver's request is signed
with the party's long-term key (:func:`~protocols.identity.local_identity`) and checked by
the parties that rely on the server relaying it (no key substitution, no forged, altered or
replayed request). Unverified: the sum itself (a server can still add any vector to a
masked or encrypted sum: a wrong result, not a leak) and which jobs run at all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from protocols.base import Envelope, Inbox, Phase, ProtocolError, ProtocolParty, Role
from protocols.bundles import bundle, unbundle
from protocols.identity import (
    HONEST_BUT_CURIOUS,
    KeyRegistry,
    Pki,
    check_threat_model,
    digest,
    local_identity,
    statement,
)
from protocols.secure_sum.blocks import (
    Block,
    Total,
    block_shape,
    canonical_coo,
    check_block,
    is_sparse,
)
from protocols.secure_sum.jobs import (
    SumRequest,
    SumResult,
    SumTooLargeError,
    TooFewSendersError,
    add_local,
    empty_total,
)
from protocols.wire import DEFAULT_MAX_MESSAGE_BYTES as MAX_MESSAGE
from protocols.wire import Payload, WireFormatError

TAG_REQUEST = "secure-sum/request"
TAG_ROUTED_REQUEST = "secure-sum/routed-request"
TAG_CONTRIBUTION = "secure-sum/contribution"
TAG_DELIVERY = "secure-sum/delivery"

ROUND_PHASES = (
    Phase(Role.CLIENT, "announce"),
    Phase(Role.SERVER, "route_requests"),
    Phase(Role.CLIENT, "contribute"),
    Phase(Role.SERVER, "deliver"),
    Phase(Role.CLIENT, "finish"),
)
#: Setup phases of the modes that exchange keys (masked, ckks).
SETUP_PHASES = (
    Phase(Role.CLIENT, "setup_publish"),
    Phase(Role.SERVER, "setup_forward"),
    Phase(Role.CLIENT, "setup_install"),
)


class SecureSumClient(ProtocolParty):
    """One client: receiver of its own sums, sender to others. Holds only its own inputs.

    Per round: :meth:`begin_round`, then :meth:`expect_sum` for each sum it receives (at most
    one per round) and :meth:`add_contribution` for each block it sends; after the round
    phases :meth:`result` holds what it received.
    """

    def __init__(
        self, party_id: str, server_id: str, client_ids: Sequence[str], min_senders: int
    ) -> None:
        super().__init__(party_id)
        self.server_id = server_id
        self.federation = frozenset(client_ids)
        self.min_senders = min_senders
        self._used_rounds: set[int] = set()
        self._round: int | None = None
        self._request: SumRequest | None = None
        self._local: Block | None = None
        self._outgoing: dict[str, Block] = {}
        self._result: SumResult | None = None
        self.registry: KeyRegistry | None = None  # malicious-server mode (signed messages)
        self.signing_domain: tuple[str, str] = ("", "")  # (mode, experiment id)

    # -- signatures (malicious-server mode) ----------------------------------------------
    def _sign(self, step: str, round_idx: int | None, *content: object) -> bytes:
        assert self.registry is not None
        mode, exp = self.signing_domain
        stmt = statement(f"secure-sum/{mode}", exp, round_idx, step, self.party_id, *content)
        return local_identity(self.registry, self.party_id).sign(stmt)

    def _verify(
        self, signer: str, step: str, round_idx: int | None, sig: object, *content: object
    ) -> None:
        assert self.registry is not None
        mode, exp = self.signing_domain
        stmt = statement(f"secure-sum/{mode}", exp, round_idx, step, signer, *content)
        self.registry.verify(signer, stmt, sig, f"{self.party_id}: {step} of {signer!r}")

    # -- inputs ------------------------------------------------------------------------
    def begin_round(self, round_idx: int) -> None:
        """Start round ``round_idx``: must be fresh for this client (masks derive from it)."""
        if not isinstance(round_idx, int) or isinstance(round_idx, bool) or round_idx < 0:
            raise ValueError(f"round_idx must be a non-negative int, got {round_idx!r}")
        if round_idx in self._used_rounds:
            raise ProtocolError(
                f"{self.party_id}: round {round_idx} was already used; every secure-sum call "
                "needs a fresh round_idx (e.g. the hop index), or masks would repeat"
            )
        self._used_rounds.add(round_idx)
        self._round = round_idx
        self._request, self._local, self._outgoing, self._result = None, None, {}, None

    def expect_sum(self, request: SumRequest, local: Block | None = None) -> None:
        """Receiver side: announce ``request`` this round; ``local`` (own block, same shape)
        is added to the sum here and never sent."""
        who = self._who()
        if self._request is not None:
            raise ProtocolError(f"{who}: one sum per receiver per round")
        if who in request.senders:
            raise ValueError(f"{who}: the receiver's own block is the local term, not a sender")
        if not set(request.senders) <= self.federation:
            raise ValueError(f"{who}: senders outside the federation: {request.senders}")
        n = len(request.senders)
        if 0 < n < self.min_senders:
            what = "that sender's block itself" if n == 1 else f"the sum of only {n} blocks"
            raise TooFewSendersError(
                f"receiver {who!r}: refusing a sum over {n} sender(s) {list(request.senders)} "
                f"(min_senders={self.min_senders}): the receiver would learn {what}; set "
                f"min_senders={n} to allow it"
            )
        if local is not None:
            shape, _ = check_block(local, who)
            if shape != request.shape:
                raise ValueError(f"{who}: local block shape {shape} != {request.shape}")
        self._request, self._local = request, local

    def add_contribution(self, receiver: str, block: Block) -> None:
        """Sender side: ``block`` for ``receiver``'s sum this round (checked locally now;
        encoded once the receiver's request arrives)."""
        who = self._who()
        if receiver == who or receiver not in self.federation:
            raise ValueError(f"{who}: cannot contribute to {receiver!r}")
        if receiver in self._outgoing:
            raise ValueError(f"{who}: a second block for {receiver!r} in one round")
        if is_sparse(block) and block.ndim == 2:
            block = canonical_coo(block)  # once: checks, support and gather reuse it
        _, peak = check_block(block, who)
        self._check_peak(peak, receiver)
        self._outgoing[receiver] = block

    def result(self) -> SumResult | None:
        return self._result

    # -- phases --------------------------------------------------------------------------
    def announce(self, inbox: Inbox) -> list[Envelope]:
        self._expect_empty(inbox)
        if self._request is None or not self._request.senders:
            return []
        self._require_ready()
        payload = self._request.to_payload(self._r, self.party_id)
        if self.registry is not None:
            payload.fields["sig"] = self._sign("request", self._r, request_content(self._request))
        return [Envelope(self.party_id, self.server_id, TAG_REQUEST, payload)]

    def contribute(self, inbox: Inbox) -> list[Envelope]:
        who = self.party_id
        requests: dict[str, SumRequest] = {}
        for env in inbox:
            payload = self._from_server(env, TAG_ROUTED_REQUEST)
            receiver = payload.meta.get("receiver")
            if not isinstance(receiver, str) or receiver in requests:
                raise ProtocolError(f"{who}: malformed or duplicate routed request")
            request = SumRequest.from_payload(payload, who)
            if who not in request.senders or receiver in request.senders:
                raise ProtocolError(f"{who}: request of {receiver!r} does not list this client")
            if self.registry is not None:
                sig = payload.fields.get("sig")
                self._verify(receiver, "request", self._r, sig, request_content(request))
            requests[receiver] = request
        if not requests and not self._outgoing:
            return []
        unrequested = sorted(set(self._outgoing) - set(requests))
        if unrequested:
            raise ProtocolError(
                f"{who}: receivers {unrequested} did not request a sum from this client (a "
                "receiver dropped or the jobs disagree); no dropout recovery: abort and re-run"
            )
        missing = sorted(set(requests) - set(self._outgoing))
        if missing:
            raise ProtocolError(f"{who}: receivers {missing} expect a block this client lacks")
        self._require_ready()
        for receiver, request in requests.items():
            if len(request.senders) < self.min_senders:
                raise TooFewSendersError(
                    f"{who}: refusing to contribute to {receiver!r}'s sum of only "
                    f"{len(request.senders)} senders (min_senders={self.min_senders})"
                )
            block = self._outgoing[receiver]
            if block_shape(block) != request.shape:
                raise ProtocolError(
                    f"{who}: block for {receiver!r} has shape {block_shape(block)}, the "
                    f"request says {request.shape}"
                )
        self._start_encoding(requests)
        parts = {r: self._encode(r, request, self._outgoing[r]) for r, request in requests.items()}
        self._outgoing = {}
        return [Envelope(who, self.server_id, TAG_CONTRIBUTION, bundle(parts, round=self._r))]

    def _start_encoding(self, requests: dict[str, SumRequest]) -> None:
        """Hook before this round's :meth:`_encode` calls (all of them see ``requests``)."""

    def finish(self, inbox: Inbox) -> list[Envelope]:
        request = self._request
        if request is None:
            self._expect_empty(inbox)
            return []
        if not request.senders:
            self._expect_empty(inbox)
            total = empty_total(request)
        else:
            for env in inbox:
                self._from_server(env, TAG_DELIVERY)
            total = self._combine(request, inbox)
        total = add_local(total, self._local, request)
        self._result = SumResult(self.party_id, total, request.senders, self._local is not None)
        self._local = None
        return []

    # -- mode hooks ----------------------------------------------------------------------
    def _check_peak(self, peak: float, receiver: str) -> None:
        """Refuse values the mode cannot sum exactly (default: any finite value)."""

    def _require_ready(self) -> None:
        """Raise if setup (keys) is missing."""

    @abstractmethod
    def _encode(self, receiver: str, request: SumRequest, block: Block) -> Payload:
        """This sender's part for ``receiver`` (its bundle names the round and receiver)."""

    @abstractmethod
    def _combine(self, request: SumRequest, deliveries: Inbox) -> Total:
        """The remote senders' sum from the server's deliveries, in the result format."""

    # -- helpers -------------------------------------------------------------------------
    @property
    def _r(self) -> int:
        if self._round is None:
            raise ProtocolError(f"{self.party_id}: begin_round was not called")
        return self._round

    def _who(self) -> str:
        self._r  # noqa: B018 - raises before begin_round
        return self.party_id

    def _expect_empty(self, inbox: Inbox) -> None:
        if inbox:
            raise ProtocolError(
                f"{self.party_id}: unexpected messages {[(e.sender, e.tag) for e in inbox]}"
            )

    def _from_server(self, env: Envelope, tag: str) -> Payload:
        if env.sender != self.server_id or env.tag != tag:
            raise ProtocolError(
                f"{self.party_id}: unexpected {env.tag!r} from {env.sender!r} (expected {tag!r})"
            )
        if env.payload.meta.get("round") != self._r:
            raise ProtocolError(f"{self.party_id}: {tag!r} is not for round {self._r}")
        return env.payload


class SecureSumServer(ProtocolParty):
    """The relay: routes requests and contributions; what it learns depends on the mode."""

    def __init__(self, party_id: str, client_ids: Sequence[str], min_senders: int) -> None:
        super().__init__(party_id)
        self.federation = frozenset(client_ids)
        self.min_senders = min_senders
        self._round: int | None = None
        self._requests: dict[str, SumRequest] = {}
        self.registry: KeyRegistry | None = None  # malicious-server mode
        self.signing_domain: tuple[str, str] = ("", "")
        self.max_round_bytes: float | None = None  # set by SecureSum (admission limit)
        self.bytes_per_value = 8.0  # what one encoded value costs on the wire in this mode
        self.encodes_entries = True  # senders send one encoded value per job position

    def begin_round(self, round_idx: int) -> None:
        self._round = round_idx
        self._requests = {}

    def collect_setup_blobs(
        self, inbox: Inbox, tag: str, field: str, what: str
    ) -> dict[str, bytes]:
        """One ``field`` blob per federation member from the set-up ``inbox`` (tag ``tag``);
        anything else, a malformed payload or a missing member aborts the set-up."""
        blobs: dict[str, bytes] = {}
        for env in inbox:
            if env.tag != tag or env.sender not in self.federation or env.sender in blobs:
                raise ProtocolError(f"server: unexpected {env.tag!r} from {env.sender!r}")
            try:
                blobs[env.sender] = env.payload.blob(field)
            except (KeyError, WireFormatError) as err:
                raise ProtocolError(f"server: malformed {what} from {env.sender!r}") from err
        missing = sorted(self.federation - set(blobs))
        if missing:
            raise ProtocolError(f"server: no {what} from {missing}: abort setup")
        return blobs

    @staticmethod
    def setup_signatures(inbox: Inbox) -> dict[str, bytes]:
        """Each sender's set-up signature (malicious-server mode), as it arrived."""
        out = {}
        for env in inbox:
            sig = env.payload.fields.get("sig")
            if isinstance(sig, bytes):
                out[env.sender] = sig
        return out

    def route_requests(self, inbox: Inbox) -> list[Envelope]:
        out = []
        for env in inbox:
            self._check(env, TAG_REQUEST, self.federation)
            r = env.sender
            if r in self._requests or env.payload.meta.get("receiver") != r:
                raise ProtocolError(f"server: duplicate or misaddressed request from {r!r}")
            request = SumRequest.from_payload(env.payload, "server")
            if r in request.senders or not set(request.senders) <= self.federation:
                raise ProtocolError(f"server: request of {r!r} lists invalid senders")
            if not request.senders or len(request.senders) < self.min_senders:
                raise TooFewSendersError(
                    f"server: {r!r} asks for a sum of {len(request.senders)} sender(s) "
                    f"(min_senders={self.min_senders})"
                )
            if self.encodes_entries and request.length * self.bytes_per_value > MAX_MESSAGE:
                raise ProtocolError(
                    f"server: {r!r} asks for a sum of {request.length} values: one encoded "
                    f"contribution would exceed the {MAX_MESSAGE} B message limit"
                )
            self._requests[r] = request
            payload = request.to_payload(self._r, r)
            if "sig" in env.payload.fields:  # the receiver's signature travels with it
                payload.fields["sig"] = env.payload.fields["sig"]
            out.extend(
                Envelope(self.party_id, k, TAG_ROUTED_REQUEST, payload) for k in request.senders
            )
        self._admit()
        return out

    def _admit(self) -> None:
        """Refuse the round if its contributions would exceed ``max_round_bytes`` (the sizes
        are public: each job's length times its senders)."""
        if self.max_round_bytes is None:
            return
        values = sum(q.length * len(q.senders) for q in self._requests.values())
        size = values * self.bytes_per_value
        if size > self.max_round_bytes:
            raise SumTooLargeError(
                f"server: this round's sums would have the senders send {values:,} values "
                f"(~{size / 1e9:.1f} GB), over max_round_bytes = "
                f"{self.max_round_bytes / 1e9:.1f} GB: refused before anything is encoded "
                "(smaller supports, fewer receivers per round or a higher limit)"
            )

    def deliver(self, inbox: Inbox) -> list[Envelope]:
        got: dict[str, dict[str, Payload]] = {r: {} for r in self._requests}
        for env in inbox:
            self._check(env, TAG_CONTRIBUTION, self.federation)
            for r, part in unbundle(env.payload, "server").items():
                if r not in got or env.sender not in self._requests[r].senders:
                    raise ProtocolError(
                        f"server: unexpected contribution from {env.sender!r} to {r!r}"
                    )
                if env.sender in got[r]:
                    raise ProtocolError(f"server: two contributions from {env.sender!r} to {r!r}")
                got[r][env.sender] = part
        out = []
        for r, request in self._requests.items():
            missing = [k for k in request.senders if k not in got[r]]
            if missing:
                raise ProtocolError(
                    f"secure_sum abort: senders {missing} of {r!r}'s sum did not contribute "
                    "(dropped); there is no dropout recovery (one-shot pre-training "
                    "computation): re-run the batch with a fresh round_idx"
                )
            for payload in self._aggregate(r, request, got[r]):
                payload.meta.update(round=self._r, receiver=r)
                out.append(Envelope(self.party_id, r, TAG_DELIVERY, payload))
        return out

    @abstractmethod
    def _aggregate(
        self, receiver: str, request: SumRequest, contributions: dict[str, Payload]
    ) -> list[Payload]:
        """What the server sends ``receiver`` for its job (contributions in sender order)."""

    @property
    def _r(self) -> int:
        if self._round is None:
            raise ProtocolError("secure_sum server: begin_round was not called")
        return self._round

    def _check(self, env: Envelope, tag: str, allowed: frozenset[str]) -> None:
        if env.tag != tag or env.sender not in allowed:
            raise ProtocolError(f"server: unexpected {env.tag!r} from {env.sender!r}")
        if env.payload.meta.get("round") != self._r:
            raise ProtocolError(f"server: {env.tag!r} from {env.sender!r} is for another round")


@dataclass
class SecureSumParties:
    """The server and one party per client (each both a sender and a receiver)."""

    server: SecureSumServer
    clients: dict[str, SecureSumClient]

    def by_id(self) -> dict[str, ProtocolParty]:
        return {self.server.party_id: self.server, **self.clients}

    def roles(self) -> dict[Role, list[str]]:
        return {Role.SERVER: [self.server.party_id], Role.CLIENT: list(self.clients)}


class SecureSum(ABC):
    """A way to deliver ``sum_k B_k`` to one receiver per job (modes: plain, masked, ckks).

    ``min_senders`` (default 2): the receiver, the server and the senders refuse jobs with
    fewer remote senders (:class:`TooFewSendersError`); with one sender the "sum" is that
    sender's block, so ``min_senders=1`` must be asked for explicitly.
    ``max_round_bytes``: the server refuses a round whose contributions would exceed it
    (:class:`SumTooLargeError`, before any value is encoded); None: no limit.
    """

    name: ClassVar[str]
    setup_phases: ClassVar[tuple[Phase, ...]] = ()
    round_phases: ClassVar[tuple[Phase, ...]] = ROUND_PHASES
    #: the role interfaces its phases run on (see ``AggregationProtocol.party_types``)
    party_types: ClassVar[tuple[type[ProtocolParty], ...]] = (SecureSumClient, SecureSumServer)

    def __init__(
        self,
        *,
        min_senders: int = 2,
        max_round_bytes: float | None = None,
        threat_model: str = HONEST_BUT_CURIOUS,
        registry: KeyRegistry | dict[str, Any] | None = None,
        signing_id: str = "",
    ) -> None:
        if isinstance(min_senders, bool) or not isinstance(min_senders, int) or min_senders < 1:
            raise ValueError(f"min_senders must be an int >= 1, got {min_senders!r}")
        if max_round_bytes is not None and not max_round_bytes > 0:
            raise ValueError(f"max_round_bytes must be None or > 0, got {max_round_bytes!r}")
        self.min_senders = min_senders
        self.max_round_bytes = max_round_bytes
        self.threat_model = check_threat_model(threat_model)
        if isinstance(registry, dict):
            registry = KeyRegistry.from_wire(registry)
        self.registry = registry
        self.signing_id = signing_id  # bound into every signed statement (experiment id)

    def _authenticated(self, parties: SecureSumParties) -> SecureSumParties:
        """Malicious-server mode: every party gets the registry (signing keys come from
        this process's keystore; without a registry one is issued here, which works only
        when every party lives in this process)."""
        if self.threat_model == HONEST_BUT_CURIOUS:
            return parties
        registry = self.registry
        if registry is None:
            registry = self.registry = Pki.issue(list(parties.clients)).registry
        for party in (parties.server, *parties.clients.values()):
            party.registry = registry
            party.signing_domain = (self.name, self.signing_id)
        return parties

    def bytes_per_value(self, n_clients: int) -> float:
        """Wire bytes of one encoded value in this mode (the admission limit's unit)."""
        return 8.0

    def _limited(self, server: SecureSumServer, n_clients: int) -> SecureSumServer:
        """``server`` with this protocol's admission limit (``max_round_bytes``)."""
        server.max_round_bytes = self.max_round_bytes
        server.bytes_per_value = self.bytes_per_value(n_clients)
        return server

    @abstractmethod
    def create_parties(self, server_id: str, client_ids: Sequence[str]) -> SecureSumParties:
        """The server's and every client's state for one federation."""

    @staticmethod
    def _check_ids(server_id: str, client_ids: Sequence[str]) -> list[str]:
        ids = list(client_ids)
        if not all(isinstance(c, str) for c in ids) or len(set(ids)) != len(ids):
            raise ValueError("client ids must be distinct strings")
        if server_id in ids:
            raise ValueError("the server id must differ from the client ids")
        return ids


def request_content(request: SumRequest) -> list[Any]:
    """What a receiver signs about its request (senders, shape, result kind, support)."""
    support = request.support
    index = None if support is None else digest(support.index.astype("<i8").tobytes())
    return [list(request.senders), list(request.shape), request.sparse_result, index]
