"""The SecAgg / SecAgg+ client: its input, its per-round keys and the shares it holds.

Phases (Bonawitz et al. 2017, rounds 0-3): advertise two fresh X25519 public keys; Shamir-
share the 128-bit secrets of the self mask (``b_u``) and of the mask key (``s_u``, from which
the key is derived; :mod:`protocols.secagg.messages`) among its share holders, each pair of
shares sealed (ChaCha20-Poly1305) under a pairwise key; send the double-masked input; answer
the server's unmask request with shares of ``b_v`` for survivors and of ``s_v`` for dropped
v.

What it reveals: only public keys, sealed shares, one masked vector and the shares the
unmask step asks for. It refuses to reveal both secrets of one client (a second unmask
request, or a client listed as survivor and dropped) and aborts on tampered shares or too
few share holders.

Malicious-server mode (``config.threat_model == "malicious"``; Bonawitz et al. 2017, Sec.
6): the keys are signed with the client's long-term Ed25519 key and every neighbour's
signature is checked before any share is sealed to it; ``sign_survivors`` checks the
server's survivor statement against this client's own view and signs it once (plus an HMAC
endorsement per neighbour); ``unmask`` reveals shares only after a quorum of endorsements of
that same statement (:mod:`protocols.secagg.consistency`), and derives what it reveals from
the statement.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from protocols.base import AggregationClient, Envelope, Inbox, ProtocolError
from protocols.crypto import shamir
from protocols.crypto.aead import IntegrityError, open_sealed, seal
from protocols.crypto.keyagreement import (
    PUBLIC_KEY_BYTES,
    KeyAgreementError,
    KeyPair,
    agree,
    check_public_key,
)
from protocols.crypto.prg import add_mask
from protocols.identity import Identity, KeyRegistry, SignatureError
from protocols.secagg.consistency import (
    MAC_BYTES,
    TAG_CONSISTENCY,
    TAG_CONSISTENCY_SIG,
    check_endorsement,
    check_quorum,
    endorse,
    endorsement_key,
    holders,
    key_digest,
    key_statement,
    keys_digest,
    survivor_statement,
    unpack_signatures,
)
from protocols.secagg.messages import (
    SEALED_BYTES,
    SECRET_BYTES,
    SHARE_BYTES,
    TAG_KEYLIST,
    TAG_KEYS,
    TAG_MASKED,
    TAG_ROUTED,
    TAG_SHARES,
    TAG_UNMASK,
    TAG_UNMASK_REQUEST,
    b_commitment,
    id_list,
    mask_key_pair,
    pack_rows,
    self_mask_seed,
    split_fields,
    unmask_fields,
)
from protocols.secagg.rounds import RoundInfo, SecAggConfig
from protocols.wire import Payload, WireFormatError

logger = logging.getLogger(__name__)


class SecAggClient(AggregationClient):
    """One client's side: its input, its fresh per-round keys and the shares it holds."""

    def __init__(
        self,
        party_id: str,
        server_id: str,
        client_ids: Sequence[str],
        dim: int,
        config: SecAggConfig,
        identity: Identity | None = None,
        registry: KeyRegistry | None = None,
    ) -> None:
        super().__init__(party_id)
        self.server_id = server_id
        self.federation = frozenset(client_ids)
        self.dim = dim
        self.config = config
        if config.malicious and (identity is None or registry is None):
            raise ValueError(f"{party_id}: malicious-server mode needs an identity and registry")
        self.identity = identity
        self.registry = registry
        self._used_rounds: set[int] = set()
        self._reset(None)

    def _reset(self, round_idx: int | None) -> None:
        self._round = round_idx
        self._input: tuple[np.ndarray, float] | None = None
        self._c: KeyPair | None = None
        self._s: KeyPair | None = None
        self._s_seed: bytes | None = None  # s_u: the mask key's 128-bit secret
        self._info: RoundInfo | None = None
        self._peers: dict[str, tuple[bytes, bytes]] = {}  # neighbour -> (c_pk, s_pk)
        self._share_keys: dict[str, bytes] = {}
        self._endorsement_keys: dict[str, bytes] = {}
        self._self_seed: bytes | None = None
        self._held: dict[str, tuple[bytes, bytes]] = {}  # owner -> (share of b, share of s^SK)
        self._mask_set: list[str] | None = None
        self._answered = False
        self._signed: tuple[bytes, bytes, list[str]] | None = None  # statement, own sig, U3

    @property
    def _r(self) -> int:
        if self._round is None:
            raise ProtocolError(f"{self.party_id}: begin_round was not called")
        return self._round

    def begin_round(self, round_idx: int, vector: np.ndarray, weight: float) -> None:
        """Start round ``round_idx`` with this client's input; every round index is used at
        most once (its keys, statements and signatures are bound to it)."""
        if isinstance(round_idx, bool) or not isinstance(round_idx, int | np.integer):
            raise ValueError(f"round_idx must be a non-negative int, got {round_idx!r}")
        round_idx = int(round_idx)
        if round_idx < 0:
            raise ValueError(f"round_idx must be a non-negative int, got {round_idx!r}")
        if round_idx in self._used_rounds:
            raise ProtocolError(
                f"{self.party_id}: round {round_idx} was already used; every secagg round needs "
                "a fresh round index (its keys and signed statements are bound to it)"
            )
        vec = np.asarray(vector, dtype=np.float64)
        if vec.shape != (self.dim,):
            raise ValueError(f"{self.party_id}: vector shape {vec.shape} != ({self.dim},)")
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"{self.party_id}: weight must be finite and >= 0, got {weight}")
        lo, hi = (float(vec.min()), float(vec.max())) if vec.size else (0.0, 0.0)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"{self.party_id}: the update holds NaN or infinite values")
        # Range check now (max |w x_i| = w max |x_i| exactly); encode when masking, so that
        # no party holds a second copy of its input between phases.
        self.config.codec.check_peak(max(weight * max(-lo, hi), weight))
        self._used_rounds.add(round_idx)
        self._reset(round_idx)
        self._input = (vec, float(weight))

    def _message(self, inbox: Inbox, tag: str) -> Payload:
        if self._round is None:
            raise ProtocolError(f"{self.party_id}: begin_round was not called")
        found = [e for e in inbox if e.tag == tag and e.sender == self.server_id]
        if len(found) != 1 or len(inbox) != 1:
            raise ProtocolError(
                f"{self.party_id}: expected one {tag!r} message from the server, got "
                f"{[(e.sender, e.tag) for e in inbox]}"
            )
        payload = found[0].payload
        if payload.meta.get("round") != self._round:
            raise ProtocolError(f"{self.party_id}: {tag!r} is not for round {self._round}")
        return payload

    def _send(self, tag: str, fields: dict[str, Any], **meta: Any) -> list[Envelope]:
        return [
            Envelope(
                self.party_id, self.server_id, tag, Payload(fields, {"round": self._round, **meta})
            )
        ]

    def advertise_keys(self, inbox: Inbox) -> list[Envelope]:
        """Round 0: two fresh X25519 public keys (c: share encryption, s: masks)."""
        if self._input is None:
            raise ProtocolError(f"{self.party_id}: begin_round was not called")
        self._s_seed = secrets.token_bytes(SECRET_BYTES)
        self._c, self._s = KeyPair.generate(), mask_key_pair(self._s_seed)
        fields = {"c_pk": self._c.public, "s_pk": self._s.public}
        if self.config.malicious:
            assert self.identity is not None
            stmt = key_statement(self.config, self._r, self.party_id, *fields.values())
            fields["sig"] = self.identity.sign(stmt)
        return self._send(TAG_KEYS, fields)

    def share_keys(self, inbox: Inbox) -> list[Envelope]:
        """Round 1: Shamir-share b_u and s_u among the holders, sealed per recipient."""
        msg = self._message(inbox, TAG_KEYLIST)
        who = self.party_id
        participants = id_list(msg.meta, "participants", who)
        if who not in participants or not set(participants) <= self.federation:
            raise ProtocolError(f"{who}: participant list is not a subset of the federation")
        try:
            info = self._info = RoundInfo.build(self.config, self._r, participants)
        except ValueError as err:
            raise ProtocolError(f"{who}: unusable participant list: {err}") from err
        ids = id_list(msg.meta, "ids", who)
        if not set(ids) <= set(info.graph.neighbours(who)):
            raise ProtocolError(f"{who}: server sent keys of clients that are not its neighbours")
        try:
            c_pk, s_pk = msg.array("c_pk"), msg.array("s_pk")
        except (KeyError, WireFormatError) as err:
            raise ProtocolError(f"{who}: malformed key list: {err}") from err
        shape = (len(ids), PUBLIC_KEY_BYTES)
        if c_pk.shape != shape or s_pk.shape != shape or c_pk.dtype != np.uint8:
            raise ProtocolError(f"{who}: key arrays must be uint8 of shape {shape}")
        if len(ids) + 1 < info.t:
            raise ProtocolError(
                f"{who}: only {len(ids) + 1} share holders advertised keys, threshold {info.t}"
            )
        try:
            self._peers = {
                v: (check_public_key(c_pk[i].tobytes()), check_public_key(s_pk[i].tobytes()))
                for i, v in enumerate(ids)
            }
        except KeyAgreementError as err:
            raise ProtocolError(f"{who}: bad public key in the key list: {err}") from err
        assert self._c is not None and self._s is not None and self._s_seed is not None
        if self.config.malicious:
            self._check_key_signatures(msg, ids)
        self._self_seed = secrets.token_bytes(SECRET_BYTES)
        holders = [who, *ids]
        xs = [info.x[h] for h in holders]
        b_shares = shamir.split(self._self_seed, info.t, len(holders), xs=xs)
        s_shares = shamir.split(self._s_seed, info.t, len(holders), xs=xs)
        self._held = {who: (b_shares[0][1], s_shares[0][1])}
        sealed = [
            seal(self._share_key(v), b_sh + s_sh, self._share_ad(who, v))
            for v, (_, b_sh), (_, s_sh) in zip(ids, b_shares[1:], s_shares[1:], strict=True)
        ]
        commit = b_commitment(self.config, info.round_idx, who, self._self_seed)
        return self._send(TAG_SHARES, {"b_commit": commit,
                                       "sealed": pack_rows(sealed, SEALED_BYTES)})  # fmt: skip

    def _check_key_signatures(self, msg: Payload, ids: list[str]) -> None:
        """Every neighbour's keys must carry its signature for this round (no substitution,
        replay or impersonation by the server) and all keys must differ."""
        assert self.registry is not None and self._c is not None and self._s is not None
        sigs = unpack_signatures(msg.fields.get("sig"), len(ids), self.party_id)
        seen = {self._c.public, self._s.public}
        for v, sig in zip(ids, sigs, strict=True):
            c_pk, s_pk = self._peers[v]
            if c_pk in seen or s_pk in seen or c_pk == s_pk:
                raise SignatureError(f"{self.party_id}: public key of {v} repeats another key")
            seen |= {c_pk, s_pk}
            stmt = key_statement(self.config, self._r, v, c_pk, s_pk)
            self.registry.verify(v, stmt, sig, f"{self.party_id}: keys of {v}")

    def _share_key(self, peer: str) -> bytes:
        key = self._share_keys.get(peer)
        if key is None:
            assert self._c is not None
            ctx = self.config.pair_context(self._r, "share-key", self.party_id, peer)
            key = self._share_keys[peer] = agree(self._c, self._peers[peer][0], ctx)
        return key

    def _share_ad(self, sender: str, receiver: str) -> bytes:
        return self.config.context(self._r, "share", sender, receiver)

    def masked_input(self, inbox: Inbox) -> list[Envelope]:
        """Round 2: open the routed shares, then send the double-masked input."""
        msg = self._message(inbox, TAG_ROUTED)
        who, info = self.party_id, self._info
        assert info is not None and self._s is not None and self._input is not None
        routed = split_fields(msg, who).get("from", {})
        if set(msg.fields) != {f"from:{u}" for u in routed}:
            raise ProtocolError(f"{who}: unexpected fields in the routed shares")
        for u, sealed in routed.items():
            if u not in self._peers:
                raise ProtocolError(f"{who}: routed a share from non-neighbour {u!r}")
            try:
                plain = open_sealed(self._share_key(u), sealed, self._share_ad(u, who))
            except IntegrityError as err:
                raise ProtocolError(
                    f"{who}: sealed share from {u} failed authentication (tampered or "
                    "misrouted): aborting the round"
                ) from err
            if len(plain) != 2 * SHARE_BYTES:
                raise ProtocolError(f"{who}: share from {u} has {len(plain)} bytes")
            self._held[u] = (plain[:SHARE_BYTES], plain[SHARE_BYTES:])
        self._mask_set = sorted(routed)
        if len(self._mask_set) + 1 < info.t:
            raise ProtocolError(
                f"{who}: only {len(self._mask_set) + 1} share holders remain, threshold {info.t}"
            )
        vec, weight = self._input
        # Weights travel inside the protected sum: y = enc(w x || w), words of the ring's
        # width (encoded in place when they are 64-bit).
        codec = self.config.codec
        as_float = np.empty(self.dim + 1, dtype=np.float64)
        np.multiply(vec, weight, out=as_float[:-1])
        as_float[-1] = weight
        if codec.word_bits == 64:
            y = codec.encode(as_float, out=as_float.view(np.uint64))
        else:
            y = codec.encode(as_float)
            del as_float
        assert self._self_seed is not None
        add_mask(y, self_mask_seed(self._self_seed), +1)
        for v in self._mask_set:
            ctx = self.config.pair_context(info.round_idx, "mask", who, v)
            add_mask(y, agree(self._s, self._peers[v][1], ctx), +1 if v > who else -1)
        self._input = None
        return self._send(TAG_MASKED, {"y": y})

    def unmask(self, inbox: Inbox) -> list[Envelope]:
        """Round 3: shares of b_v for survivors, of s_v for dropped v; never both."""
        who, info = self.party_id, self._info
        if not inbox and self._round is not None:
            # No request: the server fixed the survivors without this client (its masked
            # input was late or lost); it counts as dropped, so there is nothing to reveal.
            logger.debug("%s: no unmask request in round %s (counted as dropped)", who, self._r)
            return []
        if self._answered:
            raise ProtocolError(
                f"{who}: refusing a second unmask request in round {self._round} (answering "
                "could reveal both the self mask and the mask key of one client)"
            )
        msg = self._message(inbox, TAG_UNMASK_REQUEST)
        assert info is not None and self._mask_set is not None
        if self.config.malicious:
            survivors, dropped = self._check_signed_survivors(msg)
        else:
            survivors = id_list(msg.meta, "survivors", who)
            dropped = id_list(msg.meta, "dropped", who)
        if set(survivors) & set(dropped):
            raise ProtocolError(
                f"{who}: refusing to unmask: clients {sorted(set(survivors) & set(dropped))} "
                "are listed both as survivors and as dropped"
            )
        if who not in survivors:
            raise ProtocolError(f"{who}: refusing to unmask: server lists this client as dropped")
        if set(survivors) | set(dropped) != {who, *self._mask_set}:
            raise ProtocolError(
                f"{who}: refusing to unmask: survivor/dropped lists do not match the clients "
                "this client masked with"
            )
        if len(survivors) < info.t:
            raise ProtocolError(
                f"{who}: only {len(survivors)} survivors, below the threshold {info.t}: abort"
            )
        self._answered = True
        fields, meta = unmask_fields({v: self._held[v][0] for v in survivors},
                                     {v: self._held[v][1] for v in dropped})  # fmt: skip
        return self._send(TAG_UNMASK, fields, **meta)

    # -- malicious-server mode: the consistency round (Bonawitz et al. 2017, Sec. 6)
    def sign_survivors(self, inbox: Inbox) -> list[Envelope]:
        """Check the server's survivor statement against this client's view; sign it once."""
        who, info = self.party_id, self._info
        if not inbox and self._round is not None:
            logger.debug("%s: no consistency check in round %s (counted as dropped)", who, self._r)
            return []
        msg = self._message(inbox, TAG_CONSISTENCY)
        if self._signed is not None:
            raise ProtocolError(f"{who}: refusing to sign a second survivor set in one round")
        assert info is not None and self._mask_set is not None and self.identity is not None
        participants = id_list(msg.meta, "participants", who)
        u2, u3 = id_list(msg.meta, "u2", who), id_list(msg.meta, "u3", who)
        if sorted(participants) != sorted(info.graph.participants):
            raise ProtocolError(f"{who}: the survivor statement names other participants")
        if not set(u3) <= set(u2) <= set(participants) or who not in u3:
            raise ProtocolError(f"{who}: survivor statement is not U3 ⊆ U2 ∋ this client")
        shared = set(u2)
        expected = sorted(v for v in info.graph.neighbours(who) if v in shared)
        if expected != self._mask_set:
            raise ProtocolError(
                f"{who}: refusing to sign: the clients this client masked with are not the "
                "neighbours the statement says shared keys (U2): the server routed shares "
                "inconsistently"
            )
        alive = len(holders(info.graph, who) & set(u3))
        if alive < info.t:
            raise ProtocolError(f"{who}: only {alive} of its share holders survive (t={info.t})")
        round_keys = self._check_round_keys(msg, participants, u2)
        stmt = survivor_statement(self.config, self._r, participants, u2, u3, round_keys)
        sig = self.identity.sign(stmt)
        self._signed = (stmt, sig, sorted(u3))
        alive = set(u3)
        fields = {f"mac:{v}": endorse(self._endorsement_key(v), stmt, who, v)
                  for v in self._mask_set if v in alive}  # fmt: skip
        return self._send(TAG_CONSISTENCY_SIG, {"sig": sig, **fields})

    def _check_round_keys(
        self, msg: Payload, participants: list[str], u2: list[str]
    ) -> bytes:
        """The digest of the round's keys the statement lists, after checking the entries this
        client knows: its own keys and exactly the neighbours' keys it was sent."""
        who = self.party_id
        assert self._c is not None and self._s is not None and self._info is not None
        keyed = id_list(msg.meta, "keyed", who)
        raw = msg.fields.get("keys")
        shape = (len(keyed), 32)
        if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.shape != shape:
            raise ProtocolError(f"{who}: the statement's key digests must be uint8 of {shape}")
        if set(msg.fields) != {"keys"}:
            raise ProtocolError(f"{who}: unexpected fields in the survivor statement")
        listed = {v: raw[i].tobytes() for i, v in enumerate(keyed)}
        if not set(u2) <= set(listed) <= set(participants):
            raise ProtocolError(f"{who}: the statement's keys do not cover U2 ⊆ keyed ⊆ P")
        mine = {who: (self._c.public, self._s.public), **self._peers}
        near = {v for v in self._info.graph.neighbours(who) if v in listed}
        if near != set(self._peers) or listed.get(who) != key_digest(who, *mine[who]) or any(
            listed[v] != key_digest(v, *mine[v]) for v in self._peers
        ):
            raise ProtocolError(
                f"{who}: refusing to sign: the statement lists round keys other than the ones "
                "this client advertised and was sent"
            )
        return keys_digest(listed)

    def _endorsement_key(self, peer: str) -> bytes:
        key = self._endorsement_keys.get(peer)
        if key is None:
            ctx = self.config.pair_context(self._r, "endorsement", self.party_id, peer)
            key = self._endorsement_keys[peer] = endorsement_key(self._share_key(peer), ctx)
        return key

    def _check_signed_survivors(self, msg: Payload) -> tuple[list[str], list[str]]:
        """(survivors, dropped) of this client's holders, from the statement it signed,
        after a quorum of signatures on it (:func:`~protocols.secagg.consistency.check_quorum`)."""
        who, info = self.party_id, self._info
        assert info is not None and self._mask_set is not None and self.registry is not None
        if self._signed is None:
            raise ProtocolError(f"{who}: refusing to unmask before signing a survivor set")
        stmt, own, u3 = self._signed
        signers = id_list(msg.meta, "signers", who)
        if not set(signers) <= set(u3):
            raise ProtocolError(f"{who}: signatures from clients outside the signed U3")
        sig_of = dict(zip(signers, unpack_signatures(msg.fields.get("sig"), len(signers), who),
                          strict=True))  # fmt: skip
        if sig_of.get(who, own) != own:
            raise SignatureError(f"{who}: the server altered this client's own signature")
        mac_from = id_list(msg.meta, "mac_from", who) if "mac_from" in msg.meta else []
        if set(msg.fields) - {"sig", "mac"} or not set(mac_from) <= set(signers) & set(
            self._mask_set
        ):
            raise ProtocolError(f"{who}: unexpected fields or MAC senders in the unmask request")
        macs = {}
        if mac_from:
            raw = msg.fields.get("mac")
            shape = (len(mac_from), MAC_BYTES)
            if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.shape != shape:
                raise SignatureError(f"{who}: endorsements must be uint8 of shape {shape}")
            macs = {s: raw[i].tobytes() for i, s in enumerate(mac_from)}

        def verify(signer: str) -> None:
            if signer in macs:
                check_endorsement(self._endorsement_key(signer), stmt, signer, who,
                                  macs[signer], who)  # fmt: skip
            else:
                self.registry.verify(signer, stmt, sig_of[signer], f"{who}: consistency signature")

        check_quorum(verify, signers, info.graph, [who, *self._mask_set], info.t, who, who, macs)
        alive = set(u3)
        mine = [who, *self._mask_set]
        return [v for v in mine if v in alive], [v for v in self._mask_set if v not in alive]
