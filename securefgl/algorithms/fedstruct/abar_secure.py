"""Secure hop sums for FedStruct's federated Ā: Algorithm 3 over hosted secure sums.

At every hop client ``i`` needs only ``Σ_{k≠i} B_ik`` (FedStruct, Aliakbari et al. 2025,
App. D, Eq. 36), yet the paper's exchange (:class:`PlainHopSum`) hands it, and a relaying
server, every ``B_ik``. :class:`SecureHopSum` runs one batch of hosted secure sums per hop
instead (:class:`~securefgl.federation.secure_sums.SecureSumDriver`): receiver ``i``'s
senders are its neighbouring clients, shape ``(n, n)`` (rows: opaque ids); ``B_ii`` never
leaves ``i``. ``masked``: the server learns nothing, ``i`` only the sum; ``ckks``: under
``i``'s key, broken by a server colluding with ``i``.

Public coordinates: ``support="rows"`` (``i``'s boundary nodes × all columns: the server and
``i``'s senders learn the boundary nodes; pruning saves no bytes) or ``"union"`` (the union
of the senders' supports: the server learns each sender's support, never a value). A
receiver with one neighbouring client would learn that client's block: refused by default
(``min_senders=2``; ``min_senders=1`` allows it, counted per hop). In full:
``securefgl/algorithms/fedstruct/README.md``.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from typing import TYPE_CHECKING, Any, ClassVar

from protocols.base import Envelope, ProtocolError
from protocols.registry import SECURE_SUMS
from protocols.secure_sum import CKKSSum
from securefgl.algorithms.fedstruct.abar_build import HopContext, HopSum, PlainHopSum
from securefgl.algorithms.fedstruct.abar_secure_roles import (
    PATTERN_TAG,
    SUPPORTS,
    UNION_TAG,
    SecureHops,
    SupportKind,
    UnionRelay,
    check_support,
)
from securefgl.federation import Call
from securefgl.federation.hosted_sums import SecureSumDriver, SumSpec

if TYPE_CHECKING:
    from protocols.ckks import CKKSParams

__all__ = [
    "ADJACENCY_MODES",
    "PATTERN_TAG",
    "SUPPORTS",
    "UNION_TAG",
    "CKKSHopSum",
    "MaskedHopSum",
    "SecureHopSum",
    "hop_sum_for",
]

logger = logging.getLogger(__name__)

ADJACENCY_MODES = tuple(SECURE_SUMS)
DEFAULT_EXPERIMENT_ID = "securefgl/fedstruct/abar"


class SecureHopSum(HopSum):
    """Each hop's ``Σ_{k≠i} B_ik`` as one batch of hosted secure sums (module docstring).

    ``spec``: the secure-sum mode (a :class:`~securefgl.federation.hosted_sums.SumSpec`,
    ``masked`` or ``ckks``; ``plain`` works too, as a cost baseline of the machinery), sent
    to every party, which creates its own state from it. ``support``: ``"rows"`` or
    ``"union"``. Needs the relay server (``build_abar(..., server_id=...)``).
    """

    name: ClassVar[str] = "secure"

    def __init__(self, spec: SumSpec, support: SupportKind = "rows") -> None:
        if not isinstance(spec, SumSpec):
            raise TypeError(f"spec must be a secure_sums.SumSpec, not {spec!r}")
        self.spec = spec
        self.protocol = spec.protocol()  # configuration only (validates the options)
        self.support = check_support(support)
        rb = self.protocol.params.round_bits if isinstance(self.protocol, CKKSSum) else None
        self.noise_floor = 2.0**-rb if rb is not None else 0.0
        self._rounds = itertools.count()  # fresh round_idx per hop, across builds
        self._ctx: HopContext | None = None
        self._driver: SecureSumDriver | None = None
        self._notes: dict[int, dict[str, int]] = {}
        self.single_sender: dict[int, list[str]] = {}  # hop -> receivers with one sender

    @property
    def sum_mode(self) -> str:
        return self.spec.sum_mode

    def hop_notes(self, hop: int) -> dict[str, int]:
        return dict(self._notes.get(hop, {}))

    def run_hop(self, hop: int, ctx: HopContext) -> None:
        server = ctx.server_id
        if server is None:
            raise ValueError(
                "secure hop sums run through the server (it adds the masked/encrypted blocks): "
                "build_abar(..., server_id=<the server party>)"
            )
        entries = ctx.channel.transcript.entries
        start = len(entries)
        if hop == 2 or ctx is not self._ctx:
            self._setup(ctx)
        setup = entries[start:]
        assert self._driver is not None
        ex, transmit, r = ctx.executor, ctx.channel.transmit, next(self._rounds)

        def union_supports(patterns_per_client: list[Any]) -> list[Any]:
            """``"union"``: the senders' patterns to the server, ``U_i`` back; then every
            client requests its sum. Returns each client's number of senders."""
            inbox: dict[str, list[Envelope]] = {c: [] for c in ctx.clients}
            patterns = [env for batch in patterns_per_client for env in batch]
            if patterns:
                union = Call.to(server, UnionRelay.union, hop, r, transmit(patterns))
                for env in transmit(ex.call([union])[0]):
                    if env.receiver not in inbox:
                        raise ProtocolError(f"union support for unknown party {env.receiver!r}")
                    inbox[env.receiver].append(env)
            return ex.call(
                [Call.to(c, SecureHops.expect_secure_hop, hop, inbox[c]) for c in ctx.clients]
            )

        counts, nnz = self._driver.round(
            r,
            prepare=lambda c: Call.to(c, SecureHops.prepare_secure_hop, hop, r),
            finish=lambda c: Call.to(c, SecureHops.finish_secure_hop, hop),
            exchange=union_supports,
        )
        single = [c for c, k in zip(ctx.clients, counts, strict=True) if k == 1]
        if single:
            logger.warning(
                "Ā hop %d (%s): %d receiver(s) with a single neighbouring client learn that "
                "client's block itself: %s", hop, self.sum_mode, len(single), single,
            )  # fmt: skip
        self.single_sender[hop] = single
        self._notes[hop] = {
            "round_idx": r,
            "receivers": sum(1 for k in counts if k > 0),
            "single_sender_receivers": len(single),
            "setup_bytes": sum(e.nbytes for e in setup),
            "setup_messages": len(setup),
            "sum_nnz": int(sum(nnz)),
        }

    def _setup(self, ctx: HopContext) -> None:
        """Every party hosts fresh state; the mode's key exchange runs through the channel."""
        assert ctx.server_id is not None
        clients = list(ctx.clients)
        ctx.executor.map(clients, SecureHops.configure_secure_hops, self.support,
                         self.noise_floor)  # fmt: skip
        self._driver = SecureSumDriver(ctx.executor, ctx.channel, self.spec, clients,
                                       ctx.server_id)  # fmt: skip
        self._driver.setup()
        self._ctx, self._notes, self.single_sender = ctx, {}, {}


class MaskedHopSum(SecureHopSum):
    """:class:`SecureHopSum` over :class:`~protocols.secure_sum.MaskedSum` (fixed point
    ``2^-frac_bits``; exact up to that rounding). ``collusion_threshold``: None masks every
    pair of a receiver's senders; t masks on a circulant graph that tolerates t colluding
    senders (``protocols.secure_sum.masked``), ``O(t)`` instead of ``O(K)``
    mask streams per sender and receiver. ``pair_masks=False``: receiver masks only, one
    stream per sender and receiver; private unless the server colludes with the receiver
    (the trust of :class:`CKKSHopSum`).

    Ring: Z_2^64 by default (``frac_bits`` default 32: Ā exact to ~1e-10). ``word_bits=32``
    halves the keystream, the bytes and the additions of every hop (measured on Cora,
    L_s = 10: -21 % CPU at K = 10, -26 % at K = 20) at a precision cost. It fits because
    receiver ``i`` knows a bound on its own sum: ``[Σ_{k≠i} B_ik]_vw = Σ_{u∉V_i} Ã_vu
    [Â^{ℓ-1}]_uw <= D̃_vv`` (rows of ``Â^{ℓ-1}`` are stochastic, pruned ones smaller, all
    entries >= 0). ``degree_bound`` is a PUBLIC bound on the degree ``D̃_vv`` (self-loop
    included) of any boundary node; every receiver checks its own before requesting a sum
    (a violation aborts the build before any value is sent; the abort itself tells every
    party that this receiver has a boundary node above the bound), so the masked sums
    never wrap (``MaskedSum(sum_bound=...)``). The default 2047 (above the 1435 of Amazon
    Photo, the largest of our datasets) gives ``2^-20`` steps: each hop adds at most ``2^-21``
    (4.8e-7) to an entry of ``[Â^ℓ]`` (the rounding of at most ``D̃_vv - 1`` non-zero
    summands, divided by ``D̃_vv``), so errors reach ``(L_s - 1)·2^-21``: measured on Cora
    (unpruned, K = 10 and 20) 4.8e-7 at L_s = 3 and 1.1e-6 at L_s = 10, above the 1e-6 that
    Z_2^64 keeps. A tighter public degree bound gives finer steps (``2^-23`` for 255).
    """

    name: ClassVar[str] = "masked"

    def __init__(
        self,
        experiment_id: str = DEFAULT_EXPERIMENT_ID,
        support: SupportKind = "rows",
        *,
        word_bits: int = 64,
        degree_bound: int = 2047,
        frac_bits: int | None = None,
        min_senders: int = 2,
        collusion_threshold: int | None = None,
        pair_masks: bool = True,
        max_round_bytes: float | None = None,
    ) -> None:
        if word_bits == 32:
            if frac_bits is not None:
                raise ValueError("in Z_2^32 frac_bits follows from degree_bound; pass one of them")
            if not isinstance(degree_bound, int) or degree_bound < 1:
                raise ValueError(f"degree_bound must be a positive int, got {degree_bound!r}")
            ring: dict[str, Any] = {"sum_bound": float(degree_bound), "frac_bits": None}
        else:
            ring = {"frac_bits": 32 if frac_bits is None else frac_bits}
        options = {
            "word_bits": word_bits,
            "min_senders": min_senders,
            "collusion_threshold": collusion_threshold,
            "pair_masks": pair_masks,
            "max_round_bytes": max_round_bytes,
            **ring,
        }
        super().__init__(SumSpec("masked", experiment_id, options), support)


class CKKSHopSum(SecureHopSum):
    """:class:`SecureHopSum` over :class:`~protocols.secure_sum.CKKSSum` (default parameters
    N = 4096, scale 2^40, sums rounded to 2^-24)."""

    name: ClassVar[str] = "ckks"

    def __init__(
        self,
        support: SupportKind = "rows",
        *,
        params: CKKSParams | None = None,
        min_senders: int = 2,
        max_round_bytes: float | None = None,
    ) -> None:
        options: dict[str, Any] = {"min_senders": min_senders, "max_round_bytes": max_round_bytes}
        if params is not None:
            options["params"] = dataclasses.asdict(params)
        super().__init__(SumSpec("ckks", DEFAULT_EXPERIMENT_ID, options), support)


def hop_sum_for(
    sum_mode: str,
    experiment_id: str = DEFAULT_EXPERIMENT_ID,
    support: SupportKind = "rows",
    **kwargs: Any,
) -> HopSum:
    """The Ā builder's user-facing modes: ``adjacency="plain"|"masked"|"ckks"``.

    ``plain``: :class:`~.abar_build.PlainHopSum` (the paper's scheme, no
    protection; ``support`` is ignored). ``masked``: :class:`MaskedHopSum` (``experiment_id``
    is bound into every mask seed; ``word_bits``, ``frac_bits``, ``min_senders``,
    ``collusion_threshold``, ``pair_masks``). ``ckks``: :class:`CKKSHopSum` (``params``,
    ``min_senders``). Both take ``max_round_bytes``: the relay refuses a hop whose sums
    exceed it (:class:`~protocols.secure_sum.SumTooLargeError`, before anything is sent).
    """
    check_support(support)
    if sum_mode == "plain":
        if kwargs:
            raise TypeError(f"plain mode takes no options, got {sorted(kwargs)}")
        return PlainHopSum()
    if sum_mode == "masked":
        return MaskedHopSum(experiment_id, support, **kwargs)
    if sum_mode == "ckks":
        return CKKSHopSum(support, **kwargs)
    raise ValueError(f"sum_mode must be one of {ADJACENCY_MODES}, got {sum_mode!r}")
