"""SecAgg against an actively malicious server: signed keys and the consistency round.

Bonawitz et al. (CCS 2017, Sec. 6, Fig. 4): every client signs its two round public keys
with its long-term key (no key substitution); after the masked inputs, the server sends
every survivor the survivor set, each survivor signs it (ConsistencyCheck), and a client
reveals shares only after seeing at least t signatures on the very set it signed. Bell et
al. (CCS 2020) carry this to SecAgg+.

What is signed here (a :func:`protocols.identity.statement`, domain ``secagg``): the keys
(experiment, round, client, ``c_pk``, ``s_pk``) and the survivor statement (experiment,
round, participants, U2 = clients whose shares were routed, U3 = clients whose masked input
arrived). Deviation: the statement also fixes the participants and U2, and a client signs
only if its own mask set equals ``U2 ∩ N(u)``; with U3 alone a server that withholds routed
shares can shrink one client's mask set to clients it then declares dropped.

Quorum (per client u): for itself and every v it masked with, t valid signatures on the
statement from v's share holders ``{v} ∪ N(v)`` inside U3. Honest clients sign one
statement per round and t > h/2, so two holders of one v never accept statements that
disagree on v: no v has both its self-mask seed and its mask key revealed, and a survivor's
pairwise masks stay unknown. For SecAgg (complete graph) this is t signatures of the round.

Unverified: the participant list is the server's choice (clients accept a statement only if
it matches the list they were sent, but a server that shows disjoint groups different lists
from the first message is not analysed for SecAgg+); malicious clients (they could sign two
statements, so the bound becomes t > (h + corrupt holders) / 2, not enforced); the
correctness of the sum (the server computes it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from protocols.base import ProtocolError
from protocols.identity import SIGNATURE_BYTES, KeyRegistry, SignatureError, statement
from protocols.secagg.rounds import MaskGraph, SecAggConfig

DOMAIN = "secagg"
TAG_CONSISTENCY = "secagg/consistency-check"
TAG_CONSISTENCY_SIG = "secagg/consistency-signature"


def key_statement(
    config: SecAggConfig, round_idx: int, cid: str, c_pk: bytes, s_pk: bytes
) -> bytes:
    """What client ``cid`` signs with its round keys (Bonawitz et al. 2017, round 0)."""
    return statement(DOMAIN, config.experiment_id, round_idx, "keys", cid, c_pk, s_pk)


def survivor_statement(
    config: SecAggConfig,
    round_idx: int,
    participants: Sequence[str],
    u2: Sequence[str],
    u3: Sequence[str],
) -> bytes:
    """The survivor statement every survivor signs (one per round); the signer is bound by
    the signature, not the text, so every signer signs the same bytes."""
    return statement(
        DOMAIN,
        config.experiment_id,
        round_idx,
        "consistency",
        "",
        sorted(participants),
        sorted(u2),
        sorted(u3),
    )


def pack_signatures(signatures: Sequence[bytes]) -> np.ndarray:
    """``len × 64`` uint8 array (a wire field) of Ed25519 signatures."""
    raw = b"".join(signatures)
    return np.frombuffer(raw, np.uint8).reshape(len(signatures), SIGNATURE_BYTES).copy()


def unpack_signatures(array: object, count: int, who: str) -> list[bytes]:
    if (
        not isinstance(array, np.ndarray)
        or array.dtype != np.uint8
        or array.shape != (count, SIGNATURE_BYTES)
    ):
        raise SignatureError(f"{who}: signatures must be uint8 of shape ({count}, 64)")
    return [array[i].tobytes() for i in range(count)]


def holders(graph: MaskGraph, cid: str) -> frozenset[str]:
    """The share holders of ``cid``: itself and its neighbours."""
    return frozenset((cid, *graph.neighbours(cid)))


def check_quorum(
    registry: KeyRegistry,
    message: bytes,
    signatures: Mapping[str, bytes],
    graph: MaskGraph,
    targets: Sequence[str],
    t: int,
    own: tuple[str, bytes],
    who: str,
) -> int:
    """Verify signatures on ``message`` until every target v has ``t`` from ``holders(v)``.

    ``signatures``: signer -> signature (signers already checked to lie in U3);
    ``own``: this client's id and its own signature (counted without verifying). Verifies
    the signers nearest to the client on the ring first (SecAgg: t − 1 signatures; SecAgg+:
    about 2k) and stops as soon as every target is covered;
    any signature that fails aborts (the server tampered). Returns how many it verified.
    """
    me, mine = own
    if graph.complete:  # every client holds every share: one target, t signatures
        need = {me: frozenset(graph.participants)}
    else:
        need = {v: holders(graph, v) for v in targets}
    count = dict.fromkeys(need, 0)
    if signatures.get(me, mine) != mine:
        raise SignatureError(f"{who}: the server altered this client's own signature")

    def credit(signer: str) -> None:
        for v, hs in need.items():
            if signer in hs:
                count[v] += 1

    credit(me)
    useful = set().union(*need.values()) - {me} if need else set()
    order = sorted(useful & set(signatures), key=lambda s: (graph.distance(me, s), s))
    verified = 0
    for signer in order:
        if all(c >= t for c in count.values()):
            break
        if not any(signer in need[v] and count[v] < t for v in need):
            continue
        registry.verify(signer, message, signatures[signer], f"{who}: consistency signature")
        verified += 1
        credit(signer)
    short = sorted(v for v, c in count.items() if c < t)
    if short:
        raise ProtocolError(
            f"{who}: refusing to unmask: fewer than t={t} share holders of {short[:5]} signed "
            "the survivor set this client signed (the server may be showing clients "
            "different survivor sets)"
        )
    return verified
