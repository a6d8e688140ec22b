"""Build the aggregation protocol for a configured stack, e.g. ``["clip_noise", "secagg"]``.

A stack is at most one update mechanism (DP) and at most one transport, in any order:

* transports: ``plain`` (default), ``secagg``, ``secagg+``, ``ckks``;
* mechanisms: ``clip_noise`` (DP-FedAvg, client-level (ε, δ)), ``ldp_laplace`` and
  ``ldp_gaussian`` (every update is locally private before it leaves the client).

``clip_noise`` adds its noise at the server (``central``) over ``plain``, and as per-client
shares (``distributed``) over ``secagg`` / ``secagg+`` / ``ckks``, unless ``dp_mode``
says otherwise. ε always comes from an accountant (Opacus RDP/PRV for Gaussian noise,
pure-DP composition for Laplace), never from adding per-round ε.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from protocols.base import AggregationProtocol
from protocols.ckks import CKKSAggregation
from protocols.dp import (
    ClipNoiseMechanism,
    DPAggregation,
    GaussianLDP,
    LaplaceLDP,
    PrivacyAccountant,
    PureDPAccountant,
)
from protocols.plain import PlainAggregation
from protocols.secagg import SecAggPlus, SecAggregation
from securefgl.config import ExperimentConfig

TRANSPORTS = ("plain", "secagg", "secagg+", "ckks")
MECHANISMS = ("clip_noise", "ldp_laplace", "ldp_gaussian")


@dataclass
class ProtocolStack:
    """The protocol the parties run, plus the privacy ledger of its DP mechanism."""

    protocol: AggregationProtocol
    names: list[str]
    mechanism: Any = None
    accountant: PrivacyAccountant | PureDPAccountant | None = None
    delta: float | None = None
    rounds: int = field(default=0)

    def account_round(self, sample_rate: float, survivors: int, dim: int) -> None:
        """Charge one aggregation round to the ledger (no-op without a DP mechanism)."""
        self.rounds += 1
        mech, acc = self.mechanism, self.accountant
        if isinstance(mech, ClipNoiseMechanism):
            mech.account(acc, sample_rate, n_survivors=survivors)
        elif isinstance(mech, LaplaceLDP):
            mech.account(acc, dim)  # each client releases once per round it takes part in
        elif isinstance(mech, GaussianLDP):
            mech.account(acc)

    def privacy(self) -> dict[str, Any]:
        """``{"epsilon", "delta", "accountant"}`` so far; empty without DP or rounds."""
        if self.accountant is None or self.rounds == 0:
            return {}
        eps = self.accountant.epsilon()
        kind = "pure-dp" if isinstance(self.accountant, PureDPAccountant) else self.accountant.kind
        return {
            "epsilon": eps,
            "delta": self.delta or 0.0,
            "accountant": kind,
            "dp_rounds": self.rounds,
        }


def parse_stack(stack: Sequence[str]) -> tuple[str, str | None]:
    """(transport, mechanism) of a stack; clear errors for unknown or doubled entries."""
    names = [s.strip().lower() for s in stack if s.strip()]
    unknown = [n for n in names if n not in TRANSPORTS + MECHANISMS]
    if unknown:
        raise ValueError(
            f"unknown protocol(s) {unknown}; transports {list(TRANSPORTS)}, "
            f"mechanisms {list(MECHANISMS)}"
        )
    transports = [n for n in names if n in TRANSPORTS]
    mechanisms = [n for n in names if n in MECHANISMS]
    if len(transports) > 1 or len(mechanisms) > 1:
        raise ValueError(f"a stack has at most one transport and one mechanism, got {names}")
    return (transports[0] if transports else "plain"), (mechanisms[0] if mechanisms else None)


def _transport(name: str, config: ExperimentConfig, experiment_id: str) -> AggregationProtocol:
    t = config.secagg_threshold
    threshold = int(t) if t is not None and t > 1 else t  # > 1: a count; ≤ 1: a fraction
    if name == "secagg":
        return SecAggregation(experiment_id, threshold=threshold)
    if name == "secagg+":
        return SecAggPlus(experiment_id, k=config.secagg_k, threshold=threshold)
    if name == "ckks":
        return CKKSAggregation(experiment_id=experiment_id)
    return PlainAggregation()


def build_stack(
    config: ExperimentConfig,
    clients_per_round: int,
    experiment_id: str = "securefgl",
    seed: int | None = None,
) -> ProtocolStack:
    """The protocol stack of ``config`` for rounds of ``clients_per_round`` clients."""
    transport_name, mech_name = parse_stack(config.protocol)
    transport = _transport(transport_name, config, experiment_id)
    names = [n for n in (mech_name, transport_name) if n]
    if mech_name is None:
        return ProtocolStack(transport, names)
    if mech_name == "clip_noise":
        mode = config.dp_mode
        if mode == "auto":
            mode = "central" if transport_name == "plain" else "distributed"
        mechanism: Any = ClipNoiseMechanism(
            clip_norm=config.dp_clip,
            noise_multiplier=config.dp_noise,
            mode=mode,
            expected_clients=clients_per_round,
        )
        accountant: Any = PrivacyAccountant(config.dp_accountant, config.dp_delta)
        delta: float | None = config.dp_delta
    elif mech_name == "ldp_laplace":
        mechanism = LaplaceLDP(clip=config.dp_clip, epsilon=config.dp_epsilon)
        accountant, delta = PureDPAccountant(), 0.0
    else:
        mechanism = GaussianLDP(clip_norm=config.dp_clip, noise_multiplier=config.dp_noise)
        accountant = PrivacyAccountant(config.dp_accountant, config.dp_delta)
        delta = config.dp_delta
    protocol = DPAggregation(transport, mechanism, seed=seed)
    return ProtocolStack(protocol, names, mechanism, accountant, delta)


def build_protocol(stack: Sequence[str], experiment_id: str = "securefgl") -> AggregationProtocol:
    """Just the protocol of a stack with default parameters (tests, quick scripts)."""
    config = ExperimentConfig(protocol=list(stack))
    return build_stack(config, clients_per_round=1, experiment_id=experiment_id).protocol
