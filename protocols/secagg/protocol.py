"""The two protocols, :class:`SecAggregation` (Bonawitz et al. 2017) and :class:`SecAggPlus`
(Bell et al. 2020): their parameters, phases and parties.

Both deliver the weighted mean of the clients' vectors to the server (``output_role``); the
phases and the threat model are those of the package docstring. ``threat_model="malicious"``
adds signed keys and the consistency round (Bonawitz et al. 2017, Sec. 6;
:mod:`protocols.secagg.consistency`): two more phases, ``sign_survivors`` and
``collect_signatures``, in place of ``request_unmask``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from protocols.base import AggregationParties, AggregationProtocol, Phase, Role
from protocols.fixedpoint import DEFAULT_PRECISION_BITS, WORD_BITS, ring_codec
from protocols.identity import HONEST_BUT_CURIOUS, Pki, check_threat_model
from protocols.secagg.client import SecAggClient
from protocols.secagg.rounds import (
    SecAggConfig,
    check_fraction,
    check_threshold,
    default_degree,
    holders_for,
)
from protocols.secagg.server import SecAggServer


class SecAggregation(AggregationProtocol):
    """SecAgg (Bonawitz et al. 2017): complete mask graph, t-of-n Shamir dropout recovery.

    ``experiment_id`` is bound into every derived key. ``threshold``: an int, a fraction in
    (1/2, 1] of the share holders, or None (floor(h/2) + 1); it must exceed half of the
    share holders (``ValueError`` otherwise, naming the minimum), so fewer than half of
    them may drop. ``value_bound``: max ``|w_i x_i|`` coordinate and max ``w_i``, checked
    by each client before masking and against the fixed-point headroom (None = nothing
    known: the 64-bit ring and the largest bound its headroom allows for the federation
    size). ``ring_bits``: the ring Z_2^w of the masked values, 32 or 64, or None for the
    smallest that holds the sum of the federation's inputs at ``±value_bound`` resolved to
    ``value_bound * 2^-precision_bits`` (:func:`protocols.fixedpoint.ring_codec`; refused
    with :class:`~protocols.fixedpoint.FixedPointOverflowError` when none does).
    ``frac_bits``: None = every fractional bit the ring leaves (24 without a bound).
    ``threat_model``:
    ``"honest-but-curious"`` (default) or ``"malicious"``; ``pki``: the experiment's
    :class:`~protocols.identity.Pki` (None: one is issued for the clients when the parties
    are made, the protocol object acting as the experiment's registrar).

    ``min_cohort``: the smallest participant list every client accepts, and the cohort whose
    threshold is every round's floor (:attr:`SecAggConfig.threshold_floor`). It reaches the
    clients with the protocol's public parameters, built from the experiment's settings,
    never from a server message. None: 2 when honest-but-curious (the server's cohort is
    the driver's sampling, trusted in that model), the whole registered federation (every
    client the parties are made for) when malicious; a run that samples fewer clients per
    round must pass its cohort size. An integer threshold raises it to at least t.
    :meth:`min_summands` is what it guarantees.
    """

    name: ClassVar[str] = "secagg"
    output_role = Role.SERVER
    tolerates_dropouts = True  # Shamir shares of the dropped clients' mask seeds
    round_phases = (
        Phase(Role.CLIENT, "advertise_keys"),
        Phase(Role.SERVER, "broadcast_keys"),
        Phase(Role.CLIENT, "share_keys"),
        Phase(Role.SERVER, "route_shares"),
        Phase(Role.CLIENT, "masked_input"),
        Phase(Role.SERVER, "request_unmask"),
        Phase(Role.CLIENT, "unmask"),
        Phase(Role.SERVER, "finalize"),
    )
    #: malicious-server mode: the consistency round before any share is revealed
    malicious_round_phases = (
        *round_phases[:5],
        Phase(Role.SERVER, "request_consistency"),
        Phase(Role.CLIENT, "sign_survivors"),
        Phase(Role.SERVER, "collect_signatures"),
        *round_phases[6:],
    )

    def __init__(
        self,
        experiment_id: str,
        *,
        threshold: int | float | None = None,
        frac_bits: int | None = None,
        value_bound: float | None = None,
        ring_bits: int | None = None,
        precision_bits: int = DEFAULT_PRECISION_BITS,
        threat_model: str = HONEST_BUT_CURIOUS,
        pki: Pki | None = None,
        min_cohort: int | None = None,
    ) -> None:
        if min_cohort is not None and (
            isinstance(min_cohort, bool) or not isinstance(min_cohort, int) or min_cohort < 2
        ):
            raise ValueError(f"min_cohort must be an integer >= 2 or None, got {min_cohort!r}")
        if not isinstance(experiment_id, str) or not experiment_id:
            raise ValueError("experiment_id must be a non-empty string (it binds every key)")
        if isinstance(threshold, bool) or (isinstance(threshold, int) and threshold < 2):
            raise ValueError(f"an integer threshold must be >= 2, got {threshold!r}")
        if isinstance(threshold, float):
            check_fraction(threshold)
        self.experiment_id = experiment_id
        self.threshold = threshold
        if ring_bits is not None and ring_bits not in WORD_BITS:
            raise ValueError(f"ring_bits must be one of {WORD_BITS} or None, got {ring_bits!r}")
        if ring_bits == 32 and value_bound is None:
            raise ValueError(
                "ring_bits=32 needs a value_bound (the largest |w x| and w of a client): "
                "without one only the 64-bit ring's headroom protects the sum"
            )
        self.frac_bits = frac_bits
        self.value_bound = value_bound
        self.ring_bits = ring_bits
        self.precision_bits = precision_bits
        self.threat_model = check_threat_model(threat_model)
        self.pki = pki
        self.min_cohort = min_cohort
        if self.threat_model != HONEST_BUT_CURIOUS:
            self.round_phases = self.malicious_round_phases  # type: ignore[misc]

    def _degree(self, n: int) -> int | None:
        return None

    def cohort_for(self, n_clients: int) -> int:
        """The minimum cohort the clients of a federation of ``n_clients`` enforce."""
        if self.min_cohort is not None:
            if self.min_cohort > n_clients:
                raise ValueError(
                    f"min_cohort={self.min_cohort} exceeds the {n_clients} clients of the "
                    "federation: no round could run"
                )
            m = self.min_cohort
        else:
            m = n_clients if self.threat_model != HONEST_BUT_CURIOUS else 2
        if isinstance(self.threshold, int):
            # a smaller list could not reach t share holders (a larger t fails at the round)
            m = max(m, min(self.threshold, n_clients))
        return max(m, 2)

    def min_participants(self, n_clients: int) -> int:
        return self.cohort_for(n_clients)

    def config_for(self, n_clients: int) -> SecAggConfig:
        """Public parameters for ``n_clients``; refuses (``ValueError``) a threshold that is
        at most half of the share holders of a full round (smaller rounds have fewer) and a
        minimum cohort larger than the federation, and (``FixedPointOverflowError``) a ring
        that cannot hold the sum of ``n_clients`` inputs at the value bound."""
        codec = ring_codec(
            self.value_bound, max(n_clients, 1), ring_bits=self.ring_bits,
            precision_bits=self.precision_bits, frac_bits=self.frac_bits,
        )  # fmt: skip
        k = self._degree(n_clients)
        if isinstance(self.threshold, int) and n_clients >= 2:  # fractions: checked in __init__
            check_threshold(self.threshold, holders_for(k, n_clients))
        cohort = self.cohort_for(n_clients)
        return SecAggConfig(
            self.experiment_id, codec, k, self.threshold, self.threat_model, cohort
        )

    def min_summands(self, n_clients: int) -> int:
        """The fewest inputs any sum the server can unmask holds, as the clients of a
        federation of ``n_clients`` enforce it whatever the server sends: the threshold of
        a round of the minimum cohort (:attr:`SecAggConfig.threshold_floor`). Against a
        malicious server, distributed DP noise should be charged at this many shares
        (:func:`protocols.dp.clip_noise.enforced_noise_multiplier`)."""
        return self.config_for(n_clients).threshold_floor

    def create_parties(
        self, server_id: str, client_ids: Sequence[str], dim: int
    ) -> AggregationParties:
        ids = list(client_ids)
        if server_id in ids or len(set(ids)) != len(ids):
            raise ValueError("client ids must be distinct and differ from the server id")
        config = self.config_for(len(ids))
        if not config.malicious:
            return AggregationParties(
                server=SecAggServer(server_id, ids, dim, config),
                clients={c: SecAggClient(c, server_id, ids, dim, config) for c in ids},
            )
        pki = self.pki if self.pki is not None and self.pki.covers(ids) else Pki.issue(ids)
        return AggregationParties(
            server=SecAggServer(server_id, ids, dim, config),
            clients={
                c: SecAggClient(c, server_id, ids, dim, config, pki.identity(c), pki.registry)
                for c in ids
            },
        )


class SecAggPlus(SecAggregation):
    """SecAgg+ (Bell et al. 2020): masks and shares only along a k-regular Harary graph.

    ``k`` (even) = neighbours per client, default 2 ceil(log2 n); the threshold applies to
    the k + 1 share holders of each client. ``k >= n - 1`` is plain SecAgg.
    """

    name: ClassVar[str] = "secagg+"

    def __init__(self, experiment_id: str, *, k: int | None = None, **kwargs: Any) -> None:
        super().__init__(experiment_id, **kwargs)
        if k is not None and (isinstance(k, bool) or k < 2 or k % 2):
            raise ValueError(f"SecAgg+ degree k must be an even integer >= 2, got {k!r}")
        self.k = k

    def _degree(self, n: int) -> int | None:
        return self.k if self.k is not None else default_degree(n)
