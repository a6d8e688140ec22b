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
from protocols.dp import ClipNoiseMechanism, DPAggregation, GaussianLDP, LaplaceLDP
from protocols.dp.accounting import Accountant
from protocols.registry import make_transport, parse_stack
from securefgl.config import ExperimentConfig


@dataclass
class ProtocolStack:
    """The protocol the parties run, plus the privacy ledger of its DP mechanism."""

    protocol: AggregationProtocol
    names: list[str]
    mechanism: Any = None
    accountant: Accountant | None = None
    rounds: int = field(default=0)

    def account_round(self, sample_rate: float, survivors: int, dim: int) -> None:
        """Charge one aggregation round to the ledger (no-op without a DP mechanism)."""
        self.rounds += 1
        if self.mechanism is not None and self.accountant is not None:
            self.mechanism.account_round(
                self.accountant, sample_rate=sample_rate, survivors=survivors, dim=dim
            )

    def privacy(self) -> dict[str, Any]:
        """``{"epsilon", "delta", "accountant", "dp_rounds"}`` so far; empty without DP or
        rounds."""
        if self.accountant is None or self.rounds == 0:
            return {}
        return {**self.accountant.report(), "dp_rounds": self.rounds}


def _mechanism(name: str, config: ExperimentConfig, transport: str, clients: int) -> Any:
    if name == "clip_noise":
        mode = config.dp_mode
        if mode == "auto":
            mode = "central" if transport == "plain" else "distributed"
        return ClipNoiseMechanism(
            clip_norm=config.dp_clip,
            noise_multiplier=config.dp_noise,
            mode=mode,
            expected_clients=clients,
        )
    if name == "ldp_laplace":
        return LaplaceLDP(clip=config.dp_clip, epsilon=config.dp_epsilon)
    return GaussianLDP(clip_norm=config.dp_clip, noise_multiplier=config.dp_noise)


def build_stack(
    config: ExperimentConfig,
    clients_per_round: int,
    experiment_id: str = "securefgl",
    seed: int | None = None,
) -> ProtocolStack:
    """The protocol stack of ``config`` for rounds of ``clients_per_round`` clients."""
    transport_name, mech_name = parse_stack(config.protocol)
    t = config.secagg_threshold
    threshold = int(t) if t is not None and t > 1 else t  # > 1: a count; ≤ 1: a fraction
    transport = make_transport(
        transport_name, experiment_id, threshold=threshold, neighbours=config.secagg_k
    )
    names = [n for n in (mech_name, transport_name) if n]
    if mech_name is None:
        return ProtocolStack(transport, names)
    mechanism = _mechanism(mech_name, config, transport_name, clients_per_round)
    accountant = mechanism.new_accountant(config.dp_accountant, config.dp_delta)
    protocol = DPAggregation(transport, mechanism, seed=seed)
    return ProtocolStack(protocol, names, mechanism, accountant)


def build_protocol(stack: Sequence[str], experiment_id: str = "securefgl") -> AggregationProtocol:
    """Just the protocol of a stack with default parameters (tests, quick scripts)."""
    config = ExperimentConfig(protocol=list(stack))
    return build_stack(config, clients_per_round=1, experiment_id=experiment_id).protocol
