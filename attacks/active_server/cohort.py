"""The pair-cohort attack: a server that chooses who takes part (Bonawitz et al. 2017, Sec. 6
leave the participant set to the server; issue 45, finding 1).

The server runs one protocol state per pair of clients in the same round (5 pairs of a
10-client round): each client sees a well-formed round with two participants, the server's
unmodified code aggregates each pair, and it learns every pair's sum, not the round's. With
one colluding client, the pair {target, colluder} reveals the target's input; against
distributed DP noise each pair's sum carries σ·√(2/n) instead of σ.

Succeeds against honest-but-curious clients (that model trusts the server's cohort: the
driver's sampling); refused in malicious-server mode, where every client enforces a minimum
cohort from the experiment's parameters (:class:`protocols.secagg.SecAggConfig`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from attacks.active_server.driver import (
    Outcome,
    check_threat_model,
    inputs_for,
    outcome,
    recovered,
    run_round,
)
from attacks.active_server.secagg import SERVER, protocol_for
from protocols.secagg import SecAggServer

ATTACK = "pair_cohort"


def run_pair_cohort(
    threat_model: str, protocol_name: str = "secagg", n: int = 10, dim: int = 16, seed: int = 0
) -> Outcome:
    """One round of ``n`` clients, split by the server into n/2 pairs; success when it
    recovers every pair's weighted sum ``w_a x_a + w_b x_b`` (and total weight)."""
    check_threat_model(threat_model)
    protocol = protocol_for(protocol_name, threat_model)
    ids = [f"c{i:02d}" for i in range(n)]
    honest = protocol.create_parties(SERVER, ids, dim)
    config = protocol.config_for(n)
    # the server's own state accepts pairs: it ignores any minimum cohort
    lax = dataclasses.replace(config, min_cohort=2)
    inputs = inputs_for(ids, dim, seed)
    refusals: list[dict[str, str]] = []
    errors, got = [], 0
    for pair in zip(ids[::2], ids[1::2], strict=True):
        server = SecAggServer(SERVER, ids, dim, lax)
        refusals += run_round(protocol, honest.clients, server, 0, {c: inputs[c] for c in pair}).log
        result = server.result()
        truth = sum(np.append(inputs[c][0] * inputs[c][1], inputs[c][1]) for c in pair)
        if result is None:
            continue
        estimate = np.append(result.mean * result.total_weight, result.total_weight)
        ok, err = recovered(estimate, truth)
        got += ok
        errors.append(err)
    pairs = n // 2
    worst = max((e for e in errors if e is not None), default=None)
    details = {"clients": n, "dim": dim, "pairs": pairs, "pairs_recovered": got,
               "min_cohort": config.min_cohort, "max_abs_error": worst}  # fmt: skip
    return outcome(ATTACK, protocol_name, threat_model, got == pairs, "recovered", refusals,
                   **details)  # fmt: skip
