"""``ckks``: senders encrypt under the RECEIVER's CKKS public key; the server adds.

FedStruct (Aliakbari et al. 2025) App. D suggests the sum "could be performed on a secure
server using homomorphic encryption"; this is that, with one key pair per receiver (Cheon et
al. 2017, via TenSEAL). Setup: every client publishes, through the server, a public-key
context without secret, relinearisation or Galois keys. Round: each sender encrypts its
block at the job's positions under r's context; the server adds the ciphertexts (depth 0)
and sends r ONE aggregate; r decrypts and rounds to ``2^-round_bits``. Parameters
(:data:`DEFAULT_PARAMS`): N = 4096, moduli (60, 40) bits, scale 2^40, rounding to 2^-24,
two reals per complex slot (:mod:`protocols.ckks_codec`; a public-key ciphertext cannot be
seeded, so both halves travel: 16 bytes per value).

Threat model (honest-but-curious; IND-CPA of CKKS): the server learns nothing about values,
not even the sum; the receiver learns only the sum. Not protected: a server colluding with
the receiver (weaker than ``masked`` there), an active server (``threat_model="malicious"``
signs contexts and requests; the sum itself stays unverified), IND-CPA^D if exact
decryptions reach a party holding ciphertexts. Dropouts abort the batch. In full:
``docs/protocols.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import tenseal as ts

from protocols.base import Envelope, Inbox, ProtocolError
from protocols.ckks import CiphertextError, CKKSParams
from protocols.ckks_codec import CKKSCodec, chunk_sizes, make_codec
from protocols.ckks_workers import EncryptionPool, PendingBlobs
from protocols.identity import digest
from protocols.secure_sum.blocks import Block, Total
from protocols.secure_sum.jobs import SumRangeError, SumRequest, gather, scatter
from protocols.secure_sum.parties import (
    SETUP_PHASES,
    SecureSum,
    SecureSumClient,
    SecureSumParties,
    SecureSumServer,
)
from protocols.wire import Payload, WireFormatError

TAG_CONTEXT = "secure-sum/ckks/public-context"
TAG_CONTEXTS = "secure-sum/ckks/public-contexts"

DEFAULT_PARAMS = CKKSParams(
    poly_modulus_degree=4096, coeff_mod_bit_sizes=(60, 40), scale_bits=40, round_bits=24,
    packing="complex", seeded=False,  # public-key ciphertexts cannot be seeded
)  # fmt: skip


def make_keypair_context(params: CKKSParams) -> ts.Context:
    """A fresh private context with a public key (asymmetric encryption), one thread."""
    return params.make_context(asymmetric=True)


def serialize_public_key_context(ctx: ts.Context) -> bytes:
    """Parameters and the public key only: no secret, relinearisation or Galois keys."""
    return ctx.serialize(
        save_public_key=True, save_secret_key=False, save_galois_keys=False, save_relin_keys=False
    )


def load_public_context(blob: bytes, params: CKKSParams, what: str) -> ts.Context:
    """Parse a published context; refuses one holding a secret key or not matching ``params``."""
    try:
        ctx = ts.context_from(blob, n_threads=1)
    except (ValueError, RuntimeError, TypeError) as err:
        raise ProtocolError(f"{what}: public context does not parse ({err})") from err
    if ctx.is_private():
        raise ProtocolError(f"{what}: refusing a context that holds a secret key")
    if not ctx.has_public_key() or ctx.has_galois_keys():
        raise ProtocolError(f"{what}: a public context needs a public key and no Galois keys")
    data = ctx.seal_context().data
    if (
        ctx.global_scale != params.scale
        or data.key_context_data().parms().poly_modulus_degree() != params.poly_modulus_degree
        or data.key_context_data().total_coeff_modulus_bit_count()
        != sum(params.coeff_mod_bit_sizes)
        or data.first_context_data().total_coeff_modulus_bit_count() != params.data_bits
    ):
        raise ProtocolError(f"{what}: public context does not match the CKKS parameters")
    return ctx


def _pack(blobs: Sequence[bytes]) -> dict[str, np.ndarray | bytes]:
    lengths = np.array([len(b) for b in blobs], dtype=np.uint64)
    return {"ct": b"".join(blobs), "ct_len": lengths}


def _unpack(payload: Payload, n_chunks: int, what: str) -> list[bytes]:
    try:
        blob, lengths = payload.blob("ct"), payload.array("ct_len")
    except (KeyError, WireFormatError) as err:
        raise CiphertextError(f"{what}: missing or mistyped ciphertext fields ({err})") from err
    if (
        set(payload.fields) != {"ct", "ct_len"}
        or lengths.dtype != np.uint64
        or lengths.shape != (n_chunks,)
        or any(int(n) > len(blob) for n in lengths)
        or sum(int(n) for n in lengths) != len(blob)
    ):
        raise CiphertextError(
            f"{what}: expected {n_chunks} ciphertexts whose lengths add up to the blob"
        )
    bounds = [0, *np.cumsum(lengths).tolist()]
    return [blob[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


class CKKSSumClient(SecureSumClient):
    def __init__(
        self,
        party_id: str,
        server_id: str,
        client_ids: Sequence[str],
        min_senders: int,
        params: CKKSParams,
    ) -> None:
        super().__init__(party_id, server_id, client_ids, min_senders)
        self.params = params
        self._bound = params.value_bound(len(self.federation))
        self._secret: ts.Context | None = None  # own key pair: only this client decrypts
        self.peer_contexts: dict[str, ts.Context] = {}  # public only
        self._peer_blobs: dict[str, bytes] = {}  # the same, as forwarded (for the workers)
        self._codecs: dict[str, CKKSCodec] = {}  # per context: receiver, or own (decrypt)
        self._pool = EncryptionPool(params)
        self._pending: dict[str, PendingBlobs] = {}

    # -- setup
    def setup_publish(self, inbox: Inbox) -> list[Envelope]:
        self._expect_empty(inbox)
        self._secret, self.peer_contexts = make_keypair_context(self.params), {}
        fields = {"context": serialize_public_key_context(self._secret)}
        if self.registry is not None:
            fields["sig"] = self._sign("setup-context", None, digest(fields["context"]))
        return [Envelope(self.party_id, self.server_id, TAG_CONTEXT, Payload(fields, {}))]

    def setup_install(self, inbox: Inbox) -> list[Envelope]:
        who = self.party_id
        if len(inbox) != 1 or inbox[0].sender != self.server_id or inbox[0].tag != TAG_CONTEXTS:
            raise ProtocolError(f"{who}: expected one bundle of public contexts from the server")
        payload = inbox[0].payload
        peers = sorted(self.federation - {who})
        sigs = [f"sig:{v}" for v in peers] if self.registry is not None else []
        if sorted(payload.fields) != sorted([f"ctx:{v}" for v in peers] + sigs):
            raise ProtocolError(f"{who}: the bundle must hold every other client's context")
        for v in peers:
            blob = payload.fields[f"ctx:{v}"]
            if not isinstance(blob, bytes):
                raise ProtocolError(f"{who}: context of {v!r} is not a byte blob")
            if self.registry is not None:
                sig = payload.fields[f"sig:{v}"]
                self._verify(v, "setup-context", None, sig, digest(blob))
            self.peer_contexts[v] = load_public_context(blob, self.params, f"{who} <- {v}")
            self._peer_blobs[v] = blob
        return []

    @property
    def own_context(self) -> ts.Context | None:
        """This client's private context (the only secret key it ever holds)."""
        return self._secret

    def _require_ready(self) -> None:
        if self._secret is None or len(self.peer_contexts) != len(self.federation) - 1:
            raise ProtocolError(f"{self.party_id}: no CKKS contexts: run setup_secure_sums first")

    # -- round
    def _check_peak(self, peak: float, receiver: str) -> None:
        if not peak <= self._bound:
            raise SumRangeError(
                f"{self.party_id}: block max |x| = {peak:g} exceeds the CKKS bound "
                f"{self._bound:g} (2^{self.params.data_bits - 2 - self.params.scale_bits} / "
                f"{len(self.federation)} clients): the encrypted sum could wrap around"
            )

    def _codec(self, owner: str, ctx: ts.Context) -> CKKSCodec:
        codec = self._codecs.get(owner)
        if codec is None or codec.ctx is not ctx:
            codec = self._codecs[owner] = make_codec(ctx, self.params)
        return codec

    def _start_encoding(self, requests: dict[str, SumRequest]) -> None:
        """Encrypt every block of the round at once, on worker processes when the batch is
        large (:mod:`protocols.ckks_workers`); :meth:`_encode` collects the blobs."""
        jobs, receivers = [], sorted(requests)
        for receiver in receivers:
            ctx = self.peer_contexts[receiver]
            assert not ctx.is_private(), "a sender must never hold the receiver's secret key"
            values = gather(self._outgoing[receiver], requests[receiver], self.party_id)
            jobs.append((self._peer_blobs[receiver], self._codec(receiver, ctx), values))
        self._pending = dict(zip(receivers, self._pool.encrypt_all(jobs), strict=True))

    def _encode(self, receiver: str, request: SumRequest, block: Block) -> Payload:
        return Payload(_pack(self._pending.pop(receiver).result()), {})

    def _combine(self, request: SumRequest, deliveries: Inbox) -> Total:
        who = self.party_id
        assert self._secret is not None and self._secret.is_private()
        if len(deliveries) != 1:
            raise ProtocolError(f"{who}: expected one encrypted sum, got {len(deliveries)}")
        payload = deliveries[0].payload
        if payload.meta.get("senders") != list(request.senders):
            raise ProtocolError(f"{who}: the encrypted sum is not over the requested senders")
        sizes = chunk_sizes(request.length, self.params.values_per_ciphertext)
        codec = self._codec(who, self._secret)
        try:
            blobs = _unpack(payload, len(sizes), f"{who}: encrypted sum")
            parts = [
                codec.decrypt(codec.load(b, n, f"{who}: sum[{j}]"), n)
                for j, (b, n) in enumerate(zip(blobs, sizes, strict=True))
            ]
        except CiphertextError as err:
            raise ProtocolError(f"garbled ciphertext: {err}") from err
        values = np.concatenate(parts) if parts else np.zeros(0)
        if self.params.round_bits is not None:  # heuristic IND-CPA^D mitigation
            rb = self.params.round_bits
            values = np.round(np.ldexp(values, rb)) / 2.0**rb
        return scatter(values, request)


class CKKSSumServer(SecureSumServer):
    """Adds ciphertexts under each receiver's public context; holds no secret key."""

    def __init__(
        self, party_id: str, client_ids: Sequence[str], min_senders: int, params: CKKSParams
    ) -> None:
        super().__init__(party_id, client_ids, min_senders)
        self.params = params
        self.contexts: dict[str, ts.Context] = {}  # receiver -> public context
        self.codecs: dict[str, CKKSCodec] = {}  # receiver -> codec of its public context
        self._context_blobs: dict[str, bytes] = {}  # the same, serialized (for the workers)
        self._pool = EncryptionPool(params)

    def setup_forward(self, inbox: Inbox) -> list[Envelope]:
        blobs = self.collect_setup_blobs(inbox, TAG_CONTEXT, "context", "public context")
        for sender, blob in blobs.items():
            self.contexts[sender] = load_public_context(blob, self.params, f"server <- {sender}")
            self.codecs[sender] = make_codec(self.contexts[sender], self.params)
            self._context_blobs[sender] = blob
        sigs = self.setup_signatures(inbox) if self.registry is not None else {}
        if self.registry is not None and set(sigs) != set(blobs):
            raise ProtocolError("server: a public context arrived without its signature")
        out = []
        for u in sorted(self.federation):
            peers = sorted(self.federation - {u})
            fields = {f"ctx:{v}": blobs[v] for v in peers}
            fields.update({f"sig:{v}": sigs[v] for v in peers if v in sigs})
            out.append(Envelope(self.party_id, u, TAG_CONTEXTS, Payload(fields, {})))
        return out

    def _aggregate(
        self, receiver: str, request: SumRequest, contributions: dict[str, Payload]
    ) -> list[Payload]:
        ctx, codec = self.contexts.get(receiver), self.codecs.get(receiver)
        if ctx is None or codec is None:
            raise ProtocolError("server: no CKKS contexts: run setup_secure_sums first")
        assert not ctx.is_private(), "the server must never hold a secret key"
        sizes = chunk_sizes(request.length, self.params.values_per_ciphertext)
        try:
            parts = []
            for k in request.senders:
                what = f"server: ciphertext from {k!r} for {receiver!r}"
                parts.append((what, _unpack(contributions[k], len(sizes), what)))
            sums = self._pool.add_all(self._context_blobs[receiver], codec, parts, sizes)
        except CiphertextError as err:
            raise ProtocolError(f"garbled ciphertext: {err}") from err
        return [Payload(_pack(sums), {"senders": list(request.senders)})]


class CKKSSum(SecureSum):
    """Sums encrypted under each receiver's CKKS public key and added by the server."""

    name: ClassVar[str] = "ckks"
    setup_phases = SETUP_PHASES
    default_params: ClassVar[CKKSParams] = DEFAULT_PARAMS
    #: senders encrypt under the receiver's public key, which cannot give seeded ciphertexts
    public_key_encryption: ClassVar[bool] = True

    def __init__(
        self,
        params: CKKSParams | None = None,
        *,
        min_senders: int = 2,
        max_round_bytes: float | None = None,
        threat_model: str = "honest-but-curious",
        registry: Any = None,
        experiment_id: str = "",
    ) -> None:
        super().__init__(
            min_senders=min_senders,
            max_round_bytes=max_round_bytes,
            threat_model=threat_model,
            registry=registry,
            signing_id=experiment_id,
        )
        self.params = params or self.default_params
        if self.public_key_encryption and self.params.seeded:
            raise ValueError(
                "ckks secure sums encrypt under the receiver's public key, which cannot be "
                "seeded: seeded must be False"
            )

    def bytes_per_value(self, n_clients: int) -> float:
        """A ciphertext: two polynomials of N 8-byte words per data prime (one if seeded),
        for N values (complex packing) or N/2 (real)."""
        per_prime = 16.0 if self.params.packing == "complex" else 32.0
        per_prime /= 2 if self.params.seeded else 1
        return per_prime * (len(self.params.coeff_mod_bit_sizes) - 1)

    def create_parties(self, server_id: str, client_ids: Sequence[str]) -> SecureSumParties:
        ids = self._check_ids(server_id, client_ids)
        p, m = self.params, self.min_senders
        return self._authenticated(
            SecureSumParties(
                server=self._limited(CKKSSumServer(server_id, ids, m, p), len(ids)),
                clients={c: CKKSSumClient(c, server_id, ids, m, p) for c in ids},
            )
        )
