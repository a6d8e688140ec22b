"""The simulator's audit of a transport's aggregate: its largest absolute error against the
float64 weighted mean of the inputs the participants handed to the protocol (fixed-point
rounding under secagg, encryption noise under CKKS; 0 in plaintext).

The audit reads parties held in this process (the local executor): the output holder's
result and each participant's own last input, which that party keeps for this purpose
only. With parties elsewhere, or under a DP mechanism (whose noise would be the error), it
records nothing and the run reports None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from protocols.base import AggregateResult, Role

#: an input as handed to the protocol: (vector, weight)
Input = tuple[np.ndarray, float]


def max_abs_error(got: Any, expected: Any) -> float:
    """max |got - expected| over every entry (0 for empty arrays)."""
    return float(np.max(np.abs(np.asarray(got) - expected), initial=0.0))


def holder_result(stack: Any, server_agg: Any, client_agg: Any) -> AggregateResult | None:
    """The aggregate of the round from whoever the stack's protocol gives it to (the server's
    protocol party, or a client's), None when that party is not held here or under a DP
    mechanism."""
    if stack.mechanism is not None:
        return None
    holder = server_agg if stack.protocol.output_role is Role.SERVER else client_agg
    return holder.result() if holder is not None else None


class AggregateAudit:
    """Per aggregate, the max abs error of the result against the float64 weighted mean of
    its participants' inputs; :meth:`max_error` over the run."""

    def __init__(self) -> None:
        self.errors: list[float] = []

    def check(self, result: AggregateResult | None, inputs: Mapping[str, Input | None]) -> None:
        """Record the error of ``result`` (skipped: no result, or a participant's input is
        not held here)."""
        if result is None:
            return
        total, weight = None, 0.0
        for cid in result.participants:
            sent = inputs.get(cid)
            if sent is None:
                return
            term = np.asarray(sent[0], dtype=np.float64) * sent[1]
            total = term if total is None else total + term
            weight += sent[1]
        if total is None or weight <= 0:
            return
        self.errors.append(max_abs_error(result.mean, total / weight))

    def record(self, error: float | None) -> None:
        """Record an error measured elsewhere (e.g. a round of personalised secure sums)."""
        if error is not None:
            self.errors.append(error)

    def max_error(self) -> float | None:
        return max(self.errors, default=None)
