"""Active-server attacks on SecAgg and SecAgg+ (Bonawitz et al. 2017; Bell et al. 2020).

Each attack is a dishonest :class:`~protocols.secagg.SecAggServer` run against honest
clients (:mod:`attacks.active_server.driver`); it succeeds when the server recovers the
victim's weighted input ``w_u x_u`` alone.

* **inconsistent dropout** (:class:`SplitViewServer`): the server routes the victim u only
  t − 1 of its peers' shares (so u masks with those t − 1 clients only), then tells each
  holder a different survivor set: everyone says "u survived" (b_u revealed) while, for
  each of u's t − 1 mask peers, t other holders are told "it dropped" (its mask key
  revealed). Works with t > n/2 at n = 10, t = 6 (the honest-but-curious clients check only
  their own view). Stopped by the consistency round: one signed statement per round.
* **share replay** (:class:`ReplayServer`): over a few rounds the server declares, each
  time consistently, n − t other clients dropped and so legitimately reconstructs their
  round mask keys; then it replays those old mask public keys to the victim as its peers'
  keys. The victim's pairwise masks are then known and b_u is revealed as usual. Stopped by
  the round-bound key signatures.
* **message substitution** (:class:`KeySubstitutionServer`): the server hands the victim
  its own public keys in place of the peers' (a man in the middle), opens the victim's
  sealed shares of b_u and s_u^SK and unmasks its input right after it arrives. Stopped by
  the key signatures.
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from attacks.active_server.driver import (
    Outcome,
    check_threat_model,
    inputs_for,
    outcome,
    recovered,
    run_round,
)
from protocols.base import Envelope, Inbox, ProtocolError
from protocols.crypto import shamir
from protocols.crypto.aead import IntegrityError, open_sealed, seal
from protocols.crypto.keyagreement import KeyPair, agree
from protocols.crypto.prg import add_mask
from protocols.secagg import SecAggPlus, SecAggregation, SecAggServer
from protocols.secagg.consistency import (
    TAG_CONSISTENCY,
    TAG_CONSISTENCY_SIG,
    pack_signatures,
)
from protocols.secagg.messages import (
    SEALED_BYTES,
    SHARE_BYTES,
    TAG_KEYLIST,
    TAG_MASKED,
    TAG_ROUTED,
    TAG_SHARES,
    TAG_UNMASK,
    TAG_UNMASK_REQUEST,
    b_commitment,
    mask_private,
    self_mask_seed,
    unmask_shares,
    unpack_rows,
)
from protocols.secagg.rounds import RoundInfo

SERVER = "server"


def protocol_for(name: str, threat_model: str, k: int | None = None) -> SecAggregation:
    exp = f"active-server-audit/{name}"
    if name == "secagg+":
        return SecAggPlus(exp, k=k, threat_model=threat_model)
    return SecAggregation(exp, threat_model=threat_model)


class LyingServer(SecAggServer):
    """Shared tools: the victim's masked input and unmasking it with recovered secrets."""

    def __init__(self, *args: Any, victim: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.victim = victim
        self.y_victim: np.ndarray | None = None
        self.estimate: np.ndarray | None = None
        self.note = ""

    def _grab(self, inbox: Inbox) -> None:
        for env in inbox:
            if env.tag == TAG_MASKED and env.sender == self.victim:
                y = env.payload.fields.get("y")
                if isinstance(y, np.ndarray):
                    self.y_victim = y.copy()

    def _combine(self, shares: list[tuple[int, bytes]]) -> bytes | None:
        assert self._info is not None
        t = self._info.t
        if len(shares) < t:
            return None
        try:
            return shamir.combine(sorted(shares)[:t], t)
        except shamir.ShamirError:
            return None

    def _unmask(self, b_seed: bytes, masks: dict[str, bytes]) -> None:
        """``masks``: peer -> X25519 private key bytes of the *other* end of each mask
        (either the victim's own key or the peer's)."""
        assert self._info is not None and self.y_victim is not None
        u, r = self.victim, self._info.round_idx
        y = self.y_victim.copy()
        add_mask(y, self_mask_seed(b_seed), -1)
        for v, (private, peer_public) in masks.items():
            own = X25519PrivateKey.from_private_bytes(private)
            pair = KeyPair(own, own.public_key().public_bytes_raw())
            seed = agree(pair, peer_public, self.config.pair_context(r, "mask", u, v))
            add_mask(y, seed, -1 if v > u else +1)
        values = self.config.codec.decode(y)
        self.estimate = values  # w x_u || w_u

    def _responses(self, inbox: Inbox) -> dict[str, dict[str, list[tuple[int, bytes]]]]:
        """``{"b": {owner: [(x, share)]}, "s": {...}}`` from the unmask responses."""
        assert self._info is not None
        out: dict[str, dict[str, list[tuple[int, bytes]]]] = {"b": {}, "s": {}}
        for env in inbox:
            if env.tag != TAG_UNMASK:
                continue
            for kind, part in unmask_shares(env.payload, "attacker").items():
                for owner, share in part.items():
                    out.setdefault(kind, {}).setdefault(owner, []).append(
                        (self._info.x[env.sender], share)
                    )
        return out

    def _b_seed(self, shares: list[tuple[int, bytes]]) -> bytes | None:
        assert self._info is not None
        seed = self._combine(shares)
        commit = self._commits.get(self.victim)
        if seed is None or b_commitment(self.config, self._info.round_idx, self.victim, seed) != (
            commit
        ):
            return None
        return seed


# ------------------------------------------------------------------ inconsistent dropout
class SplitViewServer(LyingServer):
    """Shrinks the victim's mask set to t − 1 peers, then splits the holders' views."""

    def route_shares(self, inbox: Inbox) -> list[Envelope]:
        out = super().route_shares(inbox)
        assert self._info is not None
        u = self.victim
        self.kept = list(self._mask_sets[u][: self._info.t - 1])
        keep = {f"from:{v}" for v in self.kept}
        for env in out:
            if env.receiver == u:
                env.payload.fields = {k: b for k, b in env.payload.fields.items() if k in keep}
        self.masks = {w: list(m) for w, m in self._mask_sets.items()}
        self.masks[u] = list(self.kept)
        return out

    def split_views(self) -> dict[str, list[str]]:
        """Each survivor's survivor set S_w (w ∈ S_w ⊆ {w} ∪ mask(w), |S_w| ≥ t): u in
        all of them, the victim's mask peers in as few as possible."""
        assert self._info is not None
        t, u, kept = self._info.t, self.victim, set(self.kept)
        alive = set(self._survivors)
        pot = {v: sum(v in self.masks[w] for w in alive - {u, v}) for v in kept}
        inc = dict.fromkeys(kept, 0)
        views: dict[str, list[str]] = {}
        for w in self._survivors:
            if w == u:
                views[w] = [u, *sorted(kept & alive)]
                continue
            view = [w, *([u] if u in self.masks[w] else [])]
            others = [v for v in self.masks[w] if v in alive and v != u and v not in kept]
            view += others[: max(0, t - len(view))]
            if len(view) < t:
                spare = sorted(
                    (v for v in self.masks[w] if v in kept and v in alive),
                    key=lambda v: inc[v] - pot[v],
                )
                for v in spare[: t - len(view)]:
                    inc[v] += 1
                    view.append(v)
            views[w] = view
        return views

    def request_unmask(self, inbox: Inbox) -> list[Envelope]:
        self._grab(inbox)
        self._fix_survivors(inbox)
        self.views = self.split_views()
        return [
            self._send(
                w, TAG_UNMASK_REQUEST, {}, survivors=view,
                dropped=[v for v in self.masks[w] if v not in view],
            )
            for w, view in self.views.items()
        ]  # fmt: skip

    def request_consistency(self, inbox: Inbox) -> list[Envelope]:
        """The same split views, each in its own survivor statement."""
        self._grab(inbox)
        self._fix_survivors(inbox)
        assert self._info is not None
        self.views = self.split_views()
        fields, meta = self.statement_parts()  # participants, U2 and the keys: honest
        return [self._send(w, TAG_CONSISTENCY, fields, **meta, u3=sorted(view))
                for w, view in self.views.items()]  # fmt: skip

    def collect_signatures(self, inbox: Inbox) -> list[Envelope]:
        """The best it can do: forward to each w the signatures of the clients in S_w
        (they signed their own, different sets)."""
        sigs = {e.sender: e.payload.fields.get("sig") for e in inbox
                if e.tag == TAG_CONSISTENCY_SIG}  # fmt: skip
        out = []
        for w in sigs:
            signers = [v for v in sorted(self.views[w]) if isinstance(sigs.get(v), bytes)]
            packed = pack_signatures([sigs[v] for v in signers])  # type: ignore[misc]
            out.append(self._send(w, TAG_UNMASK_REQUEST, {"sig": packed}, signers=signers))
        return out

    def finalize(self, inbox: Inbox) -> list[Envelope]:
        shares = self._responses(inbox)
        seed = self._b_seed(shares["b"].get(self.victim, []))
        keys: dict[str, tuple[bytes, bytes]] = {}
        for v in self.kept:
            raw = self._combine(shares["s"].get(v, []))
            if raw is None:
                self.note = f"too few shares of {v}'s mask key"
                return []
            keys[v] = (mask_private(raw), self._keys[self.victim][1])
        if seed is None or self.y_victim is None:
            self.note = "no self-mask seed or no masked input of the victim"
            return []
        self._unmask(seed, keys)
        return []


# ----------------------------------------------------------------------- share replay
class ReplayServer(LyingServer):
    """Harvests old mask keys through consistent dropouts, then replays them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan: list[str] = []  # clients to declare dropped this round
        self.attack_round = False
        self.old: dict[str, tuple[bytes, bytes, bytes]] = {}  # v -> (s_pk, s_sk, signature)
        self._adverts: dict[str, tuple[bytes, bytes]] = {}

    def broadcast_keys(self, inbox: Inbox) -> list[Envelope]:
        out = super().broadcast_keys(inbox)
        self._adverts = {v: (k[1], self._key_sigs.get(v, b"")) for v, k in self._keys.items()}
        if not self.attack_round:
            return out
        for env in out:
            if env.receiver != self.victim or env.tag != TAG_KEYLIST:
                continue
            ids = env.payload.meta["ids"]
            s_pk = env.payload.fields["s_pk"].copy()
            sig = env.payload.fields.get("sig")
            for i, v in enumerate(ids):
                if v in self.old:
                    s_pk[i] = np.frombuffer(self.old[v][0], np.uint8)
                    if isinstance(sig, np.ndarray):
                        sig[i] = np.frombuffer(self.old[v][2], np.uint8)
            env.payload.fields["s_pk"] = s_pk
        return out

    def _fix_survivors(self, inbox: Inbox) -> Any:
        self._grab(inbox)
        kept = [e for e in inbox if not (e.tag == TAG_MASKED and e.sender in self.plan)]
        return super()._fix_survivors(kept)

    def finalize(self, inbox: Inbox) -> list[Envelope]:
        shares = self._responses(inbox)
        for v in self._dropped:  # legitimately reconstructed: harvest
            raw = self._combine(shares["s"].get(v, []))
            if raw is not None:
                s_pk, sig = self._adverts[v]
                self.old[v] = (s_pk, mask_private(raw), sig)
        if self.attack_round and self.y_victim is not None and self.victim in self._mask_sets:
            seed = self._b_seed(shares["b"].get(self.victim, []))
            u_pk = self._keys[self.victim][1]
            masks = {v: (self.old[v][1], u_pk) for v in self._mask_sets[self.victim]
                     if v in self.old}  # fmt: skip
            if seed is not None and len(masks) == len(self._mask_sets[self.victim]):
                self._unmask(seed, masks)
        try:
            return super().finalize(inbox)
        except ProtocolError:
            return []  # the sum is garbage after the replay; the server does not care


# ------------------------------------------------------------------ key substitution
class KeySubstitutionServer(LyingServer):
    """A man in the middle between the victim and every peer."""

    def broadcast_keys(self, inbox: Inbox) -> list[Envelope]:
        out = super().broadcast_keys(inbox)
        self.fake: dict[str, tuple[KeyPair, KeyPair]] = {}
        for env in out:
            if env.receiver != self.victim:
                continue
            ids = env.payload.meta["ids"]
            c_pk, s_pk = env.payload.fields["c_pk"].copy(), env.payload.fields["s_pk"].copy()
            for i, v in enumerate(ids):
                self.fake[v] = (KeyPair.generate(), KeyPair.generate())
                c_pk[i] = np.frombuffer(self.fake[v][0].public, np.uint8)
                s_pk[i] = np.frombuffer(self.fake[v][1].public, np.uint8)
            env.payload.fields.update(c_pk=c_pk, s_pk=s_pk)
        return out

    def _pair_key(self, v: str) -> bytes:
        assert self._info is not None
        u, r = self.victim, self._info.round_idx
        ctx = self.config.pair_context(r, "share-key", u, v)
        return agree(self.fake[v][0], self._keys[u][0], ctx)

    def route_shares(self, inbox: Inbox) -> list[Envelope]:
        assert self._info is not None
        u, r = self.victim, self._info.round_idx
        self.b_shares: list[tuple[int, bytes]] = []
        self.s_shares: list[tuple[int, bytes]] = []
        for env in inbox:
            if env.tag != TAG_SHARES or env.sender != u:
                continue
            ids = self._key_ids[u]
            rows = unpack_rows(env.payload, "sealed", len(ids), SEALED_BYTES, "attacker")
            for v, sealed in zip(ids, rows, strict=True):
                try:
                    plain = open_sealed(self._pair_key(v), sealed, self.config.context(
                        r, "share", u, v))  # fmt: skip
                except IntegrityError:
                    continue
                self.b_shares.append((self._info.x[v], plain[:SHARE_BYTES]))
                self.s_shares.append((self._info.x[v], plain[SHARE_BYTES:]))
        out = super().route_shares(inbox)
        for env in out:  # fabricated shares "from" each peer, sealed under the fake keys
            if env.receiver == u and env.tag == TAG_ROUTED:
                env.payload.fields = {
                    name: seal(self._pair_key(name[5:]), secrets.token_bytes(2 * SHARE_BYTES),
                               self.config.context(r, "share", name[5:], u))
                    for name in env.payload.fields
                }  # fmt: skip
        return out

    def _steal(self, inbox: Inbox) -> None:
        self._grab(inbox)
        seed, key = self._b_seed(self.b_shares), self._combine(self.s_shares)
        if seed is None or key is None or self.y_victim is None:
            self.note = "the victim's shares or masked input never reached the server"
            return
        masks = {v: (mask_private(key), self.fake[v][1].public)
                 for v in self._mask_sets[self.victim]}  # fmt: skip
        self._unmask(seed, masks)
        self.note = "read after masked_input; the peers abort later (shares that do not open)"

    def request_unmask(self, inbox: Inbox) -> list[Envelope]:
        self._steal(inbox)
        return []

    def request_consistency(self, inbox: Inbox) -> list[Envelope]:
        self._steal(inbox)
        return []

    def finalize(self, inbox: Inbox) -> list[Envelope]:
        return []  # the input is taken; the round is abandoned


ATTACKS = {
    "inconsistent_dropout": SplitViewServer,
    "share_replay": ReplayServer,
    "message_substitution": KeySubstitutionServer,
}


def run_attack(
    attack: str,
    threat_model: str,
    protocol_name: str = "secagg",
    n: int = 10,
    dim: int = 16,
    k: int | None = None,
    seed: int = 0,
) -> Outcome:
    """One attack against ``protocol_name`` with ``n`` clients under ``threat_model``;
    the victim is the first client."""
    check_threat_model(threat_model)
    protocol = protocol_for(protocol_name, threat_model, k)
    ids = [f"c{i:02d}" for i in range(n)]
    honest = protocol.create_parties(SERVER, ids, dim)
    config = protocol.config_for(n)
    info = RoundInfo.build(config, 0, ids)
    server = ATTACKS[attack](SERVER, ids, dim, config, victim=ids[0])
    inputs = inputs_for(ids, dim, seed)
    refusals: list[dict[str, str]] = []
    round_idx = 0
    if isinstance(server, ReplayServer):  # harvest rounds: consistent, legitimate dropouts
        chunk = max(1, info.graph.holders_per_client - info.t)  # drops any round tolerates
        rounds = -(-info.graph.degree // chunk)  # the attack round's graph is public
        peers = list(RoundInfo.build(config, rounds, ids).graph.neighbours(ids[0]))
        for start in range(0, len(peers), chunk):
            server.plan = peers[start : start + chunk]
            refusals += run_round(protocol, honest.clients, server, round_idx, inputs).log
            round_idx += 1
        server.plan, server.attack_round = [], True
    refusals += run_round(protocol, honest.clients, server, round_idx, inputs).log
    vec, weight = inputs[ids[0]]
    ok, err = recovered(server.estimate, np.append(vec * weight, weight))
    details = {"clients": n, "dim": dim, "rounds": round_idx + 1, "victim": ids[0],
               "t": info.t, "holders": info.graph.holders_per_client, "max_abs_error": err,
               "note": server.note}  # fmt: skip
    return outcome(attack, protocol_name, threat_model, ok, "recovered", refusals, **details)
