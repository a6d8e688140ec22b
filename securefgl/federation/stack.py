"""Build the aggregation protocol for a configured stack, e.g. ``["clip_noise", "secagg"]``.

A stack is zero or more update transforms followed by at most one transport; an empty
stack means plaintext aggregation.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocols.base import AggregationProtocol
from protocols.plain import PlainAggregation

TRANSPORTS = ("plain",)


def build_protocol(stack: Sequence[str], experiment_id: str = "securefgl") -> AggregationProtocol:
    names = [s.strip().lower() for s in stack if s.strip()]
    unknown = [n for n in names if n not in TRANSPORTS]
    if unknown:
        raise ValueError(f"unknown protocol(s) {unknown}; available: {list(TRANSPORTS)}")
    if len(names) > 1:
        raise ValueError(f"a stack has at most one transport, got {names}")
    return PlainAggregation()
