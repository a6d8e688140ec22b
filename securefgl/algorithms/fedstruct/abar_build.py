"""Running FedStruct's federated Ā build (Algorithm 3) hop by hop, through the channel.

:func:`build_abar` initialises every client party's hop 1 locally, then runs hops
``2..L_s``, each one :class:`HopSum` exchange (every client ``k`` contributes ``B_ik`` to
each neighbouring client ``i``, which completes its hop from ``Σ_{k≠i} B_ik``), and
reports per-hop time, bytes, messages and ``nnz`` from the transcript. :class:`PlainHopSum`
is the paper's exchange (every ``B_ik`` in the clear, client to client or relayed by the
server); the secure exchanges are in :mod:`securefgl.algorithms.fedstruct.abar_secure`.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from tqdm.auto import tqdm

from protocols.base import Envelope
from securefgl.algorithms.fedstruct.abar_central import PRUNE_MODES, resolve_beta
from securefgl.algorithms.fedstruct.abar_client import AdjacencyClient, AdjacencyRelay
from securefgl.federation import Call, Channel, Executor, Party

__all__ = [
    "AbarBuildReport",
    "HopContext",
    "HopStats",
    "HopSum",
    "PlainHopSum",
    "build_abar",
]

logger = logging.getLogger(__name__)

@dataclass
class HopContext:
    """What a :class:`HopSum` may use: party ids, the executor and the channel."""

    clients: list[str]
    executor: Executor
    channel: Channel
    server_id: str | None = "server"  # None: clients talk peer to peer

    def deliver(self, envelopes: list[Envelope]) -> dict[str, list[Envelope]]:
        """Transmit (and relay through the server, if the envelopes go there); returns
        each client's inbox. Every hop is recorded on the transcript."""
        delivered = self.channel.transmit(envelopes)
        if self.server_id is not None:
            to_server = [e for e in delivered if e.receiver == self.server_id]
            if to_server:
                relay = Call.to(self.server_id, AdjacencyRelay.forward, to_server)
                forwarded = self.executor.call([relay])[0]
                delivered = [e for e in delivered if e.receiver != self.server_id]
                delivered += self.channel.transmit(forwarded)
        inbox: dict[str, list[Envelope]] = {c: [] for c in self.clients}
        for env in delivered:
            if env.receiver not in inbox:
                raise ValueError(f"message {env.tag} addressed to unknown party {env.receiver}")
            inbox[env.receiver].append(env)
        return inbox


class HopSum(ABC):
    """One hop's exchange: every client ``k`` contributes ``B_ik`` for each neighbouring
    client ``i``; afterwards every client ``i`` has called
    ``AdjacencyClient.complete_hop(hop, Σ_{k≠i} B_ik)`` (``abar_client``).

    A secure strategy must fix a coordinate system common to all senders of one
    receiver, because ``B_ik``'s rows are only ``i``'s nodes adjacent to ``k`` and its
    columns may be any of the ``n`` nodes:

    * dense rows: every sender of ``i`` encodes ``[R_i, n]`` densely, with ``R_i`` =
      ``i``'s nodes adjacent to any other client (``i`` publishes ``R_i`` to its
      neighbours: they learn its boundary nodes). Hides each sender's support, and so
      what sender-side pruning kept, but costs ``|R_i|·n`` values per sender and hop
      (the ``O(p·n)`` saving of pruning is lost);
    * public support: senders first reveal their supports (to the server or ``i``); the
      union ``U_i`` becomes the public coordinate set and values are summed on it. Sizes
      stay ``O(|U_i|)`` but every sender's support (with sender pruning: its top-k
      positions) leaks to whoever forms the union, and ``U_i`` leaks to all senders;
    * a fixed-size sketch (hashing into ``m`` buckets): lossy.

    With one neighbouring sender the sum is that sender's block: no secure sum hides it.
    Under any secure sum only receiver-side pruning can act on the sum; sender-side
    pruning still works (each sender prunes before encoding) and, with dense rows, reveals
    nothing beyond the sum (in plain mode it reveals nothing extra either: every block is
    seen anyway). A plug-in for ``protocols.secure_sum`` per hop: receiver ``i`` requests a
    sum of shape ``(n, n)`` (rows = opaque ids) with senders :attr:`AdjacencyClient.neighbours`
    and ``Support.product((n, n), rows=i.boundary_rows())``; sender ``k`` contributes
    ``contributions(hop)[i].in_global_rows(n)``; ``i`` passes the sparse result to
    :meth:`AdjacencyClient.complete_hop_global` (its local term ``B_ii`` stays local).
    """

    name: ClassVar[str]

    @abstractmethod
    def run_hop(self, hop: int, ctx: HopContext) -> None: ...

    def hop_notes(self, hop: int) -> dict[str, int]:
        """Strategy-specific counters of the last ``run_hop(hop)`` (into :class:`HopStats`)."""
        return {}


@dataclass
class PlainHopSum(HopSum):
    """The paper's scheme: each ``B_ik`` is sent in the clear (relayed by the server if
    ``ctx.server_id`` is set); client ``i`` sums what it receives.

    Threat model: none. Client ``i`` (and a relaying server) sees every individual
    ``B_ik``; a row of ``i`` with one neighbour ``u`` in ``k`` reveals row ``u`` of
    ``[Â^[k]]^{ℓ-1}`` exactly (a leak the paper does not discuss).
    """

    name: ClassVar[str] = "plain"

    def run_hop(self, hop: int, ctx: HopContext) -> None:
        ex, clients = ctx.executor, ctx.clients
        sent = ex.map(clients, AdjacencyClient.send_blocks, hop, ctx.server_id)
        inbox = ctx.deliver([env for batch in sent for env in batch])
        ex.call([Call.to(c, AdjacencyClient.receive_blocks, hop, inbox[c]) for c in clients])


@dataclass(frozen=True)
class HopStats:
    hop: int  # 1 = local set-up (and the size announcement for sender pruning)
    seconds: float
    bytes: int
    messages: int
    nnz: int  # Σ_i nnz([Â^[i]]^hop) after pruning
    notes: dict[str, int] = field(default_factory=dict)  # HopSum.hop_notes


@dataclass
class AbarBuildReport:
    hops: list[HopStats] = field(default_factory=list)
    abar_nnz: int = 0

    @property
    def seconds(self) -> float:
        return sum(h.seconds for h in self.hops)

    @property
    def bytes(self) -> int:
        return sum(h.bytes for h in self.hops)

    @property
    def messages(self) -> int:
        return sum(h.messages for h in self.hops)


def build_abar(
    clients: Mapping[str, Party] | Sequence[str],
    channel: Channel,
    executor: Executor,
    hops: int,
    beta: Sequence[float] | None = None,
    prune: Literal["sender", "receiver"] | None = None,
    p: float = 30,
    hop_sum: HopSum | None = None,
    server_id: str | None = "server",
    progress: bool = False,
) -> AbarBuildReport:
    """Run Algorithm 3; afterwards every client party holds ``abar`` = ``Ā^[i]``.

    ``clients`` are the client party ids (or a mapping from them); the executor must
    host them and, when ``server_id`` is set, an :class:`AdjacencyRelay` under that id
    (plain messages then go client → server → client; ``None``: peer to peer). Hops
    are separated by a barrier (each is one ``hop_sum.run_hop`` call). ``channel.round``
    is left as the caller set it; messages carry their hop in ``meta["hop"]``.
    Returns per-hop wall time, bytes and messages (from the transcript). ``progress``: a
    bar over the hops (on a terminal).
    """
    betas = resolve_beta(hops, beta)
    if prune is not None and prune not in PRUNE_MODES:
        raise ValueError(f"prune must be None or one of {PRUNE_MODES}, got {prune!r}")
    if prune is not None and not p > 0:
        raise ValueError(f"p must be > 0, got {p!r}")
    ids = list(clients)
    if not ids:
        raise ValueError("no clients")
    for pid, party in clients.items() if isinstance(clients, Mapping) else ():
        if party.party_id != pid:
            raise ValueError(f"client {pid!r} is keyed under another id ({party.party_id!r})")
    hop_sum = hop_sum if hop_sum is not None else PlainHopSum()
    ctx = HopContext(ids, executor, channel, server_id)
    entries = channel.transcript.entries
    report = AbarBuildReport()

    def stats(hop: int, t0: float, start: int, nnz: int) -> HopStats:
        new, dt = entries[start:], time.perf_counter() - t0
        notes = hop_sum.hop_notes(hop) if hop > 1 else {}
        return HopStats(hop, dt, sum(e.nbytes for e in new), len(new), nnz, notes)

    t0, start = time.perf_counter(), len(entries)
    init = (hops, list(betas), prune, p, len(ids))
    nnz = executor.call([Call.to(c, AdjacencyClient.init_abar, *init) for c in ids])
    if prune == "sender":
        sent = executor.map(ids, AdjacencyClient.announce_size, server_id)
        inbox = ctx.deliver([env for batch in sent for env in batch])
        executor.call([Call.to(c, AdjacencyClient.receive_sizes, inbox[c]) for c in ids])
    report.hops.append(stats(1, t0, start, sum(nnz)))
    bar = tqdm(
        range(2, len(betas) + 1),
        desc=f"Ā hops ({hop_sum.name})",
        disable=None if progress else True,
        leave=False,
    )
    for hop in bar:
        t0, start = time.perf_counter(), len(entries)
        hop_sum.run_hop(hop, ctx)
        nnz = executor.map(ids, AdjacencyClient.current_nnz)
        report.hops.append(stats(hop, t0, start, sum(nnz)))
        h = report.hops[-1]
        logger.info(
            "Ā hop %d/%d (%s): %.2fs, %d messages, %.1f MB, nnz %d",
            hop, len(betas), hop_sum.name, h.seconds, h.messages, h.bytes / 1e6, h.nnz,
        )  # fmt: skip
    report.abar_nnz = sum(executor.map(ids, AdjacencyClient.finish_abar))
    logger.info(
        "Ā built (L_s=%d, prune=%s): %.2fs, %.1f MB, nnz %d",
        len(betas), prune, report.seconds, report.bytes / 1e6, report.abar_nnz,
    )  # fmt: skip
    return report
