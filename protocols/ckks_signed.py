"""CKKS aggregation against an actively malicious server: signed keys, checked aggregates.

The malicious-server mode of :mod:`protocols.ckks` (``threat_model="malicious"``), with the
party identities of :mod:`protocols.identity` (Bonawitz et al. 2017, Sec. 6, assume the same
PKI):

* **Set-up.** A client's X25519 key to the key authority is signed, and the authority's
  deliveries (the public context to the server, each sealed secret context) are signed;
  each receiver verifies. The sealed secret also carries a 32-byte *check key* K that the
  clients and the authority share and the server never sees.
* **Round.** Each client appends check slots to ``p = w x || w``: ``TAGS`` tags
  ``τ_i = PRF_K(round, i)`` in [-1, 1) and ``SKETCHES`` secret projections per block of
  ``BLOCK`` values, ``σ_b = <α_b, p_b>`` with ``α ∈ [-1, 1)`` drawn from K for the round.
  It signs SHA-256 of its ciphertexts bound to (experiment, round, client); the server
  publishes every sender's digest and signature beside the aggregate.
* **Checks before the aggregate is used.** Its own digest is listed unchanged; every listed
  signature verifies (no replayed, foreign or invented update); the decrypted tags equal the
  sum of the listed participants' tags; every decrypted sketch equals the sketch of the
  decrypted sum. Every slot within :func:`tolerance` (CKKS noise and rounding).

What this rules out: any aggregate that is not the sum of exactly the listed participants'
ciphertexts of this round, each once (a missing, doubled, stale or foreign ciphertext moves
the tags by a secret τ), or that adds a plaintext offset δ to the sum (it must guess
``<α_b, δ_b>`` to the tolerance, twice per block: for one coordinate moved by m, chance
about ``(tol/m)^2`` per block).

Cost: about 6 % more slots, one signature per update, one verification per participant;
a sketch can reach ``BLOCK`` times an update's largest entry, so the bound each client
checks before encrypting (``CKKSParams.value_bound``) is in effect 32 times smaller.

Unverified: offsets below the tolerance (about 1e-4 at n = 100, the CKKS precision floor);
algebraic forgeries we have not analysed (e.g. multiplying ciphertexts by plaintext ring
elements whose embedding is 1 on the tag slots and constant on every check block); the
participant set is the server's choice (it may leave any client out, and show different
clients sums over different sets) down to the minimum cohort each client enforces; a client
colluding with the server knows K (and the CKKS key), as it already knew every update; the
authority is trusted.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from protocols.base import AggregationParties, Envelope, Inbox, ProtocolError
from protocols.ckks import (
    CKKSAggregation,
    CKKSClient,
    CKKSKeyAuthority,
    CKKSParams,
    CKKSServer,
    _chunk_blobs,
    _chunk_sizes,
)
from protocols.crypto.keyagreement import derive_key
from protocols.crypto.prg import mask_words
from protocols.identity import (
    MALICIOUS,
    SIGNATURE_BYTES,
    Identity,
    KeyRegistry,
    Pki,
    SignatureError,
    digest,
    statement,
)
from protocols.wire import Payload

DOMAIN = "ckks"
TAGS = 2
SKETCHES = 2
BLOCK = 32
CHECK_KEY_BYTES = 32


def check_slots(dim: int) -> int:
    """Check slots appended to an update of ``dim`` values (plus its weight)."""
    return TAGS + SKETCHES * math.ceil((dim + 1) / BLOCK)


def tolerance(params: CKKSParams, n_clients: int) -> float:
    """Largest honest gap between a decrypted check slot and its expected value: CKKS
    noise (~1e-8 per summand) and rounding, accumulated over one block of ``BLOCK``."""
    step = 2.0 ** -(params.round_bits if params.round_bits is not None else 30)
    return (BLOCK + 1) * (step + 1e-8 * max(n_clients, 1))


class CheckKey:
    """The clients' shared secret for one experiment: tags and sketch coefficients."""

    def __init__(self, key: bytes, experiment_id: str) -> None:
        if len(key) != CHECK_KEY_BYTES:
            raise ProtocolError(f"a check key has {CHECK_KEY_BYTES} bytes, got {len(key)}")
        self._key, self.experiment_id = key, experiment_id
        self._alphas: tuple[tuple[int, int], np.ndarray] | None = None

    def tags(self, round_idx: int, cid: str) -> np.ndarray:
        msg = digest(b"ckks/tag/v1", self.experiment_id.encode(), str(round_idx).encode(),
                     cid.encode())  # fmt: skip
        raw = hmac.digest(self._key, msg, hashlib.sha256)[: 8 * TAGS]
        words = np.frombuffer(raw, dtype="<u8").astype(np.float64)
        return words / 2.0**63 - 1.0

    def alphas(self, round_idx: int, length: int) -> np.ndarray:
        """``SKETCHES × blocks × BLOCK`` coefficients in [-1, 1), secret per round (the last
        round's are kept: a client needs them to extend its update and to check the sum)."""
        if self._alphas is not None and self._alphas[0] == (round_idx, length):
            return self._alphas[1]
        blocks = math.ceil(length / BLOCK)
        info = statement(DOMAIN, self.experiment_id, round_idx, "sketch", "")
        words = mask_words(derive_key(self._key, info), SKETCHES * blocks * BLOCK)
        alpha = (words.astype(np.float64) / 2.0**63 - 1.0).reshape(SKETCHES, blocks, BLOCK)
        self._alphas = ((round_idx, length), alpha)
        return alpha

    @staticmethod
    def sketch(alpha: np.ndarray, values: np.ndarray) -> np.ndarray:
        blocks = alpha.shape[1]
        padded = np.zeros(blocks * BLOCK)
        padded[: values.size] = values
        return np.einsum("sbk,bk->sb", alpha, padded.reshape(blocks, BLOCK)).ravel()


def update_statement(experiment_id: str, round_idx: int, cid: str, blobs_digest: bytes) -> bytes:
    return statement(DOMAIN, experiment_id, round_idx, "update", cid, blobs_digest)


def key_statement(experiment_id: str, cid: str, public: bytes) -> bytes:
    return statement(DOMAIN, experiment_id, None, "client-key", cid, public)


def delivery_statement(
    experiment_id: str, authority: str, receiver: str, fields: dict[str, bytes]
) -> bytes:
    digests = {name: digest(blob) for name, blob in fields.items() if name != "sig"}
    return statement(DOMAIN, experiment_id, None, "delivery", authority, receiver, digests)


class SignedKeyAuthority(CKKSKeyAuthority):
    def __init__(
        self, *args: Any, identity: Identity, registry: KeyRegistry, min_cohort: int = 2
    ) -> None:
        super().__init__(*args)
        self.identity, self.registry, self.min_cohort = identity, registry, min_cohort

    def _accept_client_key(self, env: Envelope, key: bytes) -> None:
        stmt = key_statement(self.experiment_id, env.sender, key)
        self.registry.verify(env.sender, stmt, env.payload.fields.get("sig"), "client key")

    def _secret_plaintext(self, secret_ctx: bytes) -> bytes:
        return secrets.token_bytes(CHECK_KEY_BYTES) + secret_ctx

    def _sign_delivery(self, receiver: str, fields: dict[str, bytes]) -> dict[str, bytes]:
        stmt = delivery_statement(self.experiment_id, self.party_id, receiver, fields)
        return {**fields, "sig": self.identity.sign(stmt)}


class SignedCKKSServer(CKKSServer):
    """Publishes every sender's ciphertext digest and signature beside the aggregate."""

    def __init__(self, *args: Any, registry: KeyRegistry, experiment_id: str) -> None:
        super().__init__(*args)
        self.registry, self.experiment_id = registry, experiment_id
        self.payload_dim = self.dim + check_slots(self.dim)
        self.update_extra = frozenset({"sig"})

    def install_public_context(self, inbox: Inbox) -> list[Envelope]:
        for env in inbox:
            fields = {k: v for k, v in env.payload.fields.items() if isinstance(v, bytes)}
            stmt = delivery_statement(self.experiment_id, env.sender, self.party_id, fields)
            self.registry.verify(env.sender, stmt, fields.get("sig"), "server: public context")
        return super().install_public_context(inbox)

    def _attest(self, senders: list[str]) -> dict[str, Any]:
        n = len(_chunk_sizes(self.payload_dim, self.params.values_per_ciphertext))
        digests, sigs = [], []
        for cid in senders:
            payload = self._received[cid]
            sig = payload.fields.get("sig")
            if not isinstance(sig, bytes) or len(sig) != SIGNATURE_BYTES:
                raise ProtocolError(f"server: update from {cid!r} carries no signature")
            digests.append(digest(*_chunk_blobs(payload, n, cid, self.update_extra)))
            sigs.append(sig)
        return {
            "digests": np.frombuffer(b"".join(digests), np.uint8).reshape(len(senders), 32),
            "sigs": np.frombuffer(b"".join(sigs), np.uint8).reshape(len(senders), 64),
        }


class SignedCKKSClient(CKKSClient):
    """Signs its key and updates; refuses an aggregate its checks reject."""

    def __init__(
        self, *args: Any, identity: Identity, registry: KeyRegistry, min_cohort: int = 2
    ) -> None:
        super().__init__(*args)
        self.identity, self.registry, self.min_cohort = identity, registry, min_cohort
        self.payload_dim = self.dim + check_slots(self.dim)
        self.aggregate_extra = frozenset({"digests", "sigs"})
        self.check_key: CheckKey | None = None
        self._digest: bytes | None = None

    def _sign_key(self, fields: dict[str, bytes]) -> dict[str, bytes]:
        stmt = key_statement(self.experiment_id, self.party_id, fields["x25519_public"])
        return {**fields, "sig": self.identity.sign(stmt)}

    def open_secret_context(self, payload: Payload) -> bytes:
        fields = {k: v for k, v in payload.fields.items() if isinstance(v, bytes)}
        stmt = delivery_statement(self.experiment_id, self.authority_id, self.party_id, fields)
        self.registry.verify(self.authority_id, stmt, fields.get("sig"), "secret context")
        raw = super().open_secret_context(payload)
        self.check_key = CheckKey(raw[:CHECK_KEY_BYTES], self.experiment_id)
        return raw[CHECK_KEY_BYTES:]

    def _key(self) -> CheckKey:
        if self.check_key is None:
            raise ProtocolError(f"{self.party_id}: no check key (run the set-up first)")
        return self.check_key

    def _extend(self, plain: np.ndarray, round_idx: int) -> np.ndarray:
        key = self._key()
        alpha = key.alphas(round_idx, plain.size)
        return np.concatenate([plain, key.tags(round_idx, self.party_id), key.sketch(alpha, plain)])

    def _sign_update(self, blobs: list[bytes]) -> dict[str, bytes]:
        assert self._round is not None
        self._digest = digest(*blobs)
        stmt = update_statement(self.experiment_id, self._round, self.party_id, self._digest)
        return {"sig": self.identity.sign(stmt)}

    def _verify_aggregate(self, payload: Payload, participants: list[str]) -> None:
        who, n = self.party_id, len(participants)
        if n < self.min_cohort:
            raise ProtocolError(
                f"{who}: refusing an aggregate of {n} participants, below the minimum cohort "
                f"of {self.min_cohort} that every client enforces (a server that chose small "
                "cohorts would let a colluding client learn sums of a few clients)"
            )
        digests, sigs = payload.fields.get("digests"), payload.fields.get("sigs")
        if (
            not isinstance(digests, np.ndarray)
            or not isinstance(sigs, np.ndarray)
            or digests.shape != (n, 32)
            or sigs.shape != (n, SIGNATURE_BYTES)
            or digests.dtype != np.uint8
            or sigs.dtype != np.uint8
            or len(set(participants)) != n
        ):
            raise SignatureError(f"{who}: the aggregate carries no per-update signatures")
        assert self._round is not None
        for i, cid in enumerate(participants):
            d = digests[i].tobytes()
            if cid == who:
                if d != self._digest:
                    raise ProtocolError(f"{who}: the server listed a different own update")
                continue
            stmt = update_statement(self.experiment_id, self._round, cid, d)
            self.registry.verify(cid, stmt, sigs[i].tobytes(), f"{who}: update of {cid}")

    def _check_sums(self, sums: np.ndarray, participants: list[str]) -> np.ndarray:
        assert self._round is not None
        key, size = self._key(), self.dim + 1
        data, tags, sketches = sums[:size], sums[size : size + TAGS], sums[size + TAGS :]
        expected = sum((key.tags(self._round, p) for p in participants), np.zeros(TAGS))
        tol = tolerance(self.params, self.n_clients)
        if float(np.max(np.abs(tags - expected))) > tol:
            raise ProtocolError(
                f"{self.party_id}: refusing the aggregate: it is not the sum of the listed "
                "participants' updates of this round (tag check)"
            )
        gap = np.abs(CheckKey.sketch(key.alphas(self._round, size), data) - sketches)
        if float(np.max(gap)) > tol:
            raise ProtocolError(
                f"{self.party_id}: refusing the aggregate: the decrypted sum does not match "
                f"its secret sketches (off by {float(np.max(gap)):.3g} > {tol:.3g})"
            )
        return data


class SignedCKKSAggregation(CKKSAggregation):
    """:class:`~protocols.ckks.CKKSAggregation` in malicious-server mode (module docstring).

    ``pki``: the experiment's :class:`~protocols.identity.Pki` (None: one is issued for the
    parties when they are made, the protocol object acting as the experiment's registrar).
    ``min_cohort``: the fewest participants of an aggregate every client accepts, a public
    parameter of the experiment (None: a majority of the federation, ⌊n/2⌋ + 1, as SecAgg's
    default threshold); :meth:`min_summands` is what it guarantees.
    """

    def __init__(
        self, *args: Any, pki: Pki | None = None, min_cohort: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        if min_cohort is not None and (
            isinstance(min_cohort, bool) or not isinstance(min_cohort, int) or min_cohort < 2
        ):
            raise ValueError(f"min_cohort must be an integer >= 2 or None, got {min_cohort!r}")
        self.threat_model, self.pki, self.min_cohort = MALICIOUS, pki, min_cohort

    def min_summands(self, n_clients: int) -> int:
        """The fewest participants of any aggregate a client decrypts and uses."""
        m = self.min_cohort if self.min_cohort is not None else n_clients // 2 + 1
        if m > n_clients:
            raise ValueError(
                f"min_cohort={m} exceeds the {n_clients} clients of the federation: no round "
                "could run"
            )
        return max(m, 2) if n_clients >= 2 else m

    def min_participants(self, n_clients: int) -> int:
        return self.min_summands(n_clients)

    def create_parties(
        self, server_id: str, client_ids: Sequence[str], dim: int
    ) -> AggregationParties:
        super().create_parties(server_id, client_ids, dim)  # the same checks of the ids
        return signed_parties(self, server_id, client_ids, dim)


def signed_parties(
    protocol: SignedCKKSAggregation, server_id: str, client_ids: Sequence[str], dim: int
) -> AggregationParties:
    """The malicious-server mode's parties (``protocol.pki``, or one issued here)."""
    ids, aid, p = list(client_ids), protocol.authority_id, protocol.params
    exp, pki = protocol.experiment_id, protocol.pki
    if pki is None or not pki.covers([aid, *ids]):
        pki = Pki.issue([server_id, aid, *ids])
    reg, floor = pki.registry, protocol.min_summands(len(ids))
    return AggregationParties(
        server=SignedCKKSServer(server_id, aid, ids, p, dim, registry=reg, experiment_id=exp),
        clients={
            c: SignedCKKSClient(
                c, server_id, aid, p, dim, len(ids), exp, identity=pki.identity(c),
                registry=reg, min_cohort=floor,
            )
            for c in ids
        },
        others={
            aid: SignedKeyAuthority(
                aid, server_id, ids, p, exp, identity=pki.identity(aid), registry=reg
            )
        },
    )
