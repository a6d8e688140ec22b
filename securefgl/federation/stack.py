"""Build the aggregation protocol for a configured stack, e.g. ``["clip_noise", "secagg"]``.

A stack is at most one update mechanism (DP) and at most one transport, in any order:

* transports: ``plain`` (default), ``secagg``, ``secagg+``, ``ckks``;
* mechanisms: ``clip_noise`` (DP-FedAvg, client-level (ε, δ)), ``ldp_laplace`` and
  ``ldp_gaussian`` (every update is locally private before it leaves the client).

``clip_noise`` adds its noise at the server (``central``) over ``plain``, and as per-client
shares (``distributed``) over ``secagg`` / ``secagg+`` / ``ckks``, unless ``dp_mode``
says otherwise. ε always comes from an accountant (Opacus RDP/PRV for Gaussian noise,
pure-DP composition for Laplace), never from adding per-round ε.

``threat_model = "malicious"``: the experiment acts as the registrar of a PKI
(:class:`protocols.identity.Pki`, one Ed25519 key per client, the server and the key
authority) that the transport uses, and that hosted secure sums get through
:meth:`ProtocolStack.sum_options` (their registry travels in the sum's spec).
"""

from __future__ import annotations

import secrets
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from protocols.base import AggregationParties, AggregationProtocol
from protocols.ckks import DEFAULT_AUTHORITY_ID
from protocols.dp import ClipNoiseMechanism, DPAggregation, GaussianLDP, LaplaceLDP
from protocols.dp.accounting import Accountant
from protocols.identity import HONEST_BUT_CURIOUS, Pki
from protocols.registry import make_transport
from protocols.settings import ProtocolSettings
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.federation.party import SERVER, client_party_id

SERVER_ADVERSARY = "server"
OBSERVERS = "model observers"
LOCAL = "everyone (local DP)"
#: the unit of the stack's guarantees: one client's model updates, over the whole run
CLIENT_LEVEL = "client-level (a client's model updates)"


@dataclass
class Ledger:
    """The ε spent against one adversary, and what that claim rests on."""

    adversary: str
    accountant: Accountant
    amplified: bool  # client sampling amplifies against this adversary
    assumes: str  # the collusion and cohort assumptions, or ""
    colluding: int = 0  # noise shares known to this adversary (distributed noise)
    #: charge each round at the fewest summands the clients enforce, not the driver's count
    #: (a malicious server chooses the cohort)
    at_floor: bool = False


@dataclass
class ProtocolStack:
    """The protocol the parties run, plus one privacy ledger per adversary of its DP
    mechanism (the first is the headline: the strongest adversary it protects against).

    Against the server no sampling amplification is claimed: it sees who takes part.
    Against observers of the released model it is claimed only for Poisson sampling drawn
    by each client from its own secret randomness (``client_sampling = "poisson"``) with
    central noise, which the server adds every round, empty rounds included; the server's
    fixed-size sample (``"fixed"``) and distributed noise (which only participants add) are
    charged at q = 1. Distributed noise against a malicious server is charged at the fewest
    clients in any sum it can open as the clients enforce it (:meth:`summand_floor`), not at
    the driver's survivor count; against model observers, one more share is known (a
    participating client's own).
    """

    protocol: AggregationProtocol
    names: list[str]
    mechanism: Any = None
    ledgers: list[Ledger] = field(default_factory=list)
    sampling: str = "fixed"
    rounds: int = field(default=0)
    threat_model: str = HONEST_BUT_CURIOUS
    pki: Pki | None = None  # malicious-server mode: the experiment's PKI
    clients_per_round: int = 1  # what the stack was built for (to rebuild it elsewhere)
    federation_size: int | None = None  # the clients its parties were made for
    experiment_id: str = "securefgl"
    #: names this stack object in this process (:func:`live_stack`); not a secret
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    _parties: dict[tuple[Any, ...], AggregationParties] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        _LIVE[self.token] = self

    def parties(self, server_id: str, client_ids: Sequence[str], dim: int) -> AggregationParties:
        """The protocol's parties for this federation, made once per process."""
        key = (server_id, tuple(client_ids), dim)
        if key not in self._parties:
            self._parties[key] = self.protocol.create_parties(server_id, client_ids, dim)
            self.federation_size = len(client_ids)
            self._check_colluders()
        return self._parties[key]

    def _check_colluders(self) -> None:
        """Refuse colluders who could hold every noise share of the smallest sum the server
        can open (its ε would be ∞)."""
        floor = self.summand_floor()
        for ledger in self.ledgers:  # the server's claim (an observer's may be ∞: stated)
            if (ledger.adversary == SERVER_ADVERSARY and ledger.at_floor and floor is not None
                    and ledger.colluding >= floor):  # fmt: skip
                raise ConfigError(
                    f"dp_colluding_clients: {ledger.colluding} known noise shares reach the "
                    f"{floor} clients of the smallest sum a malicious server can open (ε = "
                    "∞ against it): lower dp_colluding_clients or raise min_cohort"
                )

    def summand_floor(self) -> int | None:
        """The fewest clients in any aggregate the output holder can open, as the clients
        enforce it (:meth:`~protocols.base.AggregationProtocol.min_summands`)."""
        if self.federation_size is None:
            raise RuntimeError("the protocol's parties are not made yet (ProtocolStack.parties)")
        return self.protocol.min_summands(self.federation_size)

    def sum_options(self) -> dict[str, Any]:
        """Options that put a hosted secure sum in this stack's threat model (wire data:
        the registry's public keys only; each party signs with its own keystore key)."""
        if self.threat_model == HONEST_BUT_CURIOUS or self.pki is None:
            return {}
        return {"threat_model": self.threat_model, "registry": self.pki.registry.to_wire()}

    @property
    def accountant(self) -> Accountant | None:
        """The headline ledger's accountant."""
        return self.ledgers[0].accountant if self.ledgers else None

    def account_round(self, sample_rate: float, survivors: int, dim: int) -> None:
        """Charge one aggregation round to every ledger (no-op without a DP mechanism)."""
        self.rounds += 1
        for ledger in self.ledgers:
            q = sample_rate if ledger.amplified else 1.0
            charged = survivors
            if ledger.at_floor:
                floor = self.summand_floor()
                charged = survivors if floor is None else min(survivors, floor)
            self.mechanism.account_round(
                ledger.accountant, sample_rate=q, survivors=charged, dim=dim,
                colluding=ledger.colluding,
            )  # fmt: skip

    def privacy(self) -> dict[str, Any]:
        """The headline ``{"epsilon", "delta", "accountant", "adversary", ...}`` and every
        ledger under ``"guarantees"`` (each with its ``unit``: client-level, a client's
        whole contribution); empty without DP or rounds."""
        if not self.ledgers or self.rounds == 0:
            return {}
        guarantees = [
            {
                **ledger.accountant.report(),
                "unit": CLIENT_LEVEL,
                "adversary": ledger.adversary,
                "sampling": self._sampling_claim(ledger),
                **({"collusion": ledger.assumes} if ledger.assumes else {}),
            }
            for ledger in self.ledgers
        ]
        return {**guarantees[0], "guarantees": guarantees, "dp_rounds": self.rounds}

    def _sampling_claim(self, ledger: Ledger) -> str:
        if ledger.amplified:
            return "Poisson, each client's secret coin: amplified (q = sampled fraction)"
        if ledger.adversary == SERVER_ADVERSARY:
            return "none claimed (the server sees who takes part): q = 1"
        if self.mechanism is not None and getattr(self.mechanism, "mode", "") == "distributed":
            return "none claimed (distributed noise comes from the participants only): q = 1"
        return f"none claimed ({self.sampling} sampling): q = 1"


def _mechanism(name: str, settings: ProtocolSettings, clients: int) -> Any:
    if name == "clip_noise":
        return ClipNoiseMechanism(
            clip_norm=settings.dp_clip,
            noise_multiplier=settings.dp_noise,
            mode=settings.clip_noise_mode,
            expected_clients=clients,
        )
    if name == "ldp_laplace":
        return LaplaceLDP(clip=settings.dp_clip, epsilon=settings.dp_epsilon)
    return GaussianLDP(clip_norm=settings.dp_clip, noise_multiplier=settings.dp_noise)


#: the stacks alive in this process, by token (a party built here from a recipe uses the
#: driver's stack itself, e.g. its PKI; another process rebuilds the stack from settings)
_LIVE: weakref.WeakValueDictionary[str, ProtocolStack] = weakref.WeakValueDictionary()


def live_stack(token: str) -> ProtocolStack | None:
    return _LIVE.get(token)


def build_stack(
    config: ExperimentConfig,
    clients_per_round: int,
    experiment_id: str = "securefgl",
    seed: int | None = None,
    pki: Pki | None = None,
) -> ProtocolStack:
    """The protocol stack of ``config`` for rounds of ``clients_per_round`` clients
    (:func:`protocol_stack` with the experiment's clients and sampling)."""
    return protocol_stack(
        config.protocol, clients=config.clients, sampling=config.client_sampling,
        clients_per_round=clients_per_round, experiment_id=experiment_id, seed=seed, pki=pki,
    )  # fmt: skip


def protocol_stack(
    settings: ProtocolSettings,
    *,
    clients: int,
    clients_per_round: int,
    sampling: str = "fixed",
    experiment_id: str = "securefgl",
    seed: int | None = None,
    pki: Pki | None = None,
) -> ProtocolStack:
    """The stack of ``settings`` for a federation of ``clients`` clients (party ids
    ``client-0`` …), rounds of ``clients_per_round`` of them drawn by ``sampling``.

    Malicious-server model: ``pki`` is the experiment's PKI as this process holds it
    (:meth:`Pki.held`); None issues one here (the experiment as registrar)."""
    transport_name, mech_name = settings.transport, settings.mechanism
    threat = settings.threat_model
    if threat == HONEST_BUT_CURIOUS:
        pki = None
    elif pki is None:  # the experiment is the registrar, never the server
        ids = [client_party_id(i) for i in range(clients)]
        pki = Pki.issue([SERVER, DEFAULT_AUTHORITY_ID, *ids])
    mechanism = (
        None if mech_name is None
        else _mechanism(mech_name, settings, clients_per_round)
    )  # fmt: skip
    transport = make_transport(
        transport_name, experiment_id, threshold=settings.threshold(),
        neighbours=settings.secagg_k, threat_model=threat, pki=pki,
        min_cohort=settings.cohort_floor(clients_per_round, sampling),
        **settings.secagg_options(mechanism),
    )  # fmt: skip
    names = [n for n in (mech_name, transport_name) if n]
    colluding = settings.dp_colluding_clients
    built = {"clients_per_round": clients_per_round, "experiment_id": experiment_id}
    if mech_name is None:
        return ProtocolStack(
            transport, names, sampling=sampling, threat_model=threat, pki=pki, **built
        )

    def ledger(adversary: str, amplified: bool, assumes: str = "", **how: Any) -> Ledger:
        accountant = mechanism.new_accountant(settings.dp_accountant, settings.dp_delta)
        return Ledger(adversary, accountant, amplified, assumes, **how)

    poisson = sampling == "poisson"  # secret client-side coins
    if mech_name != "clip_noise":
        ledgers = [ledger(LOCAL, False)]
    elif mechanism.mode == "distributed":
        honest = (
            f"at most {colluding} client(s) collude with the server (their noise shares are "
            "known to it; accounted); the other clients add their noise honestly"
        )
        malicious = threat != HONEST_BUT_CURIOUS
        cohort = (
            "; the server chooses the cohort: charged at the fewest clients in any sum it can "
            "open, as the clients enforce it (min_cohort and the Shamir threshold)"
        ) * malicious
        own = (
            f"a participating client knows its own noise share (charged: {colluding + 1} known "
            "shares); "
        )
        ledgers = [
            ledger(SERVER_ADVERSARY, False, honest + cohort, colluding=colluding,
                   at_floor=malicious),
            ledger(OBSERVERS, False, own + honest + cohort, colluding=colluding + 1,
                   at_floor=malicious),  # the observers see the aggregate that server chose
        ]  # fmt: skip
    else:  # central noise: the server sees clean updates, so nothing is claimed against it
        ledgers = [ledger(OBSERVERS, poisson)]
    protocol = DPAggregation(transport, mechanism, seed=seed)
    return ProtocolStack(
        protocol, names, mechanism, ledgers, sampling, threat_model=threat, pki=pki,
        **built,
    )  # fmt: skip


def build_protocol(stack: Sequence[str], experiment_id: str = "securefgl") -> AggregationProtocol:
    """Just the protocol of a stack with default parameters (tests, quick scripts)."""
    return protocol_stack(
        ProtocolSettings(stack=list(stack)), clients=1, clients_per_round=1,
        experiment_id=experiment_id,
    ).protocol  # fmt: skip
