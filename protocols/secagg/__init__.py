"""Pairwise-masked secure aggregation: SecAgg (Bonawitz et al., CCS 2017) and SecAgg+
(Bell et al., CCS 2020).

Each client u sends ``y_u = enc(w_u x_u || w_u) + PRG(b_u) + sum_{v in M(u)} ±PRG(s_uv)``
mod 2^64: ``s_uv`` from X25519 agreement between u and v, ``b_u`` a fresh self-mask seed.
``b_u`` and the mask private key ``s_u^SK`` are Shamir t-of-h shared among u's share holders
(u and its neighbours). After the masked inputs arrive, survivors reveal shares of ``b_v``
for each surviving v and of ``s_v^SK`` for each dropped v, never both for one client; the
server removes all masks and decodes the weighted sum. ``secagg``: complete mask graph;
``secagg+``: a Harary graph of degree k on a pseudorandom ring (per-client cost
O(k (d + log n)) instead of O(n d)).

Threat model: honest-but-curious server, possibly colluding with fewer than t clients (of any
neighbourhood, for SecAgg+): it learns the weighted sum (and total weight) of the clients
whose masked inputs it received and who took part / dropped, no individual input; other
clients see only sealed shares and public keys. Tolerates up to h - t share holders dropping
per neighbourhood (n - t for ``secagg``); fewer than t survivors aborts with
:class:`~protocols.base.ProtocolError` rather than return a wrong sum. A client that drops
after sending its masked input is still in the sum (Bonawitz et al.'s output is over U3).
Not protected: an active server (no PKI/signatures on the public keys and no consistency
round, so it could substitute keys or tell clients different dropout sets); clients lying
about their input or sending bad shares (detected garbling aborts, nothing more); what the
sum itself reveals (not DP: compose with DP noise); traffic analysis. The neighbour graph is
public and predictable, so SecAgg+'s guarantee holds against corruptions chosen
independently of it.

Deviations: fresh keys per round and every HKDF output bound to (experiment, round, step,
ordered pair); share holders include the client itself (as in Bonawitz et al. and Flower);
a SHA-256 commitment to ``b_u`` lets the server detect inconsistent shares; the default
SecAgg+ degree and threshold are heuristics (:mod:`protocols.secagg.rounds`).

Modules: :mod:`~protocols.secagg.rounds` (public parameters, mask graph),
:mod:`~protocols.secagg.messages` (tags and message fields), :mod:`~protocols.secagg.client`,
:mod:`~protocols.secagg.server`, :mod:`~protocols.secagg.protocol` (the two protocols).
"""

from protocols.secagg.client import SecAggClient
from protocols.secagg.messages import (
    TAG_KEYLIST,
    TAG_KEYS,
    TAG_MASKED,
    TAG_ROUTED,
    TAG_SHARES,
    TAG_UNMASK,
    TAG_UNMASK_REQUEST,
)
from protocols.secagg.protocol import SecAggPlus, SecAggregation
from protocols.secagg.rounds import (
    MaskGraph,
    RoundInfo,
    SecAggConfig,
    default_degree,
    resolve_threshold,
)
from protocols.secagg.server import SecAggServer

__all__ = [
    "TAG_KEYLIST",
    "TAG_KEYS",
    "TAG_MASKED",
    "TAG_ROUTED",
    "TAG_SHARES",
    "TAG_UNMASK",
    "TAG_UNMASK_REQUEST",
    "MaskGraph",
    "RoundInfo",
    "SecAggClient",
    "SecAggConfig",
    "SecAggPlus",
    "SecAggServer",
    "SecAggregation",
    "default_degree",
    "resolve_threshold",
]
