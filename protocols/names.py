"""The protocol names and how a stack of them parses, without the protocol classes.

:mod:`protocols.registry` maps these names to classes; this module is what a settings
check or a ``--help`` page needs (``import protocols.names`` loads no crypto, DP or numpy).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

#: transports: how a weighted mean of client vectors reaches its output holder
TRANSPORT_NAMES = ("plain", "secagg", "secagg+", "ckks")
#: update mechanisms: what each update goes through before it is aggregated
MECHANISM_NAMES = ("clip_noise", "ldp_laplace", "ldp_gaussian")
#: secure-sum modes: sums addressed to one receiver
SECURE_SUM_NAMES = ("plain", "masked", "ckks")
#: whose keys a ``ckks`` secure sum encrypts under: each receiver's own key pair, or one key
#: every client shares (the server colluding with any client then reads every block)
CKKS_SUM_KEYS = ("receiver", "shared")
#: the secure-sum mode that gives a transport's guarantee to sums to one receiver
SECURE_SUM_FOR_TRANSPORT: dict[str, str] = {
    "plain": "plain",
    "secagg": "masked",
    "secagg+": "masked",
    "ckks": "ckks",
}
#: the server's threat models
HONEST_BUT_CURIOUS = "honest-but-curious"
MALICIOUS = "malicious"
THREAT_MODELS = (HONEST_BUT_CURIOUS, MALICIOUS)
#: transports whose rounds need at least two participants (one client's "sum" is its update)
MULTI_PARTY_TRANSPORTS = ("secagg", "secagg+")


def parse_stack(stack: Sequence[str]) -> tuple[str, str | None]:
    """``(transport, mechanism)`` of a stack such as ``["clip_noise", "secagg"]``.

    At most one transport (default ``plain``) and at most one mechanism, in any order.
    """
    names = [s.strip().lower() for s in stack if s.strip()]
    unknown = [n for n in names if n not in TRANSPORT_NAMES and n not in MECHANISM_NAMES]
    if unknown:
        known = (*TRANSPORT_NAMES, *MECHANISM_NAMES)
        close = [c for n in unknown for c in difflib.get_close_matches(n, known, n=1)]
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise ValueError(
            f"unknown protocol(s) {unknown}{hint}; transports {list(TRANSPORT_NAMES)}, "
            f"mechanisms {list(MECHANISM_NAMES)}"
        )
    transports = [n for n in names if n in TRANSPORT_NAMES]
    mechanisms = [n for n in names if n in MECHANISM_NAMES]
    if len(transports) > 1 or len(mechanisms) > 1:
        raise ValueError(f"a stack has at most one transport and one mechanism, got {names}")
    return (transports[0] if transports else "plain"), (mechanisms[0] if mechanisms else None)


def secure_sum_for_stack(stack: Sequence[str]) -> str:
    """The secure-sum mode that matches a stack's transport (``secagg`` → ``masked``)."""
    return SECURE_SUM_FOR_TRANSPORT[parse_stack(stack)[0]]
