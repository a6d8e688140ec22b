"""Homomorphic aggregation with CKKS (Cheon, Kim, Kim, Song, ASIACRYPT 2017) via TenSEAL.

Clients encrypt ``w_i * x_i || w_i`` under one shared CKKS secret key, the server adds the
ciphertexts, and the clients decrypt the sum and divide by the decrypted total weight
(:mod:`protocols.ckks_relay`, the honest-but-curious default, has one client decrypt and
relay the mean sealed to the others).
A key authority (``Role.AUTHORITY``, never the server) makes the context, sends the server
the parameters only (no secret, public, relinearisation or Galois key: a sum needs none)
and each client the secret context sealed with ChaCha20-Poly1305 under an X25519 key agreed
with it. Round phases: client ``encrypt`` -> server ``add_and_broadcast`` -> client
``decrypt``. Parameters (:class:`CKKSParams`): N = 4096, moduli (60, 40) bits (128-bit
security by the HE Standard), scale 2^36, symmetric-key encryption, two reals per complex
slot and seeded ciphertexts (:mod:`protocols.ckks_codec`): about 8 bytes per value up (2x
float32), 16 down (the sum is an expanded ciphertext).

Threat model: protects each update from an honest-but-curious server; against a malicious
one, :mod:`protocols.ckks_signed` (signed keys, checked aggregates). Not protected: a
server colluding with the key authority or with any client (clients share one key), a
malicious server, the aggregate from the clients, IND-CPA^D noise leakage (Li & Micciancio
2021; decrypted sums are rounded, a heuristic mitigation). Parameter choices, precision
and the full threat model: ``docs/protocols.md``.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import tenseal as ts

from protocols.base import (
    AggregateResult,
    AggregationAuthority,
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
from protocols.ckks_codec import (
    MAX_COEFF_BITS_128,
    MAX_PRIME_BITS,
    CiphertextError,
    CKKSCodec,
    CKKSParams,
    chunk_sizes,
    encrypt_chunks,
    load_chunk,
    make_codec,
)
from protocols.ckks_workers import EncryptionPool, PendingBlobs
from protocols.crypto.aead import open_sealed, seal
from protocols.crypto.keyagreement import KeyAgreementError, KeyPair, agree, check_public_key
from protocols.identity import HONEST_BUT_CURIOUS
from protocols.wire import Payload, WireFormatError

logger = logging.getLogger(__name__)

__all__ = [  # the parameters and chunk codec live in protocols.ckks_codec
    "MAX_COEFF_BITS_128", "MAX_PRIME_BITS", "CKKSAggregation", "CKKSClient", "CKKSKeyAuthority",
    "CKKSParams", "CKKSServer", "CiphertextError", "ckks_encrypt_throughput", "encrypt_chunks",
    "load_chunk", "serialize_public", "serialize_secret",
]  # fmt: skip

DEFAULT_AUTHORITY_ID = "key-authority"
TAG_CLIENT_KEY = "ckks/client-key"
TAG_PUBLIC_CONTEXT = "ckks/public-context"
TAG_SECRET_CONTEXT = "ckks/secret-context"
TAG_UPDATE = "ckks/update"
TAG_AGGREGATE = "ckks/aggregate"


def serialize_public(ctx: ts.Context) -> bytes:
    """The parameters only: no secret, public, relinearisation or Galois key."""
    return ctx.serialize(
        save_public_key=False,
        save_secret_key=False,
        save_galois_keys=False,
        save_relin_keys=False,
    )


def serialize_secret(ctx: ts.Context) -> bytes:
    """Parameters and the secret key (symmetric mode has no public key; no eval keys)."""
    return ctx.serialize(
        save_public_key=False,
        save_secret_key=True,
        save_galois_keys=False,
        save_relin_keys=False,
    )


def load_context(blob: object, params: CKKSParams, secret: bool, what: str) -> ts.Context:
    """A delivered context: it parses, is at the protocol's scale and holds the secret key
    if and only if ``secret`` (a server must never be handed one)."""
    try:
        ctx = ts.context_from(blob, n_threads=1) if isinstance(blob, bytes) else None
    except (ValueError, RuntimeError, TypeError) as err:
        raise WireFormatError(f"{what}: context does not parse ({err})") from err
    if ctx is None or ctx.is_private() != secret:
        wanted = "a context with" if secret else "parameters only, refusing a context with"
        raise ProtocolError(f"{what}: expected {wanted} the secret key")
    if ctx.global_scale != params.scale:
        raise ProtocolError(f"{what}: context does not match the CKKS parameters")
    return ctx


def _binding(experiment_id: str, authority_id: str, client_id: str) -> bytes:
    """HKDF info and AEAD associated data for one client's sealed secret context."""
    return (
        b"securefgl/ckks/v1/secret-context|"
        + json.dumps([experiment_id, authority_id, client_id]).encode()
    )


def positive_weight(total: float) -> float:
    """The decrypted total weight, refused unless positive (the mean divides by it)."""
    total = float(total)
    if not total > 0:
        raise ProtocolError("ckks aggregation: total weight is not positive")
    return total


def _chunk_fields(blobs: Sequence[bytes]) -> dict[str, bytes]:
    return {f"ct{j:05d}": b for j, b in enumerate(blobs)}


def _chunk_blobs(
    payload: Payload, n_chunks: int, what: str, extra: frozenset[str] = frozenset()
) -> list[bytes]:
    names = [f"ct{j:05d}" for j in range(n_chunks)]
    if sorted(set(payload.fields) - extra) != names:
        raise CiphertextError(
            f"{what}: expected fields {names[0]}..{names[-1]}, got {sorted(payload.fields)[:3]}..."
        )
    return [payload.blob(name) for name in names]


def _chunk_sizes(dim: int, per_chunk: int) -> list[int]:
    total = dim + 1
    return chunk_sizes(total, per_chunk)


class CKKSKeyAuthority(AggregationAuthority):
    """Generates the CKKS keys, hands them out, then forgets them."""

    def __init__(
        self,
        party_id: str,
        server_id: str,
        client_ids: Sequence[str],
        params: CKKSParams,
        experiment_id: str,
    ) -> None:
        super().__init__(party_id)
        self.server_id = server_id
        self.client_ids = tuple(client_ids)
        self.params = params
        self.experiment_id = experiment_id

    def distribute_keys(self, inbox: Inbox) -> list[Envelope]:
        client_keys: dict[str, bytes] = {}
        for env in inbox:
            if env.tag != TAG_CLIENT_KEY:
                continue
            if env.sender not in self.client_ids or env.sender in client_keys:
                raise ProtocolError(f"unexpected or duplicate client key from {env.sender!r}")
            try:
                client_keys[env.sender] = check_public_key(env.payload.blob("x25519_public"))
            except (KeyError, KeyAgreementError) as err:
                raise ProtocolError(f"bad client key from {env.sender!r}: {err}") from err
            self._accept_client_key(env, client_keys[env.sender])
        if not client_keys:
            raise ProtocolError("ckks key authority: no client key arrived")
        missing = [c for c in self.client_ids if c not in client_keys]
        if missing:
            logger.warning("ckks: no key from %s; they cannot take part", missing)
        ctx = self.params.make_context()
        secret_ctx, public_ctx = serialize_secret(ctx), serialize_public(ctx)
        del ctx
        own = KeyPair.generate()
        meta = {"experiment_id": self.experiment_id}
        fields: dict[str, bytes] = {"context": public_ctx}
        out = [
            Envelope(
                self.party_id,
                self.server_id,
                TAG_PUBLIC_CONTEXT,
                Payload(self._sign_delivery(self.server_id, fields), dict(meta)),
            )
        ]
        secret_plain = self._secret_plaintext(secret_ctx)
        for cid, client_public in client_keys.items():
            binding = _binding(self.experiment_id, self.party_id, cid)
            sealed = seal(agree(own, client_public, binding), secret_plain, binding)
            fields = {"sealed_context": sealed, "authority_public": own.public}
            payload = Payload(self._sign_delivery(cid, fields), dict(meta))
            out.append(Envelope(self.party_id, cid, TAG_SECRET_CONTEXT, payload))
        return out

    # hooks of the malicious-server mode (protocols.ckks_signed)
    def _accept_client_key(self, env: Envelope, key: bytes) -> None:
        """Check a client's key message beyond its format (no-op: authenticated channel)."""

    def _secret_plaintext(self, secret_ctx: bytes) -> bytes:
        return secret_ctx

    def _sign_delivery(self, receiver: str, fields: dict[str, bytes]) -> dict[str, bytes]:
        return fields


class CKKSServer(AggregationServer):
    """Adds ciphertexts under a parameters-only context: it can neither decrypt nor encrypt."""

    def __init__(
        self,
        party_id: str,
        authority_id: str,
        client_ids: Sequence[str],
        params: CKKSParams,
        dim: int,
    ) -> None:
        super().__init__(party_id)
        self.authority_id = authority_id
        self.client_ids = frozenset(client_ids)
        self.params = params
        self.dim = dim
        self.context: ts.Context | None = None
        self.codec: CKKSCodec | None = None
        self._context_bytes = b""  # the same context, serialized (for the worker processes)
        self._pool = EncryptionPool(params)
        self._round: int | None = None
        self._expected: frozenset[str] = frozenset()
        self.payload_dim = dim  # values per update besides the weight (plus check slots)
        self.update_extra: frozenset[str] = frozenset()  # non-ciphertext fields of an update

    def install_public_context(self, inbox: Inbox) -> list[Envelope]:
        envs = [e for e in inbox if e.tag == TAG_PUBLIC_CONTEXT]
        if len(envs) != 1 or envs[0].sender != self.authority_id:
            raise ProtocolError("server: expected one public context from the key authority")
        # The server must never hold the secret key (cf. FedGraph, which ships it to it).
        blob = envs[0].payload.blob("context")
        ctx = load_context(blob, self.params, False, "server")
        self.context, self.codec, self._context_bytes = ctx, make_codec(ctx, self.params), blob
        return []

    def begin_round(self, round_idx: int, participants: Sequence[str]) -> None:
        self._round = round_idx
        self._expected = frozenset(participants)

    def add_and_broadcast(self, inbox: Inbox) -> list[Envelope]:
        fields, meta, senders = self._sum_updates(inbox)
        return [
            Envelope(self.party_id, cid, TAG_AGGREGATE, Payload(dict(fields), dict(meta)))
            for cid in senders
        ]

    def _sum_updates(self, inbox: Inbox) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        """The summed ciphertext's fields, its meta (round, participants) and the senders."""
        if self.context is None:
            raise ProtocolError("server: no CKKS context (run setup_parties first)")
        assert not self.context.is_private(), "the server must not hold the secret key"
        sizes = _chunk_sizes(self.payload_dim, self.params.values_per_ciphertext)
        codec = self.codec
        assert codec is not None
        contributions: list[tuple[str, list[bytes]]] = []
        senders: list[str] = []
        self._received: dict[str, Payload] = {}
        for env in (e for e in inbox if e.tag == TAG_UPDATE):
            if env.sender not in self._expected or env.sender in senders:
                raise ProtocolError(f"server: unexpected or duplicate update from {env.sender!r}")
            if env.payload.meta.get("round") != self._round:
                raise ProtocolError(f"server: update from {env.sender!r} is for another round")
            what = f"update from {env.sender!r}"
            blobs = _chunk_blobs(env.payload, len(sizes), what, self.update_extra)
            self._received[env.sender] = env.payload
            contributions.append((what, blobs))
            senders.append(env.sender)
        if not contributions:
            raise ProtocolError("ckks aggregation: no client update arrived")
        sums = self._pool.add_all(self._context_bytes, codec, contributions, sizes)
        fields: dict[str, Any] = dict(_chunk_fields(sums))
        fields.update(self._attest(senders))
        return fields, {"round": self._round, "participants": senders}, senders

    def _attest(self, senders: list[str]) -> dict[str, Any]:
        return {}  # malicious-server mode: every sender's digest and signature


class CKKSClient(AggregationClient):
    """Holds the shared secret key; encrypts ``w x || w`` and decrypts the aggregate."""

    def __init__(
        self,
        party_id: str,
        server_id: str,
        authority_id: str,
        params: CKKSParams,
        dim: int,
        n_clients: int,
        experiment_id: str,
    ) -> None:
        super().__init__(party_id)
        self.server_id = server_id
        self.authority_id = authority_id
        self.params = params
        self.dim = dim
        self.n_clients = n_clients
        self.experiment_id = experiment_id
        self.context: ts.Context | None = None
        self.codec: CKKSCodec | None = None
        self._keypair: KeyPair | None = None
        self._round: int | None = None
        self._used_rounds: set[int] = set()  # tags, sketches and signatures are bound to it
        self._context_bytes = b""  # the secret context, for this party's encryption workers
        self._pool = EncryptionPool(params)
        self._pending: PendingBlobs | None = None  # this round's update, being encrypted
        self._result: AggregateResult | None = None
        self.payload_dim = dim  # values per update besides the weight (plus check slots)
        self.aggregate_extra: frozenset[str] = frozenset()  # non-ciphertext fields

    # -- setup -------------------------------------------------------------------------
    def send_key(self, inbox: Inbox) -> list[Envelope]:
        self._keypair = KeyPair.generate()
        payload = Payload(
            self._sign_key({"x25519_public": self._keypair.public}),
            {"experiment_id": self.experiment_id},
        )
        return [Envelope(self.party_id, self.authority_id, TAG_CLIENT_KEY, payload)]

    # hooks of the malicious-server mode (protocols.ckks_signed): sign the key and each
    # update, append check slots, verify the aggregate and its decrypted check slots
    def _sign_key(self, fields: dict[str, bytes]) -> dict[str, bytes]:
        return fields

    def _extend(self, plain: np.ndarray, round_idx: int) -> np.ndarray:
        return plain

    def _sign_update(self, blobs: list[bytes]) -> dict[str, bytes]:
        return {}

    def _verify_aggregate(self, payload: Payload, participants: list[str]) -> None:
        pass

    def _check_sums(self, sums: np.ndarray, participants: list[str]) -> np.ndarray:
        return sums

    def open_secret_context(self, payload: Payload) -> bytes:
        """Decrypt the sealed secret context; :class:`IntegrityError` if it is not ours."""
        if self._keypair is None:
            raise ProtocolError(f"{self.party_id}: send_key has not run")
        binding = _binding(self.experiment_id, self.authority_id, self.party_id)
        if set(payload.fields) - {"sig"} != {"sealed_context", "authority_public"}:
            raise ProtocolError(f"{self.party_id}: malformed secret-context message")
        key = agree(self._keypair, payload.blob("authority_public"), binding)
        return open_sealed(key, payload.blob("sealed_context"), binding)

    def install_secret_context(self, inbox: Inbox) -> list[Envelope]:
        envs = [e for e in inbox if e.tag == TAG_SECRET_CONTEXT]
        if len(envs) != 1 or envs[0].sender != self.authority_id:
            raise ProtocolError(f"{self.party_id}: expected one secret context from the authority")
        raw = self.open_secret_context(envs[0].payload)
        ctx = load_context(raw, self.params, True, f"{self.party_id} <- {self.authority_id}")
        self.context, self._keypair, self._context_bytes = ctx, None, raw
        self.codec = make_codec(ctx, self.params)
        return []

    # -- rounds ------------------------------------------------------------------------
    def begin_round(self, round_idx: int, vector: np.ndarray, weight: float) -> None:
        """Start round ``round_idx`` with this client's update. Every round index is used at
        most once: the malicious mode's tags, sketches and signatures are bound to it, so a
        server that reused one could hand back an earlier round's signed updates."""
        if round_idx in self._used_rounds:
            raise ProtocolError(
                f"{self.party_id}: round {round_idx} was already used; every ckks round needs "
                "a fresh round index"
            )
        vector = np.asarray(vector, dtype=np.float64)
        if vector.shape != (self.dim,):
            raise ProtocolError(f"{self.party_id}: update shape {vector.shape} != ({self.dim},)")
        weight = float(weight)
        plain = np.append(vector * weight, weight)
        if not (np.all(np.isfinite(plain)) and weight >= 0):
            raise ProtocolError(f"{self.party_id}: update and weight must be finite, weight >= 0")
        bound = self.params.value_bound(self.n_clients)
        if plain.size and float(np.max(np.abs(plain))) > bound:
            raise ProtocolError(
                f"{self.party_id}: |w*x| or w exceeds {bound:.3g}, which could overflow the "
                f"CKKS sum of {self.n_clients} clients; lower scale_bits or rescale weights"
            )
        plain = self._extend(plain, round_idx)
        if plain.size and float(np.max(np.abs(plain))) > bound:
            raise ProtocolError(f"{self.party_id}: a check slot exceeds {bound:.3g}")
        self._round, self._result, self._pending = round_idx, None, None
        self._used_rounds.add(round_idx)
        if self.codec is not None:  # encrypt now, on this party's workers (protocols.ckks_workers)
            self._pending = self._pool.encrypt_update(self._context_bytes, self.codec, plain)

    def encrypt(self, inbox: Inbox) -> list[Envelope]:
        if self.context is None:
            raise ProtocolError(f"{self.party_id}: no CKKS secret context (run setup first)")
        if self._pending is None:
            raise ProtocolError(f"{self.party_id}: begin_round was not called")
        blobs, self._pending = self._pending.result(), None
        fields: dict[str, Any] = dict(_chunk_fields(blobs))
        fields.update(self._sign_update(blobs))
        payload = Payload(fields, {"round": self._round})
        return [Envelope(self.party_id, self.server_id, TAG_UPDATE, payload)]

    def decrypt(self, inbox: Inbox) -> list[Envelope]:
        sums, participants = self._open_aggregate(inbox)
        total_weight = positive_weight(sums[self.dim])
        self._result = AggregateResult(
            sums[: self.dim] / total_weight, total_weight, tuple(participants)
        )
        return []

    def _open_aggregate(self, inbox: Inbox) -> tuple[np.ndarray, list[str]]:
        """Check and decrypt the server's summed ciphertext: the sums and the participants."""
        if self.context is None:
            raise ProtocolError(f"{self.party_id}: no CKKS secret context")
        envs = [e for e in inbox if e.tag == TAG_AGGREGATE and e.sender == self.server_id]
        if len(envs) != 1:
            raise ProtocolError(f"{self.party_id}: expected one aggregate, got {len(envs)}")
        participants = self._check_round_meta(envs[0].payload.meta)
        self._verify_aggregate(envs[0].payload, participants)
        sizes = _chunk_sizes(self.payload_dim, self.params.values_per_ciphertext)
        blobs = _chunk_blobs(envs[0].payload, len(sizes), "aggregate", self.aggregate_extra)
        codec = self.codec
        assert codec is not None
        sums = np.concatenate(
            [
                codec.decrypt(codec.load(b, n, f"aggregate[{j}]"), n)
                for j, (b, n) in enumerate(zip(blobs, sizes, strict=True))
            ]
        )
        if self.params.round_bits is not None:  # heuristic IND-CPA^D mitigation
            sums = np.round(np.ldexp(sums, self.params.round_bits)) / 2.0**self.params.round_bits
        return self._check_sums(sums, participants), participants

    def _check_round_meta(self, meta: dict[str, Any]) -> list[str]:
        """The participant list of a message about this round that includes this client."""
        participants = meta.get("participants")
        if meta.get("round") != self._round or not isinstance(participants, list):
            raise ProtocolError(f"{self.party_id}: aggregate is for another round or malformed")
        if not all(isinstance(p, str) for p in participants):
            raise ProtocolError(f"{self.party_id}: malformed participant list")
        if self.party_id not in participants:
            raise ProtocolError(f"{self.party_id}: own update is not in the aggregate")
        return participants

    def result(self) -> AggregateResult | None:
        return self._result


class CKKSAggregation(AggregationProtocol):
    """Weighted mean under CKKS: the server adds ciphertexts, clients decrypt.

    ``experiment_id`` binds the sealed key distribution to one experiment (random if None).
    Malicious-server mode: :class:`protocols.ckks_signed.SignedCKKSAggregation`.
    """

    name = "ckks"
    output_role = Role.CLIENT
    setup_phases = (
        Phase(Role.CLIENT, "send_key"),
        Phase(Role.AUTHORITY, "distribute_keys"),
        Phase(Role.SERVER, "install_public_context"),
        Phase(Role.CLIENT, "install_secret_context"),
    )
    round_phases = (
        Phase(Role.CLIENT, "encrypt"),
        Phase(Role.SERVER, "add_and_broadcast"),
        Phase(Role.CLIENT, "decrypt"),
    )
    server_class: ClassVar[type[CKKSServer]] = CKKSServer
    client_class: ClassVar[type[CKKSClient]] = CKKSClient

    def __init__(
        self,
        params: CKKSParams | None = None,
        experiment_id: str | None = None,
        authority_id: str = DEFAULT_AUTHORITY_ID,
    ) -> None:
        self.params = params or CKKSParams()
        self.experiment_id = experiment_id or secrets.token_hex(8)
        self.authority_id = authority_id
        self.threat_model = HONEST_BUT_CURIOUS

    def create_parties(
        self, server_id: str, client_ids: Sequence[str], dim: int
    ) -> AggregationParties:
        client_ids = list(client_ids)
        ids = [server_id, self.authority_id, *client_ids]
        if len(set(ids)) != len(ids):
            raise ValueError(f"party ids must be distinct: {ids}")
        if dim < 0:
            raise ValueError("dim must be non-negative")
        p, exp, aid = self.params, self.experiment_id, self.authority_id
        return AggregationParties(
            server=self.server_class(server_id, aid, client_ids, p, dim),
            clients={
                c: self.client_class(c, server_id, aid, p, dim, len(client_ids), exp)
                for c in client_ids
            },
            others={aid: CKKSKeyAuthority(aid, server_id, client_ids, p, exp)},
        )


def ckks_encrypt_throughput(
    dim: int = 10**5, params: CKKSParams | None = None, seed: int = 0
) -> float:
    """Floats per second that one client encrypts and serializes (one thread)."""
    params = params or CKKSParams()
    ctx = params.make_context()
    values = np.random.default_rng(seed).uniform(-1.0, 1.0, dim)
    start = time.perf_counter()
    make_codec(ctx, params).encrypt(values)
    return dim / (time.perf_counter() - start)
