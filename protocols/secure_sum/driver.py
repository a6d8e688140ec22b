"""Running secure sums in one process: the set-up and one batch of jobs.

:func:`run_secure_sums` hands each client its own inputs (like :func:`protocols.base.aggregate`)
and runs the round phases of :mod:`protocols.secure_sum.parties`; in a distributed run each
client calls ``begin_round`` / ``expect_sum`` / ``add_contribution`` itself and the phases run
through the federation's executor and channel. Nothing here changes what a party learns.
"""

from __future__ import annotations

from collections.abc import Mapping

from protocols.base import (
    Invoke,
    ProtocolError,
    Transmit,
    default_invoke,
    no_transport,
    run_phases,
)
from protocols.secure_sum.blocks import Block, block_shape, is_sparse
from protocols.secure_sum.jobs import SumRequest, SumResult
from protocols.secure_sum.parties import SecureSum, SecureSumParties
from protocols.secure_sum.support import Support


def setup_secure_sums(
    protocol: SecureSum,
    parties: SecureSumParties,
    transmit: Transmit = no_transport,
    invoke: Invoke | None = None,
) -> None:
    """Run the mode's one-off setup phases (key exchange); a no-op for ``plain``."""
    run_phases(
        protocol.setup_phases, parties.roles(), invoke or default_invoke(parties.by_id()), transmit
    )


def run_secure_sums(
    protocol: SecureSum,
    parties: SecureSumParties,
    jobs: Mapping[str, Mapping[str, Block]],
    transmit: Transmit = no_transport,
    *,
    round_idx: int = 0,
    supports: Mapping[str, Support] | None = None,
    sparse_result: bool | None = None,
    invoke: Invoke | None = None,
    dropped: Mapping[str, str] | None = None,
) -> dict[str, SumResult]:
    """Run one batch of sums; returns each receiver's :class:`SumResult`.

    ``jobs[r][k]`` is sender k's block for receiver r (all of one job the same shape;
    ``jobs[r][r]``, if present, is r's local term). ``supports[r]``: the public support of
    r's job (default: dense, every entry). ``sparse_result``: ``None`` = a CSR result when
    every block of the job is sparse. ``round_idx`` must be fresh per call (e.g. the hop).
    ``dropped`` (tests): party id -> phase method before which it goes silent.

    In-process convenience: each client's inputs are handed to its own state directly; in a
    distributed run each client calls ``begin_round`` / ``expect_sum`` / ``add_contribution``
    itself and the phases run through the federation's executor and channel.
    """
    supports = supports or {}
    unknown = (set(jobs) | {k for b in jobs.values() for k in b}) - set(parties.clients)
    if unknown or not set(supports) <= set(jobs):
        raise ValueError(f"jobs / supports name unknown parties or receivers: {sorted(unknown)}")
    for client in parties.clients.values():
        client.begin_round(round_idx)
    parties.server.begin_round(round_idx)
    for r, blocks in jobs.items():
        if not blocks:
            raise ValueError(f"job of {r!r} has no block, so no shape")
        shapes = {block_shape(b) for b in blocks.values()}
        if len(shapes) != 1:
            raise ValueError(f"blocks of {r!r}'s job differ in shape: {sorted(shapes)}")
        sparse = all(map(is_sparse, blocks.values())) if sparse_result is None else sparse_result
        request = SumRequest(
            tuple(k for k in blocks if k != r), shapes.pop(), supports.get(r), sparse
        )
        parties.clients[r].expect_sum(request, local=blocks.get(r))
        for k in request.senders:
            parties.clients[k].add_contribution(r, blocks[k])
    run_phases(
        protocol.round_phases,
        parties.roles(),
        invoke or default_invoke(parties.by_id()),
        transmit,
        dropped,
    )
    results = {}
    for r in jobs:
        res = parties.clients[r].result()
        if res is None:
            if r in (dropped or {}):
                continue
            raise ProtocolError(f"{protocol.name}: receiver {r!r} holds no result")
        results[r] = res
    return results
