"""Pairwise-masked secure aggregation: SecAgg (Bonawitz et al., CCS 2017) and SecAgg+
(Bell et al., CCS 2020).

Each client u sends ``y_u = enc(w_u x_u || w_u) + PRG(b_u) + sum_{v in M(u)} ±PRG(s_uv)``
mod 2^w, w = 32 or 64 (the smallest ring that holds the federation's sum at the value
bound, :func:`protocols.fixedpoint.ring_codec`); the self-mask seed ``b_u`` and the mask
key's secret ``s_u`` (128-bit seeds) are Shamir t-of-h shared among u's share holders, so
the server can remove the masks of survivors and of dropped clients.
``secagg``: complete mask graph; ``secagg+``: a Harary graph of degree k on a pseudorandom
ring, O(k (d + log n)) per client instead of O(n d).

Threat model: an honest-but-curious server colluding with fewer than t clients learns the
weighted sum of the clients whose masked inputs it received, and who took part; no
individual input. t > h/2 is enforced (Bonawitz et al. 2017), so up to h - t < h/2 share
holders may drop per neighbourhood; fewer survivors abort; a masked input that arrives
after the survivor set is fixed is ignored. Every client refuses a participant list below
the minimum cohort (``min_cohort``, a public parameter from the experiment, not the server)
and the threshold never falls below that cohort's, so no unmasked sum holds fewer than
``min_summands`` inputs. The mask graph is public, so SecAgg+ holds against corruptions
chosen independently of it (a server choosing the cohort chooses the ring). Not protected:
an active server (no PKI), malicious clients, what the sum reveals, traffic analysis.
Deviations: fresh keys per round, HKDF bound to (experiment, round, step, pair), a
commitment to ``b_u``, heuristic SecAgg+ defaults. In full: ``docs/protocols.md``.

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
    check_threshold,
    default_degree,
    min_threshold,
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
    "check_threshold",
    "default_degree",
    "min_threshold",
    "resolve_threshold",
]
