"""Privacy and crypto protocol layer. Graph-agnostic: works on flat arrays.

The lowest layer (``protocols`` <- ``securefgl`` <- ``attacks``): it imports neither of
them nor any graph library, so it stays importable without torch_geometric.
"""

from protocols.base import (
    AggregateResult,
    AggregationClient,
    AggregationParties,
    AggregationProtocol,
    AggregationServer,
    Envelope,
    Phase,
    ProtocolError,
    ProtocolParty,
    Role,
    aggregate,
    run_phases,
    setup_parties,
)
from protocols.plain import PlainAggregation
from protocols.secure_sum import run_secure_sums as run_secure_sums
from protocols.wire import Payload, WireFormatError

__all__ = [
    "AggregateResult",
    "AggregationClient",
    "AggregationParties",
    "AggregationProtocol",
    "AggregationServer",
    "Envelope",
    "Payload",
    "Phase",
    "PlainAggregation",
    "ProtocolError",
    "ProtocolParty",
    "Role",
    "WireFormatError",
    "aggregate",
    "run_phases",
    "setup_parties",
]
