"""Secure sums addressed to one receiver (FedStruct App. D, Algorithm 3: ``sum_k B_ijk``).

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
"""

from protocols.secure_sum.base import (
    Block,
    SecureSum,
    SecureSumClient,
    SecureSumParties,
    SecureSumServer,
    SumRangeError,
    SumRequest,
    SumResult,
    SumTooLargeError,
    Support,
    SupportViolationError,
    run_secure_sums,
    setup_secure_sums,
)
from protocols.secure_sum.ckks import CKKSSum
from protocols.secure_sum.masked import MaskedSum
from protocols.secure_sum.plain import PlainSum

SECURE_SUM_MODES: dict[str, type[SecureSum]] = {
    "plain": PlainSum,
    "masked": MaskedSum,
    "ckks": CKKSSum,
}

__all__ = [
    "SECURE_SUM_MODES",
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
