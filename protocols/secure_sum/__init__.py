"""Secure sums addressed to one receiver (FedStruct, Aliakbari et al. 2025, App. D,
Algorithm 3: ``sum_k B_ijk``).

Receiver r learns ``sum_{k in S} B_k`` over its public sender set S; the server relays
everything. Modes (:data:`protocols.registry.SECURE_SUMS`): ``plain`` (:class:`PlainSum`,
the paper's scheme: the receiver and the server see every block), ``masked``
(:class:`MaskedSum`: pairwise + receiver masks; the receiver learns only the sum, the server
nothing) and ``ckks`` (:class:`CKKSSum`: under the receiver's key; nothing to the server
unless it colludes with the receiver; :class:`SharedKeyCKKSSum`: under one key of the
clients, nothing to the server unless it colludes with any client). ``masked`` / ``ckks``
encode every entry of a block or those of a public :class:`Support`. A job needs
``min_senders`` senders (default 2: a one-sender "sum" is that sender's block;
:class:`TooFewSendersError` unless ``min_senders=1``). Threat models: ``docs/protocols.md``. Usage::

    protocol = MaskedSum("exp-1")
    parties = protocol.create_parties("server", ["c0", "c1", "c2"])
    setup_secure_sums(protocol, parties, channel.transmit)
    jobs = {"c0": {"c1": B_01, "c2": B_02}, "c1": {"c0": B_10, "c2": B_12}}
    out = run_secure_sums(protocol, parties, jobs, channel.transmit, round_idx=hop)
    out["c0"].total  # == B_01 + B_02

Modules: ``blocks``, ``support``, ``jobs``, ``parties`` (client, server, phases), ``driver``
(in-process runs), and one module per mode.
"""

from protocols.secure_sum.blocks import Block
from protocols.secure_sum.ckks import CKKSSum
from protocols.secure_sum.ckks_shared import SharedKeyCKKSSum
from protocols.secure_sum.driver import run_secure_sums, setup_secure_sums
from protocols.secure_sum.jobs import (
    SumRangeError,
    SumRequest,
    SumResult,
    SumTooLargeError,
    SupportViolationError,
    TooFewSendersError,
)
from protocols.secure_sum.masked import MaskedSum
from protocols.secure_sum.parties import (
    SecureSum,
    SecureSumClient,
    SecureSumParties,
    SecureSumServer,
)
from protocols.secure_sum.plain import PlainSum
from protocols.secure_sum.support import Support

__all__ = [
    "Block",
    "CKKSSum",
    "MaskedSum",
    "PlainSum",
    "SecureSum",
    "SecureSumClient",
    "SecureSumParties",
    "SecureSumServer",
    "SharedKeyCKKSSum",
    "SumRangeError",
    "SumTooLargeError",
    "SumRequest",
    "SumResult",
    "Support",
    "SupportViolationError",
    "TooFewSendersError",
    "run_secure_sums",
    "setup_secure_sums",
]
