"""Secure sums addressed to one receiver (FedStruct, Aliakbari et al. 2025, App. D,
Algorithm 3: ``sum_k B_ijk``).

Receiver r learns ``sum_{k in S} B_k`` over its public sender set S and, depending on the
mode, nothing else; the server relays everything (clients have no direct links). Modes:

* ``plain`` (:class:`PlainSum`): the paper's scheme, blocks in the clear; the receiver and
  the server see every block.
* ``masked`` (:class:`MaskedSum`): pairwise masks (Bonawitz et al. 2017) among the senders
  plus a mask shared with the receiver; the receiver learns only the sum, the server nothing.
* ``ckks`` (:class:`CKKSSum`): encrypted under the receiver's CKKS public key, added by the
  server; the receiver learns only the sum, the server nothing (unless it colludes with the
  receiver).

Sparse blocks: ``plain`` ships COO; ``masked``/``ckks`` encode every entry (dense, default)
or the entries of a public :class:`Support` given per job. Usage::

    protocol = MaskedSum("exp-1")
    parties = protocol.create_parties("server", ["c0", "c1", "c2"])
    setup_secure_sums(protocol, parties, channel.transmit)
    jobs = {"c0": {"c1": B_01, "c2": B_02}, "c1": {"c0": B_10, "c2": B_12}}
    out = run_secure_sums(protocol, parties, jobs, channel.transmit, round_idx=hop)
    out["c0"].total  # == B_01 + B_02

Modules: :mod:`~protocols.secure_sum.blocks` (block types and checks),
:mod:`~protocols.secure_sum.support` (public supports), :mod:`~protocols.secure_sum.jobs`
(requests, results, errors), :mod:`~protocols.secure_sum.parties` (client, server, phases),
:mod:`~protocols.secure_sum.driver` (in-process set-up and runs); one module per mode. The
mode names are in :data:`protocols.registry.SECURE_SUMS`.
"""

from protocols.secure_sum.blocks import Block
from protocols.secure_sum.ckks import CKKSSum
from protocols.secure_sum.driver import run_secure_sums, setup_secure_sums
from protocols.secure_sum.jobs import (
    SumRangeError,
    SumRequest,
    SumResult,
    SumTooLargeError,
    SupportViolationError,
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
    "SumRangeError",
    "SumTooLargeError",
    "SumRequest",
    "SumResult",
    "Support",
    "SupportViolationError",
    "run_secure_sums",
    "setup_secure_sums",
]
