"""The SecAgg / SecAgg+ server: routes sealed shares, sums masked inputs, removes the masks.

It forwards each client's neighbours' public keys and sealed shares, adds the masked inputs
mod 2^w (the ring of :class:`~protocols.secagg.rounds.SecAggConfig`, 32 or 64 bits), asks
the survivors for shares, reconstructs every survivor's self-mask seed (checked against its
commitment) and every dropped client's mask key (checked against its public key), removes
the masks and decodes the weighted mean. Honest-but-curious: it learns
the sum and who took part, nothing else (package docstring); below t live share holders
anywhere it aborts rather than return a wrong sum. A masked input that arrives after the
survivor set is fixed (its sender is already counted as dropped) is ignored, never added:
the server holds that client's mask key shares, but its self mask still hides the input
(Bonawitz et al. 2017, the reason for double masking).

Malicious-server mode (Bonawitz et al. 2017, Sec. 6): it forwards each client's key
signature with its keys, and replaces ``request_unmask`` by ``request_consistency`` (the
survivor statement: participants, U2, U3) and ``collect_signatures`` (the survivors'
signatures on it, and to each client the MAC endorsements addressed to it, forwarded as the
unmask request). An honest server runs exactly this; the
clients' checks (:mod:`protocols.secagg.client`) are what stop a dishonest one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from protocols.base import AggregateResult, AggregationServer, Envelope, Inbox, ProtocolError
from protocols.crypto import shamir
from protocols.crypto.keyagreement import (
    PUBLIC_KEY_BYTES,
    KeyAgreementError,
    agree,
    check_public_key,
)
from protocols.crypto.prg import add_mask
from protocols.secagg.consistency import (
    MAC_BYTES,
    TAG_CONSISTENCY,
    TAG_CONSISTENCY_SIG,
    key_digest,
    pack_signatures,
)
from protocols.secagg.messages import (
    SEALED_BYTES,
    SECRET_BYTES,
    TAG_KEYLIST,
    TAG_KEYS,
    TAG_MASKED,
    TAG_ROUTED,
    TAG_SHARES,
    TAG_UNMASK,
    TAG_UNMASK_REQUEST,
    b_commitment,
    mask_key_pair,
    self_mask_seed,
    unmask_shares,
    unpack_rows,
)
from protocols.secagg.rounds import RoundInfo, SecAggConfig
from protocols.wire import Payload, WireFormatError

logger = logging.getLogger(__name__)


class SecAggServer(AggregationServer):
    """The aggregator: routes sealed shares, sums masked inputs, removes masks, decodes."""

    def __init__(
        self, party_id: str, client_ids: Sequence[str], dim: int, config: SecAggConfig
    ) -> None:
        super().__init__(party_id)
        self.federation = frozenset(client_ids)
        self.dim = dim
        self.config = config
        self._reset(None)

    def begin_round(self, round_idx: int, participants: Sequence[str]) -> None:
        if not set(participants) <= self.federation:
            raise ProtocolError("secagg: participants outside the federation")
        self._reset(RoundInfo.build(self.config, round_idx, participants))

    def _reset(self, info: RoundInfo | None) -> None:
        self._info = info
        self._result: AggregateResult | None = None
        self._keys: dict[str, tuple[bytes, bytes]] = {}
        self._key_ids: dict[str, list[str]] = {}  # client -> the key list's order it was sent
        self._commits: dict[str, bytes] = {}
        self._mask_sets: dict[str, list[str]] = {}
        self._survivors: list[str] = []
        self._dropped: list[str] = []
        self._sum: np.ndarray | None = None
        self._key_sigs: dict[str, bytes] = {}

    def result(self) -> AggregateResult | None:
        return self._result

    # -- helpers
    def _collect(self, inbox: Inbox, tag: str, allowed: set[str]) -> dict[str, Payload]:
        if self._info is None:
            raise ProtocolError("secagg server: begin_round was not called")
        got: dict[str, Payload] = {}
        for env in inbox:
            if self._late(env, tag):
                continue
            if env.tag != tag or env.sender not in allowed:
                raise ProtocolError(
                    f"secagg server: unexpected {env.tag!r} from {env.sender!r} (expected {tag!r})"
                )
            if env.sender in got:
                raise ProtocolError(f"secagg server: two {tag!r} messages from {env.sender}")
            if env.payload.meta.get("round") != self._info.round_idx:
                raise ProtocolError(
                    f"secagg server: {tag!r} from {env.sender} is for another round"
                )
            got[env.sender] = env.payload
        return got

    def _late(self, env: Envelope, tag: str) -> bool:
        """A masked input for an earlier round (in any phase, the next round's masked-input
        collection included), or from a client counted as dropped after the survivor set
        was fixed. Ignored (logged at debug)."""
        assert self._info is not None
        if env.tag != TAG_MASKED:
            return False
        r = env.payload.meta.get("round")
        stale = isinstance(r, int) and not isinstance(r, bool) and r < self._info.round_idx
        dropped = tag != TAG_MASKED and r == self._info.round_idx and env.sender in self._dropped
        if stale or dropped:
            logger.debug(
                "secagg server: ignoring the masked input of %r for round %r: it arrived "
                "after the survivor set was fixed",
                env.sender, r,
            )  # fmt: skip
            return True
        return False

    def _require(self, live: set[str], holders_of: dict[str, list[str]], stage: str) -> None:
        """Abort unless every client in ``holders_of`` keeps >= t live share holders."""
        assert self._info is not None
        t = self._info.t
        for cid, holders in holders_of.items():
            alive = sum(h in live for h in holders)
            if alive < t:
                raise ProtocolError(
                    f"secagg abort at {stage}: only {alive} live share holders of client "
                    f"{cid} (threshold t={t}; {len(live)} clients remain)"
                )

    def _send(self, receiver: str, tag: str, fields: dict[str, Any], **meta: Any) -> Envelope:
        assert self._info is not None
        return Envelope(
            self.party_id, receiver, tag, Payload(fields, {"round": self._info.round_idx, **meta})
        )

    # -- phases
    def broadcast_keys(self, inbox: Inbox) -> list[Envelope]:
        info = self._info
        got = self._collect(inbox, TAG_KEYS, set(info.graph.participants) if info else set())
        assert info is not None
        for cid, msg in got.items():
            try:
                c_pk, s_pk = msg.blob("c_pk"), msg.blob("s_pk")
                if self.config.malicious:
                    self._key_sigs[cid] = msg.blob("sig")
                    if len(self._key_sigs[cid]) != 64:
                        raise ProtocolError(f"secagg server: malformed key signature from {cid}")
            except (KeyError, WireFormatError) as err:
                raise ProtocolError(f"secagg server: malformed keys from {cid}: {err}") from err
            try:
                self._keys[cid] = (check_public_key(c_pk), check_public_key(s_pk))
            except KeyAgreementError as err:
                raise ProtocolError(f"secagg server: bad public key from {cid}: {err}") from err
        live = set(self._keys)
        self._require(live, {u: [u, *info.graph.neighbours(u)] for u in live}, "advertise_keys")
        out = []
        for u in info.graph.participants:
            if u not in live:
                continue
            ids = self._key_ids[u] = [v for v in info.graph.neighbours(u) if v in live]
            c_pk, s_pk = (
                np.frombuffer(b"".join(self._keys[v][i] for v in ids), np.uint8).reshape(
                    len(ids), PUBLIC_KEY_BYTES
                )
                for i in (0, 1)
            )
            fields = {"c_pk": c_pk, "s_pk": s_pk}
            if self.config.malicious:
                fields["sig"] = pack_signatures([self._key_sigs.get(v, b"") for v in ids])
            out.append(
                self._send(
                    u,
                    TAG_KEYLIST,
                    fields,
                    participants=list(info.graph.participants),
                    ids=ids,
                )
            )
        return out

    def route_shares(self, inbox: Inbox) -> list[Envelope]:
        info = self._info
        got = self._collect(inbox, TAG_SHARES, set(self._keys))
        assert info is not None
        routed: dict[str, dict[str, bytes]] = {}
        for u, msg in got.items():
            if set(msg.fields) != {"b_commit", "sealed"}:
                raise ProtocolError(f"secagg server: garbled share message from {u}")
            ids = self._key_ids[u]
            rows = unpack_rows(msg, "sealed", len(ids), SEALED_BYTES, "secagg server")
            sealed = dict(zip(ids, rows, strict=True))
            commit = msg.fields["b_commit"]
            if not isinstance(commit, bytes) or len(commit) != 32:
                raise ProtocolError(f"secagg server: bad self-mask commitment from {u}")
            self._commits[u] = commit
            for v, blob in sealed.items():
                routed.setdefault(v, {})[u] = blob
        live2 = set(got)
        for u in info.graph.participants:
            if u in live2:
                self._mask_sets[u] = [v for v in info.graph.neighbours(u) if v in live2]
        self._require(live2, {u: [u, *m] for u, m in self._mask_sets.items()}, "share_keys")
        return [
            self._send(
                v,
                TAG_ROUTED,
                {f"from:{u}": blob for u, blob in routed.get(v, {}).items() if u in live2},
            )
            for v in self._mask_sets
        ]

    def request_unmask(self, inbox: Inbox) -> list[Envelope]:
        self._fix_survivors(inbox)
        live3 = set(self._survivors)
        return [
            self._send(
                u,
                TAG_UNMASK_REQUEST,
                {},
                survivors=[v for v in [u, *self._mask_sets[u]] if v in live3],
                dropped=[v for v in self._mask_sets[u] if v not in live3],
            )
            for u in self._survivors
        ]

    def request_consistency(self, inbox: Inbox) -> list[Envelope]:
        """Malicious-server mode: the survivor statement to every survivor (one set)."""
        self._fix_survivors(inbox)
        fields, meta = self.statement_parts()
        meta["u3"] = list(self._survivors)
        return [self._send(u, TAG_CONSISTENCY, fields, **meta) for u in self._survivors]

    def statement_parts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The survivor statement's fields and metadata but U3: the participants, U2 and
        every advertised client's key digest (``keyed`` names the rows of ``keys``)."""
        assert self._info is not None
        keyed = [u for u in self._info.graph.participants if u in self._keys]
        raw = b"".join(key_digest(u, *self._keys[u]) for u in keyed)
        keys = np.frombuffer(raw, np.uint8).reshape(len(keyed), 32).copy()
        meta = {
            "participants": list(self._info.graph.participants),
            "u2": list(self._mask_sets),
            "keyed": keyed,
        }
        return {"keys": keys}, meta

    def collect_signatures(self, inbox: Inbox) -> list[Envelope]:
        """Malicious-server mode: forward the survivors' signatures as the unmask request."""
        got = self._collect(inbox, TAG_CONSISTENCY_SIG, set(self._survivors))
        sigs: dict[str, bytes] = {}
        macs: dict[str, dict[str, bytes]] = {}  # receiver -> signer -> endorsement
        for u, msg in got.items():
            sig = msg.fields.get("sig")
            to = {k[4:]: v for k, v in msg.fields.items() if k.startswith("mac:")}
            if (
                set(msg.fields) != {"sig", *(f"mac:{v}" for v in to)}
                or not isinstance(sig, bytes)
                or len(sig) != 64
                or not set(to) <= set(self._mask_sets.get(u, ()))
                or any(not isinstance(m, bytes) or len(m) != MAC_BYTES for m in to.values())
            ):
                raise ProtocolError(f"secagg server: garbled consistency signature from {u}")
            sigs[u] = sig
            for v, mac in to.items():
                macs.setdefault(v, {})[u] = mac
        signers = [u for u in self._survivors if u in sigs]
        if len(signers) < (self._info.t if self._info else 2):
            raise ProtocolError(
                f"secagg abort at consistency check: only {len(signers)} survivors signed"
            )
        packed = pack_signatures([sigs[u] for u in signers])
        out = []
        for u in signers:
            fields: dict[str, Any] = {"sig": packed}
            meta: dict[str, Any] = {"signers": signers}
            if mine := macs.get(u, {}):  # the endorsements addressed to u
                raw = np.frombuffer(b"".join(mine.values()), np.uint8)
                fields["mac"], meta["mac_from"] = raw.reshape(-1, MAC_BYTES), list(mine)
            out.append(self._send(u, TAG_UNMASK_REQUEST, fields, **meta))
        return out

    def _fix_survivors(self, inbox: Inbox) -> RoundInfo:
        """Sum the masked inputs that arrived; fix U3 (survivors) and the dropped clients."""
        info = self._info
        got = self._collect(inbox, TAG_MASKED, set(self._mask_sets))
        assert info is not None
        words = self.config.codec.dtype  # the ring's width: uint32 or uint64
        total = np.zeros(self.dim + 1, dtype=words)
        for u, msg in got.items():
            y = msg.fields.get("y")
            if (
                set(msg.fields) != {"y"}
                or not isinstance(y, np.ndarray)
                or y.dtype != words
                or y.shape != (self.dim + 1,)
            ):
                desc = (y.dtype, y.shape) if isinstance(y, np.ndarray) else type(y).__name__
                raise ProtocolError(
                    f"secagg server: garbled masked input from {u}: expected {words} of shape "
                    f"({self.dim + 1},), got {desc}"
                )
            np.add(total, y, out=total)
        self._sum = total
        live3 = set(got)
        self._survivors = [u for u in info.graph.participants if u in live3]
        self._dropped = [
            u for u in info.graph.participants if u in self._mask_sets and u not in live3
        ]
        need = {u: [u, *self._mask_sets[u]] for u in self._survivors}
        need |= {v: self._mask_sets[v] for v in self._dropped}
        self._require(live3, need, "masked_input")
        return info

    def finalize(self, inbox: Inbox) -> list[Envelope]:
        info = self._info
        got = self._collect(inbox, TAG_UNMASK, set(self._survivors))
        assert info is not None and self._sum is not None
        live3, dropped = set(self._survivors), set(self._dropped)
        b_shares: dict[str, list[tuple[int, bytes]]] = {u: [] for u in self._survivors}
        s_shares: dict[str, list[tuple[int, bytes]]] = {v: [] for v in self._dropped}
        for r, msg in got.items():
            parts = unmask_shares(msg, "secagg server")
            b_part, s_part = parts["b"], parts["s"]
            mine = {r, *self._mask_sets[r]}
            if not set(b_part) <= mine & live3 or not set(s_part) <= mine & dropped:
                raise ProtocolError(f"secagg server: garbled unmask response from {r}")
            for u, share in b_part.items():
                b_shares[u].append((info.x[r], share))
            for v, share in s_part.items():
                s_shares[v].append((info.x[r], share))
        total = self._sum
        for u in self._survivors:
            seed = self._reconstruct(u, b_shares[u], "self-mask seed")
            if b_commitment(self.config, info.round_idx, u, seed) != self._commits[u]:
                raise ProtocolError(f"secagg server: self-mask seed of {u} fails its commitment")
            add_mask(total, self_mask_seed(seed), -1)
        for v in self._dropped:
            key = mask_key_pair(self._reconstruct(v, s_shares[v], "mask key"))
            if key.public != self._keys[v][1]:
                raise ProtocolError(
                    f"secagg server: reconstructed mask key of {v} does not match its public key"
                )
            for u in self._mask_sets[v]:
                if u in live3:
                    ctx = self.config.pair_context(info.round_idx, "mask", u, v)
                    # u added +PRG(s_uv) if v > u else -PRG(s_uv): remove it.
                    add_mask(total, agree(key, self._keys[u][1], ctx), -1 if v > u else +1)
        values = self.config.codec.decode(total)
        weight = float(values[-1])
        if not weight > 0:
            raise ProtocolError(f"secagg: total weight {weight} of the survivors is not positive")
        self._result = AggregateResult(values[:-1] / weight, weight, tuple(self._survivors))
        self._sum = None
        return []

    def _reconstruct(self, cid: str, shares: list[tuple[int, bytes]], what: str) -> bytes:
        assert self._info is not None
        t = self._info.t
        if len(shares) < t:
            raise ProtocolError(
                f"secagg abort at unmask: only {len(shares)} shares of client {cid}'s {what} "
                f"arrived (threshold t={t}; too many dropouts)"
            )
        try:
            secret = shamir.combine(sorted(shares)[:t], t)
        except shamir.ShamirError as err:
            raise ProtocolError(f"secagg server: cannot reconstruct {cid}'s {what}: {err}") from err
        if len(secret) != SECRET_BYTES:
            raise ProtocolError(f"secagg server: {cid}'s {what} has {len(secret)} bytes")
        return secret
