"""SecAgg against an actively malicious server: signed keys and the consistency round.

Bonawitz et al. (CCS 2017, Sec. 6, Fig. 4): every client signs its two round public keys
with its long-term key (no key substitution); after the masked inputs, the server sends
every survivor the survivor set, each survivor signs it (ConsistencyCheck), and a client
reveals shares only after seeing at least t signatures on the very set it signed. Bell et
al. (CCS 2020) carry this to SecAgg+.

What is signed here (a :func:`protocols.identity.statement`, domain ``secagg``): the keys
(experiment, round, client, the ring, ``c_pk``, ``s_pk``) and the survivor statement
(experiment, round, the ring, participants, U2 = clients whose shares were routed, U3 =
clients whose masked input arrived, and a digest of the round's keys: every advertised
client's ``(c_pk, s_pk)``).
Deviation: the statement also fixes the participants, U2 and the keys, and a client signs
only if its own mask set equals ``U2 ∩ N(u)`` and the keys it lists for the client and its
neighbours are the ones it used; with U3 alone a server that withholds routed shares can
shrink one client's mask set to clients it then declares dropped.

Quorum (per client u): for itself and every v it masked with, t valid signatures on the
statement from v's share holders ``{v} ∪ N(v)`` inside U3. Honest clients sign one
statement per round and t > h/2, so two holders of one v never accept statements that
disagree on v: no v has both its self-mask seed and its mask key revealed, and a survivor's
pairwise masks stay unknown. For SecAgg (complete graph) this is t signatures of the round.

Endorsements: a signer endorses the statement for each neighbour it shares a key with by an
HMAC under a key derived from their pairwise share key (X25519 on the *signed* round keys,
so only the two of them hold it), and once for everyone else by its Ed25519 signature. A
client checks a neighbour's MAC (microseconds) where the server forwarded one and a
signature otherwise; either convinces it, and only it, that the signer endorsed this very
statement, which is all the quorum needs. A MAC that does not verify aborts like a bad
signature; a stripped MAC only costs the signature check. Without dropouts a client's
quorum is met by its neighbours alone (SecAgg: t − 1 MACs; SecAgg+: its k neighbours).

Unverified: the participant list is the server's choice (clients accept a statement only if
it matches the list they were sent, but a server that shows disjoint groups different lists
from the first message is not analysed for SecAgg+); malicious clients (they could sign two
statements, so the bound becomes t > (h + corrupt holders) / 2, not enforced); the
correctness of the sum (the server computes it).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np

from protocols.base import ProtocolError
from protocols.identity import SIGNATURE_BYTES, SignatureError, digest, statement
from protocols.secagg.messages import byte_rows, pack_rows
from protocols.secagg.rounds import MaskGraph, SecAggConfig

DOMAIN = "secagg"
TAG_CONSISTENCY = "secagg/consistency-check"
TAG_CONSISTENCY_SIG = "secagg/consistency-signature"
MAC_BYTES = 32


def key_statement(
    config: SecAggConfig, round_idx: int, cid: str, c_pk: bytes, s_pk: bytes
) -> bytes:
    """What client ``cid`` signs with its round keys (Bonawitz et al. 2017, round 0)."""
    return statement(DOMAIN, config.experiment_id, round_idx, "keys", cid, config.ring, c_pk,
                     s_pk)  # fmt: skip


def key_digest(cid: str, c_pk: bytes, s_pk: bytes) -> bytes:
    """SHA-256 of one client's advertised round keys (an entry of the survivor statement)."""
    return digest(b"secagg/round-keys/v1", cid.encode(), c_pk, s_pk)


def keys_digest(digests: Mapping[str, bytes]) -> bytes:
    """One digest of the round's keys: ``client -> key_digest`` over every advertised client."""
    return digest(b"secagg/round-key-set/v1", *(c.encode() + d for c, d in sorted(digests.items())))


def survivor_statement(
    config: SecAggConfig,
    round_idx: int,
    participants: Sequence[str],
    u2: Sequence[str],
    u3: Sequence[str],
    round_keys: bytes,
) -> bytes:
    """The survivor statement every survivor signs (one per round); the signer is bound by
    the signature, not the text, so every signer signs the same bytes. ``round_keys``:
    :func:`keys_digest` of the keys the server says each client advertised."""
    return statement(
        DOMAIN,
        config.experiment_id,
        round_idx,
        "consistency",
        "",
        config.ring,
        sorted(participants),
        sorted(u2),
        sorted(u3),
        round_keys,
    )


def endorsement_key(share_key: bytes, context: bytes) -> bytes:
    """The pair's MAC key for endorsements: HMAC-SHA256 of their share key over ``context``
    (a pair context: domain-separated from the sealing key derived from the same secret)."""
    return hmac.digest(share_key, b"secagg/endorsement-key|" + context, hashlib.sha256)


def endorse(key: bytes, message: bytes, signer: str, receiver: str) -> bytes:
    """``signer``'s endorsement of ``message`` for ``receiver`` (HMAC-SHA256)."""
    return hmac.digest(key, digest(b"secagg/endorse/v1", signer.encode(), receiver.encode(),
                                   message), hashlib.sha256)  # fmt: skip


def check_endorsement(key: bytes, message: bytes, signer: str, receiver: str, mac: object,
                      who: str) -> None:  # fmt: skip
    """Raise :class:`SignatureError` unless ``mac`` is ``signer``'s endorsement."""
    if not isinstance(mac, bytes) or not hmac.compare_digest(
        mac, endorse(key, message, signer, receiver)
    ):
        raise SignatureError(f"{who}: consistency endorsement of {signer!r} does not verify")


def pack_signatures(signatures: Sequence[bytes]) -> np.ndarray:
    """``len × 64`` uint8 array (a wire field) of Ed25519 signatures."""
    return pack_rows(signatures, SIGNATURE_BYTES)


def unpack_signatures(array: object, count: int, who: str) -> list[bytes]:
    rows = byte_rows(array, count, SIGNATURE_BYTES)
    if rows is None:
        raise SignatureError(f"{who}: signatures must be uint8 of shape ({count}, 64)")
    return rows


def holders(graph: MaskGraph, cid: str) -> frozenset[str]:
    """The share holders of ``cid``: itself and its neighbours."""
    return frozenset((cid, *graph.neighbours(cid)))


def check_quorum(
    verify: Callable[[str], None],
    signers: Collection[str],
    graph: MaskGraph,
    targets: Sequence[str],
    t: int,
    me: str,
    who: str,
    cheap: Collection[str] = (),
) -> int:
    """Check endorsements of the statement until every target v has ``t`` from ``holders(v)``.

    ``verify(signer)`` checks one signer's endorsement (MAC or signature) and raises on a
    bad one (the server tampered); ``signers``: who endorsed (already checked to lie in U3);
    ``me`` counts without a check. Checks the ``cheap`` signers (MACs) first, then the
    nearest on the ring (SecAgg: t − 1 in all; SecAgg+: at most about 2k), and stops as soon
    as every target is covered. Returns how many it checked.
    """
    if graph.complete:  # every client holds every share: one target, t endorsements
        need = {me: frozenset(graph.participants)}
    else:
        need = {v: holders(graph, v) for v in targets}
    count = dict.fromkeys(need, 0)

    def credit(signer: str) -> None:
        for v, hs in need.items():
            if signer in hs:
                count[v] += 1

    credit(me)
    useful = set().union(*need.values()) - {me} if need else set()
    cheap = set(cheap)
    order = sorted(useful & set(signers), key=lambda s: (s not in cheap, graph.distance(me, s), s))
    checked = 0
    for signer in order:
        if all(c >= t for c in count.values()):
            break
        if not any(signer in need[v] and count[v] < t for v in need):
            continue
        verify(signer)
        checked += 1
        credit(signer)
    short = sorted(v for v, c in count.items() if c < t)
    if short:
        raise ProtocolError(
            f"{who}: refusing to unmask: fewer than t={t} share holders of {short[:5]} signed "
            "the survivor set this client signed (the server may be showing clients "
            "different survivor sets)"
        )
    return checked
