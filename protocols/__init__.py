"""Privacy and crypto protocol layer. Graph-agnostic: works on flat arrays.

The lowest layer (``protocols`` <- ``securefgl`` <- ``attacks``): it imports neither of
them nor any graph library, so it stays importable without torch_geometric. The names
below are imported on first use, so that ``import protocols.settings`` (the command line's
help) does not load the crypto and DP modules.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    **dict.fromkeys(
        (
            "AggregateResult", "AggregationClient", "AggregationParties", "AggregationProtocol",
            "AggregationServer", "Envelope", "Phase", "ProtocolError", "ProtocolParty", "Role",
            "aggregate", "run_phases", "setup_parties",
        ),
        "protocols.base",
    ),
    "PlainAggregation": "protocols.plain",
    "run_secure_sums": "protocols.secure_sum",
    "Payload": "protocols.wire",
    "WireFormatError": "protocols.wire",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'protocols' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
