"""Pairwise-masked secure aggregation: SecAgg (Bonawitz et al., CCS 2017) and SecAgg+
(Bell et al., CCS 2020).

Each client u sends ``y_u = enc(w_u x_u || w_u) + PRG(b_u) + sum_{v in M(u)} ±PRG(s_uv)``
mod 2^64, where ``s_uv`` comes from X25519 agreement between u and v (+ if v > u as strings,
- otherwise) and ``b_u`` is a fresh self-mask seed. ``b_u`` and the mask private key
``s_u^SK`` are Shamir t-of-h shared among u's share holders (u and its neighbours), sealed
under ChaCha20-Poly1305 with pairwise X25519 keys. After the masked inputs arrive, survivors
reveal shares of ``b_v`` for each surviving v and of ``s_v^SK`` for each dropped v, never
both for one client; the server removes all masks and decodes the weighted sum.

``secagg``: complete graph (M(u) = all other clients). ``secagg+``: Harary graph H_{k,n}
(each client masks and shares with its k ring neighbours) on a pseudorandom permutation of
the round's participants, derived from SHA-256(experiment id, round) so every party computes
the same graph; per-client cost O(k (d + log n)) instead of O(n d).

Threat model: honest-but-curious server, possibly colluding with fewer than t clients (of
any neighbourhood, for SecAgg+): it learns the weighted sum (and total weight) of the
clients whose masked inputs it received, and who took part / dropped, but no individual
input; other clients see only sealed shares and public keys. Tolerates up to h - t share
holders dropping per neighbourhood (n - t for ``secagg``) at any step; fewer than t
survivors anywhere aborts with :class:`ProtocolError` rather than return a wrong sum. A
client that drops after sending its masked input (before unmasking) is still in the sum
and in ``AggregateResult.participants`` (Bonawitz et al.'s output is over U3).
Not protected: an active server (no PKI/signatures on the public keys and no consistency
round, so a malicious server could substitute keys or tell clients different dropout sets;
Bonawitz et al.'s active variant needs both); clients lying about their input or sending bad
shares (garbled messages and inconsistent shares are detected and abort, nothing more);
what the sum itself reveals (it is not differentially private; compose with DP noise);
traffic analysis. The neighbour graph is public and predictable, so SecAgg+'s guarantee
holds against corruptions chosen independently of it.

Deviations / choices: keys are fresh per round (two X25519 pairs per client per round), and
every HKDF output is additionally bound to (experiment id, round, step, ordered pair):
per-experiment keys would let a dropped client's reconstructed ``s^SK`` unmask its later
rounds. Share holders include the client itself (as in Bonawitz et al. and Flower). Clients
publish a SHA-256 commitment to ``b_u`` so the server detects inconsistent shares. The
default SecAgg+ degree k = 2 ceil(log2 n) and threshold t = floor(h/2) + 1 are heuristics,
not Bell et al.'s parameter derivation (which depends on the corrupt and dropout fractions).
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from protocols.base import (
    AggregateResult,
    AggregationClient,
    AggregationParties,
    AggregationProtocol,
    AggregationServer,
    Envelope,
    Inbox,
    Phase,
    ProtocolError,
    Role,
)
from protocols.crypto import shamir
from protocols.crypto.aead import IntegrityError, open_sealed, seal
from protocols.crypto.keyagreement import PUBLIC_KEY_BYTES, KeyPair, agree
from protocols.crypto.prg import SEED_BYTES, add_mask
from protocols.fixedpoint import FixedPointCodec
from protocols.wire import Payload, WireFormatError

TAG_KEYS = "secagg/keys"
TAG_KEYLIST = "secagg/keylist"
TAG_SHARES = "secagg/shares"
TAG_ROUTED = "secagg/routed-shares"
TAG_MASKED = "secagg/masked-input"
TAG_UNMASK_REQUEST = "secagg/unmask-request"
TAG_UNMASK = "secagg/unmask"

_SHARE_BYTES = len(shamir.split(bytes(SEED_BYTES), 1, 1)[0][1])


# ----------------------------------------------------------------------------- public setup


@dataclass(frozen=True)
class SecAggConfig:
    """Public parameters every party of a federation agrees on."""

    experiment_id: str
    codec: FixedPointCodec
    k: int | None = None  # None: complete graph (SecAgg)
    threshold: int | float | None = None

    def context(self, round_idx: int, step: str, *parts: str) -> bytes:
        """HKDF info / AEAD associated data: experiment, round, protocol step, parties."""
        return json.dumps(
            ["securefgl/secagg/v1", self.experiment_id, round_idx, step, *parts],
            separators=(",", ":"),
        ).encode()

    def pair_context(self, round_idx: int, step: str, a: str, b: str) -> bytes:
        return self.context(round_idx, step, *sorted((a, b)))


def default_degree(n: int) -> int:
    """SecAgg+ default neighbourhood size: 2 ceil(log2 n) (even, O(log n))."""
    return 2 * max(1, math.ceil(math.log2(max(n, 2))))


def resolve_threshold(threshold: int | float | None, holders: int) -> int:
    """Shamir threshold for ``holders`` share holders (the client and its neighbours).

    ``None`` = floor(h/2) + 1; a float in (0, 1] = that fraction of h (at least 2).
    """
    if threshold is None:
        t = holders // 2 + 1
    elif isinstance(threshold, float):
        t = max(2, math.ceil(threshold * holders))
    else:
        t = threshold
    if t > holders:
        raise ProtocolError(
            f"secagg threshold {t} exceeds the {holders} share holders of a neighbourhood"
        )
    return t


class MaskGraph:
    """Who masks with (and holds shares of) whom in one round.

    Complete graph for SecAgg; for SecAgg+ the Harary graph H_{k,n}: clients on a ring in a
    pseudorandom order, each linked to the k/2 nearest on either side (Bell et al. 2020).
    """

    def __init__(self, participants: Sequence[str], k: int | None, seed: bytes) -> None:
        self.participants = tuple(participants)
        n = len(self.participants)
        self.complete = k is None or k >= n - 1
        self.degree = n - 1 if k is None or self.complete else int(k)
        order = sorted(self.participants, key=lambda c: hashlib.sha256(seed + c.encode()).digest())
        self._ring = order
        self._pos = {c: i for i, c in enumerate(order)}

    @property
    def holders_per_client(self) -> int:
        return self.degree + 1

    def neighbours(self, cid: str) -> tuple[str, ...]:
        if self.complete:
            return tuple(c for c in self.participants if c != cid)
        n, i, half = len(self._ring), self._pos[cid], self.degree // 2
        return tuple(self._ring[(i + off) % n] for off in range(-half, half + 1) if off)


@dataclass(frozen=True)
class RoundInfo:
    """Everything public about one round, computed identically by every party."""

    round_idx: int
    graph: MaskGraph
    t: int
    x: dict[str, int]  # Shamir x-coordinate of each participant

    @classmethod
    def build(cls, config: SecAggConfig, round_idx: int, participants: Sequence[str]) -> RoundInfo:
        ids = list(participants)
        if not all(isinstance(c, str) for c in ids) or len(set(ids)) != len(ids):
            raise ProtocolError("secagg: participants must be distinct string ids")
        if len(ids) < 2:
            raise ProtocolError(f"secagg needs at least 2 participants, got {len(ids)}")
        seed = hashlib.sha256(config.context(round_idx, "graph")).digest()
        graph = MaskGraph(ids, config.k, seed)
        t = resolve_threshold(config.threshold, graph.holders_per_client)
        return cls(round_idx, graph, t, {c: i + 1 for i, c in enumerate(sorted(ids))})


def _b_commitment(config: SecAggConfig, round_idx: int, cid: str, seed: bytes) -> bytes:
    return hashlib.sha256(config.context(round_idx, "self-mask-commit", cid) + seed).digest()


def _id_list(meta: dict[str, Any], key: str, who: str) -> list[str]:
    ids = meta.get(key)
    if not isinstance(ids, list) or not all(isinstance(c, str) for c in ids):
        raise ProtocolError(f"{who}: message field {key!r} must be a list of client ids")
    if len(set(ids)) != len(ids):
        raise ProtocolError(f"{who}: duplicate ids in {key!r}")
    return ids


def _split_fields(payload: Payload, who: str) -> dict[str, dict[str, bytes]]:
    """``{"to:c1": blob, "b:c2": blob}`` -> ``{"to": {"c1": blob}, "b": {"c2": blob}}``."""
    out: dict[str, dict[str, bytes]] = {}
    for name in payload.fields:
        kind, sep, cid = name.partition(":")
        if not sep:
            continue
        try:
            out.setdefault(kind, {})[cid] = payload.blob(name)
        except WireFormatError as err:
            raise ProtocolError(f"{who}: field {name!r} must be a byte blob") from err
    return out


# ------------------------------------------------------------------------------------ client


class SecAggClient(AggregationClient):
    """One client's side: its input, its fresh per-round keys and the shares it holds."""

    def __init__(
        self,
        party_id: str,
        server_id: str,
        client_ids: Sequence[str],
        dim: int,
        config: SecAggConfig,
    ) -> None:
        super().__init__(party_id)
        self.server_id = server_id
        self.federation = frozenset(client_ids)
        self.dim = dim
        self.config = config
        self._reset(None)

    def _reset(self, round_idx: int | None) -> None:
        self._round = round_idx
        self._input: tuple[np.ndarray, float] | None = None
        self._c: KeyPair | None = None
        self._s: KeyPair | None = None
        self._info: RoundInfo | None = None
        self._peers: dict[str, tuple[bytes, bytes]] = {}  # neighbour -> (c_pk, s_pk)
        self._share_keys: dict[str, bytes] = {}
        self._self_seed: bytes | None = None
        self._held: dict[str, tuple[bytes, bytes]] = {}  # owner -> (share of b, share of s^SK)
        self._mask_set: list[str] | None = None
        self._answered = False

    @property
    def _r(self) -> int:
        if self._round is None:
            raise ProtocolError(f"{self.party_id}: begin_round was not called")
        return self._round

    def begin_round(self, round_idx: int, vector: np.ndarray, weight: float) -> None:
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

    def _send(self, tag: str, fields: dict[str, Any]) -> list[Envelope]:
        return [
            Envelope(self.party_id, self.server_id, tag, Payload(fields, {"round": self._round}))
        ]

    def advertise_keys(self, inbox: Inbox) -> list[Envelope]:
        """Round 0: two fresh X25519 public keys (c: share encryption, s: masks)."""
        if self._input is None:
            raise ProtocolError(f"{self.party_id}: begin_round was not called")
        self._c, self._s = KeyPair.generate(), KeyPair.generate()
        return self._send(TAG_KEYS, {"c_pk": self._c.public, "s_pk": self._s.public})

    def share_keys(self, inbox: Inbox) -> list[Envelope]:
        """Round 1: Shamir-share b_u and s_u^SK among the holders, sealed per recipient."""
        msg = self._message(inbox, TAG_KEYLIST)
        who = self.party_id
        participants = _id_list(msg.meta, "participants", who)
        if who not in participants or not set(participants) <= self.federation:
            raise ProtocolError(f"{who}: participant list is not a subset of the federation")
        info = self._info = RoundInfo.build(self.config, self._r, participants)
        ids = _id_list(msg.meta, "ids", who)
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
        self._peers = {v: (c_pk[i].tobytes(), s_pk[i].tobytes()) for i, v in enumerate(ids)}
        assert self._c is not None and self._s is not None
        self._self_seed = secrets.token_bytes(SEED_BYTES)
        holders = [who, *ids]
        xs = [info.x[h] for h in holders]
        b_shares = shamir.split(self._self_seed, info.t, len(holders), xs=xs)
        s_shares = shamir.split(self._s.private.private_bytes_raw(), info.t, len(holders), xs=xs)
        self._held = {who: (b_shares[0][1], s_shares[0][1])}
        fields: dict[str, Any] = {
            "b_commit": _b_commitment(self.config, info.round_idx, who, self._self_seed)
        }
        for v, (_, b_sh), (_, s_sh) in zip(holders[1:], b_shares[1:], s_shares[1:], strict=True):
            fields[f"to:{v}"] = seal(self._share_key(v), b_sh + s_sh, self._share_ad(who, v))
        return self._send(TAG_SHARES, fields)

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
        routed = _split_fields(msg, who).get("from", {})
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
            if len(plain) != 2 * _SHARE_BYTES:
                raise ProtocolError(f"{who}: share from {u} has {len(plain)} bytes")
            self._held[u] = (plain[:_SHARE_BYTES], plain[_SHARE_BYTES:])
        self._mask_set = sorted(routed)
        if len(self._mask_set) + 1 < info.t:
            raise ProtocolError(
                f"{who}: only {len(self._mask_set) + 1} share holders remain, threshold {info.t}"
            )
        vec, weight = self._input
        # Weights travel inside the protected sum: y = enc(w x || w), encoded in place.
        y = np.empty(self.dim + 1, dtype=np.uint64)
        as_float = y.view(np.float64)
        np.multiply(vec, weight, out=as_float[:-1])
        as_float[-1] = weight
        self.config.codec.encode(as_float, out=y)
        assert self._self_seed is not None
        add_mask(y, self._self_seed, +1)
        for v in self._mask_set:
            ctx = self.config.pair_context(info.round_idx, "mask", who, v)
            add_mask(y, agree(self._s, self._peers[v][1], ctx), +1 if v > who else -1)
        self._input = None
        return self._send(TAG_MASKED, {"y": y})

    def unmask(self, inbox: Inbox) -> list[Envelope]:
        """Round 3: shares of b_v for survivors, of s_v^SK for dropped v; never both."""
        who, info = self.party_id, self._info
        if self._answered:
            raise ProtocolError(
                f"{who}: refusing a second unmask request in round {self._round} (answering "
                "could reveal both the self mask and the mask key of one client)"
            )
        msg = self._message(inbox, TAG_UNMASK_REQUEST)
        assert info is not None and self._mask_set is not None
        survivors = _id_list(msg.meta, "survivors", who)
        dropped = _id_list(msg.meta, "dropped", who)
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
        fields = {f"b:{v}": self._held[v][0] for v in survivors}
        fields.update({f"s:{v}": self._held[v][1] for v in dropped})
        return self._send(TAG_UNMASK, fields)


# ------------------------------------------------------------------------------------ server


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
        self._commits: dict[str, bytes] = {}
        self._mask_sets: dict[str, list[str]] = {}
        self._survivors: list[str] = []
        self._dropped: list[str] = []
        self._sum: np.ndarray | None = None

    def result(self) -> AggregateResult | None:
        return self._result

    # -- helpers
    def _collect(self, inbox: Inbox, tag: str, allowed: set[str]) -> dict[str, Payload]:
        if self._info is None:
            raise ProtocolError("secagg server: begin_round was not called")
        got: dict[str, Payload] = {}
        for env in inbox:
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
            except (KeyError, WireFormatError) as err:
                raise ProtocolError(f"secagg server: malformed keys from {cid}: {err}") from err
            if len(c_pk) != PUBLIC_KEY_BYTES or len(s_pk) != PUBLIC_KEY_BYTES:
                raise ProtocolError(f"secagg server: public keys from {cid} are not 32 bytes")
            self._keys[cid] = (c_pk, s_pk)
        live = set(self._keys)
        self._require(live, {u: [u, *info.graph.neighbours(u)] for u in live}, "advertise_keys")
        out = []
        for u in info.graph.participants:
            if u not in live:
                continue
            ids = [v for v in info.graph.neighbours(u) if v in live]
            c_pk, s_pk = (
                np.frombuffer(b"".join(self._keys[v][i] for v in ids), np.uint8).reshape(
                    len(ids), PUBLIC_KEY_BYTES
                )
                for i in (0, 1)
            )
            out.append(
                self._send(
                    u,
                    TAG_KEYLIST,
                    {"c_pk": c_pk, "s_pk": s_pk},
                    participants=list(info.graph.participants),
                    ids=ids,
                )
            )
        return out

    def route_shares(self, inbox: Inbox) -> list[Envelope]:
        info = self._info
        got = self._collect(inbox, TAG_SHARES, set(self._keys))
        assert info is not None
        live1 = set(self._keys)
        routed: dict[str, dict[str, bytes]] = {}
        for u, msg in got.items():
            sealed = _split_fields(msg, "secagg server").get("to", {})
            expected = {v for v in info.graph.neighbours(u) if v in live1}
            if set(sealed) != expected or set(msg.fields) != {"b_commit"} | {
                f"to:{v}" for v in sealed
            }:
                raise ProtocolError(f"secagg server: garbled share message from {u}")
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
        info = self._info
        got = self._collect(inbox, TAG_MASKED, set(self._mask_sets))
        assert info is not None
        total = np.zeros(self.dim + 1, dtype=np.uint64)
        for u, msg in got.items():
            y = msg.fields.get("y")
            if (
                set(msg.fields) != {"y"}
                or not isinstance(y, np.ndarray)
                or y.dtype != np.uint64
                or y.shape != (self.dim + 1,)
            ):
                desc = (y.dtype, y.shape) if isinstance(y, np.ndarray) else type(y).__name__
                raise ProtocolError(
                    f"secagg server: garbled masked input from {u}: expected uint64 of shape "
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

    def finalize(self, inbox: Inbox) -> list[Envelope]:
        info = self._info
        got = self._collect(inbox, TAG_UNMASK, set(self._survivors))
        assert info is not None and self._sum is not None
        live3, dropped = set(self._survivors), set(self._dropped)
        b_shares: dict[str, list[tuple[int, bytes]]] = {u: [] for u in self._survivors}
        s_shares: dict[str, list[tuple[int, bytes]]] = {v: [] for v in self._dropped}
        for r, msg in got.items():
            parts = _split_fields(msg, "secagg server")
            b_part, s_part = parts.get("b", {}), parts.get("s", {})
            mine = {r, *self._mask_sets[r]}
            if (
                not set(b_part) <= mine & live3
                or not set(s_part) <= mine & dropped
                or len(msg.fields) != len(b_part) + len(s_part)
            ):
                raise ProtocolError(f"secagg server: garbled unmask response from {r}")
            for u, share in b_part.items():
                b_shares[u].append((info.x[r], share))
            for v, share in s_part.items():
                s_shares[v].append((info.x[r], share))
        total = self._sum
        for u in self._survivors:
            seed = self._reconstruct(u, b_shares[u], "self-mask seed")
            if _b_commitment(self.config, info.round_idx, u, seed) != self._commits[u]:
                raise ProtocolError(f"secagg server: self-mask seed of {u} fails its commitment")
            add_mask(total, seed, -1)
        for v in self._dropped:
            raw = self._reconstruct(v, s_shares[v], "mask key")
            try:
                private = X25519PrivateKey.from_private_bytes(raw)
            except ValueError as err:
                raise ProtocolError(f"secagg server: bad reconstructed mask key of {v}") from err
            key = KeyPair(private, self._keys[v][1])
            if private.public_key().public_bytes_raw() != key.public:
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
        if len(secret) != SEED_BYTES:
            raise ProtocolError(f"secagg server: {cid}'s {what} has {len(secret)} bytes")
        return secret


# ---------------------------------------------------------------------------------- protocol


class SecAggregation(AggregationProtocol):
    """SecAgg (Bonawitz et al. 2017): complete mask graph, t-of-n Shamir dropout recovery.

    ``experiment_id`` is bound into every derived key. ``threshold``: int, fraction of the
    share holders, or None (floor(h/2) + 1). ``value_bound``: max ``|w_i x_i|`` coordinate and
    max ``w_i``, checked by each client before masking and against the fixed-point headroom
    (None = the largest the headroom allows for the federation size).
    """

    name: ClassVar[str] = "secagg"
    output_role = Role.SERVER
    round_phases = (
        Phase(Role.CLIENT, "advertise_keys"),
        Phase(Role.SERVER, "broadcast_keys"),
        Phase(Role.CLIENT, "share_keys"),
        Phase(Role.SERVER, "route_shares"),
        Phase(Role.CLIENT, "masked_input"),
        Phase(Role.SERVER, "request_unmask"),
        Phase(Role.CLIENT, "unmask"),
        Phase(Role.SERVER, "finalize"),
    )

    def __init__(
        self,
        experiment_id: str,
        *,
        threshold: int | float | None = None,
        frac_bits: int = 24,
        value_bound: float | None = None,
    ) -> None:
        if not isinstance(experiment_id, str) or not experiment_id:
            raise ValueError("experiment_id must be a non-empty string (it binds every key)")
        if isinstance(threshold, bool) or (isinstance(threshold, int) and threshold < 2):
            raise ValueError(f"an integer threshold must be >= 2, got {threshold!r}")
        if isinstance(threshold, float) and not 0 < threshold <= 1:
            raise ValueError(f"a fractional threshold must be in (0, 1], got {threshold}")
        self.experiment_id = experiment_id
        self.threshold = threshold
        self.frac_bits = frac_bits
        self.value_bound = value_bound

    def _degree(self, n: int) -> int | None:
        return None

    def config_for(self, n_clients: int) -> SecAggConfig:
        codec = FixedPointCodec(self.frac_bits, self.value_bound, max_summands=n_clients)
        return SecAggConfig(self.experiment_id, codec, self._degree(n_clients), self.threshold)

    def create_parties(
        self, server_id: str, client_ids: Sequence[str], dim: int
    ) -> AggregationParties:
        ids = list(client_ids)
        if server_id in ids or len(set(ids)) != len(ids):
            raise ValueError("client ids must be distinct and differ from the server id")
        config = self.config_for(len(ids))
        return AggregationParties(
            server=SecAggServer(server_id, ids, dim, config),
            clients={c: SecAggClient(c, server_id, ids, dim, config) for c in ids},
        )


class SecAggPlus(SecAggregation):
    """SecAgg+ (Bell et al. 2020): masks and shares only along a k-regular Harary graph.

    ``k`` (even) = neighbours per client, default 2 ceil(log2 n); the threshold applies to
    the k + 1 share holders of each client. ``k >= n - 1`` is plain SecAgg.
    """

    name: ClassVar[str] = "secagg+"

    def __init__(self, experiment_id: str, *, k: int | None = None, **kwargs: Any) -> None:
        super().__init__(experiment_id, **kwargs)
        if k is not None and (isinstance(k, bool) or k < 2 or k % 2):
            raise ValueError(f"SecAgg+ degree k must be an even integer >= 2, got {k!r}")
        self.k = k

    def _degree(self, n: int) -> int | None:
        return self.k if self.k is not None else default_degree(n)
