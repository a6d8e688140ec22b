"""The one table of protocol names: transports, update mechanisms and secure-sum modes.

Everyone who turns a name into a protocol (the federation's protocol stack, the
recommendation path, the benchmarks, the attack suite) goes through this module.

* transports (:data:`TRANSPORTS`): how a weighted mean of client vectors reaches its
  output holder: ``plain``, ``secagg``, ``secagg+``, ``ckks``;
* update mechanisms (:data:`MECHANISMS`): what each update goes through before it is
  aggregated: ``clip_noise`` (DP-FedAvg), ``ldp_laplace``, ``ldp_gaussian``;
* secure-sum modes (:data:`SECURE_SUMS`): sums addressed to one receiver: ``plain``,
  ``masked``, ``ckks``; :data:`SECURE_SUM_FOR_TRANSPORT` names the mode that gives a
  transport's guarantee to such sums (``secagg`` → ``masked``).
"""

from __future__ import annotations

from typing import Any

from protocols.base import AggregationProtocol
from protocols.ckks import CKKSParams
from protocols.ckks_relay import RelayCKKSAggregation
from protocols.ckks_signed import SignedCKKSAggregation
from protocols.dp.clip_noise import ClipNoiseMechanism
from protocols.dp.ldp import GaussianLDP, LaplaceLDP
from protocols.fixedpoint import DEFAULT_PRECISION_BITS
from protocols.identity import HONEST_BUT_CURIOUS, Pki, check_threat_model
from protocols.names import (
    CKKS_SUM_KEYS,
    SECURE_SUM_FOR_TRANSPORT,
    parse_stack,
    secure_sum_for_stack,
)
from protocols.plain import PlainAggregation
from protocols.secagg import SecAggPlus, SecAggregation
from protocols.secure_sum import CKKSSum, MaskedSum, PlainSum, SecureSum, SharedKeyCKKSSum

__all__ = [
    "MECHANISMS",
    "SECURE_SUMS",
    "SECURE_SUM_FOR_TRANSPORT",
    "TRANSPORTS",
    "make_secure_sum",
    "make_transport",
    "parse_stack",
    "secure_sum_for_stack",
]

TRANSPORTS: dict[str, type[AggregationProtocol]] = {
    "plain": PlainAggregation,
    "secagg": SecAggregation,
    "secagg+": SecAggPlus,
    "ckks": RelayCKKSAggregation,
}
MECHANISMS: dict[str, type] = {
    "clip_noise": ClipNoiseMechanism,
    "ldp_laplace": LaplaceLDP,
    "ldp_gaussian": GaussianLDP,
}
SECURE_SUMS: dict[str, type[SecureSum]] = {
    "plain": PlainSum,
    "masked": MaskedSum,
    "ckks": CKKSSum,
}
def make_transport(
    name: str,
    experiment_id: str,
    *,
    threshold: int | float | None = None,
    neighbours: int | None = None,
    threat_model: str = HONEST_BUT_CURIOUS,
    pki: Pki | None = None,
    min_cohort: int | None = None,
    value_bound: float | None = None,
    ring_bits: int | None = None,
    precision_bits: int = DEFAULT_PRECISION_BITS,
) -> AggregationProtocol:
    """The transport ``name``; ``experiment_id`` binds every key and mask of the run.

    ``threshold``: Shamir t of ``secagg`` / ``secagg+`` (an int, or a fraction in (1/2, 1] of
    the share holders; t must exceed half of them); ``neighbours``: the ``secagg+`` graph
    degree k (default 2⌈log2 n⌉). ``threat_model``: ``"honest-but-curious"`` or
    ``"malicious"`` (signed messages and consistency checks, with ``pki`` or a PKI issued
    when the parties are made); ``plain`` has nothing to protect either way. Honest-but-curious
    ``ckks`` has one client a round decrypt and relay the mean
    (:class:`~protocols.ckks_relay.RelayCKKSAggregation`).
    ``min_cohort``: the smallest participant list every client accepts: at the start of a
    ``secagg`` / ``secagg+`` round (None: 2 honest-but-curious, the whole federation
    malicious; :class:`~protocols.secagg.SecAggregation`), of an aggregate in malicious
    ``ckks`` (None: a majority; :class:`~protocols.ckks_signed.SignedCKKSAggregation`);
    honest-but-curious ``ckks`` and ``plain`` ignore it. ``value_bound`` (max ``|w x_i|``
    and ``w``), ``ring_bits`` and ``precision_bits`` choose the ring of ``secagg`` /
    ``secagg+`` (:class:`~protocols.secagg.SecAggregation`;
    :meth:`~protocols.settings.ProtocolSettings.secagg_options` derives them from the
    settings); the other transports ignore them.
    """
    if name not in TRANSPORTS:
        raise ValueError(f"unknown transport {name!r}; choose from {list(TRANSPORTS)}")
    check_threat_model(threat_model)
    if name == "plain":
        return PlainAggregation()
    if name == "ckks":
        if threat_model == HONEST_BUT_CURIOUS:
            return RelayCKKSAggregation(experiment_id=experiment_id)
        return SignedCKKSAggregation(
            experiment_id=experiment_id, pki=pki, min_cohort=min_cohort
        )
    secure = {
        "threshold": threshold, "threat_model": threat_model, "pki": pki, "min_cohort": min_cohort,
        "value_bound": value_bound, "ring_bits": ring_bits, "precision_bits": precision_bits,
    }  # fmt: skip
    if name == "secagg+":
        return SecAggPlus(experiment_id, k=neighbours, **secure)
    return SecAggregation(experiment_id, **secure)


def make_secure_sum(sum_mode: str, experiment_id: str, **options: Any) -> SecureSum:
    """The secure-sum mode ``sum_mode`` (``experiment_id`` is bound into every mask seed of
    ``masked`` and every signed statement); ``options`` go to its constructor (e.g.
    ``min_senders``, ``max_round_bytes``, ``threat_model``, ``registry``; ``ckks`` takes
    its ``params`` as a :class:`~protocols.ckks.CKKSParams` or a dict, and ``keys``:
    ``"receiver"`` (each receiver's key pair, the default) or ``"shared"`` (one key of the
    clients, :mod:`protocols.secure_sum.ckks_shared`))."""
    if sum_mode not in SECURE_SUMS:
        raise ValueError(
            f"unknown secure-sum mode {sum_mode!r}; choose from {list(SECURE_SUMS)}"
        )
    if sum_mode == "masked":
        return MaskedSum(experiment_id, **options)
    if sum_mode == "ckks" and isinstance(options.get("params"), dict):
        options = {**options, "params": CKKSParams(**options["params"])}
    if sum_mode == "ckks":
        options = {"experiment_id": experiment_id, **options}
        keys = options.pop("keys", "receiver")
        if keys not in CKKS_SUM_KEYS:
            raise ValueError(f"ckks sum keys must be one of {list(CKKS_SUM_KEYS)}, got {keys!r}")
        if keys == "shared":
            return SharedKeyCKKSSum(**options)
    return SECURE_SUMS[sum_mode](**options)
