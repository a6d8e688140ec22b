"""``ckks`` with ``keys="shared"``: every client encrypts under ONE secret key the clients
share; the server, which holds no key, adds.

FedGCN (Yao et al. 2023, Sec. 4.3) encrypts its neighbour sums under one key of the
clients; this is that trust, without the server holding the key. Set-up (two round trips
through the server): every client publishes an X25519 public key; the dealer (the first
client id in sorted order, a client like the others) makes a symmetric CKKS context and
seals it to each other client with ChaCha20-Poly1305 under an X25519 key agreed with it,
and gives the server the parameters only (no key). Round: each sender encrypts its block
symmetrically (seeded ciphertexts: about 8 bytes per value, half the 16 of a public-key
ciphertext, at about a third of its CPU); the server adds; the receiver decrypts the sum
and rounds it as in :mod:`protocols.secure_sum.ckks`.

Threat model (honest-but-curious server; IND-CPA of CKKS): the server learns nothing about
values, not even the sum; the receiver learns only the sum. Not protected: a server
colluding with ANY client (every client holds the key; with per-receiver keys only the
receiver's collusion breaks a job), which is the trust CKKS aggregation
(:mod:`protocols.ckks`) already asks of the same run; a malicious server (refused: use the
per-receiver keys with ``threat_model="malicious"``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, ClassVar

import tenseal as ts

from protocols.base import Envelope, Inbox, Phase, ProtocolError, Role
from protocols.ckks import load_context, serialize_public, serialize_secret
from protocols.ckks_codec import CKKSParams, make_codec
from protocols.crypto.aead import open_sealed, seal
from protocols.crypto.keyagreement import KeyAgreementError, KeyPair, agree, check_public_key
from protocols.identity import HONEST_BUT_CURIOUS
from protocols.secure_sum.ckks import DEFAULT_PARAMS, CKKSSum, CKKSSumClient, CKKSSumServer
from protocols.secure_sum.jobs import SumRequest, gather
from protocols.secure_sum.parties import SecureSumParties
from protocols.wire import Payload, WireFormatError

TAG_KEY = "secure-sum/ckks-shared/x25519"
TAG_KEYS = "secure-sum/ckks-shared/x25519-keys"
TAG_SEALED = "secure-sum/ckks-shared/sealed-context"
TAG_FORWARDED = "secure-sum/ckks-shared/forwarded-context"

#: the per-receiver parameters, with seeded (symmetric) ciphertexts
SHARED_PARAMS = dataclasses.replace(DEFAULT_PARAMS, seeded=True)

SHARED_SETUP_PHASES = (
    Phase(Role.CLIENT, "setup_publish"),
    Phase(Role.SERVER, "setup_forward"),
    Phase(Role.CLIENT, "setup_install"),
    Phase(Role.SERVER, "setup_forward_sealed"),
    Phase(Role.CLIENT, "setup_open"),
)


def dealer_of(client_ids: Sequence[str]) -> str:
    """The client that makes the shared context: the first id in sorted order."""
    return min(client_ids)


def _binding(experiment_id: str, dealer: str, client: str) -> bytes:
    """HKDF info and AEAD associated data of one client's sealed context."""
    return (
        b"securefgl/secure-sum/ckks-shared/v1|"
        + json.dumps([experiment_id, dealer, client]).encode()
    )


class SharedKeyCKKSSumClient(CKKSSumClient):
    """A client holding the federation's shared CKKS secret (the dealer makes it)."""

    def __init__(
        self,
        party_id: str,
        server_id: str,
        client_ids: Sequence[str],
        min_senders: int,
        params: CKKSParams,
        experiment_id: str,
    ) -> None:
        super().__init__(party_id, server_id, client_ids, min_senders, params)
        self.experiment_id = experiment_id
        self.dealer = dealer_of(client_ids)
        self._keypair: KeyPair | None = None
        self._dealer_public = b""
        self._secret_bytes = b""  # the shared context, serialized (for the worker processes)

    def setup_publish(self, inbox: Inbox) -> list[Envelope]:
        self._expect_empty(inbox)
        self._keypair, self._secret, self._secret_bytes = KeyPair.generate(), None, b""
        payload = Payload({"x25519_public": self._keypair.public}, {})
        return [Envelope(self.party_id, self.server_id, TAG_KEY, payload)]

    def setup_install(self, inbox: Inbox) -> list[Envelope]:
        """The dealer seals a fresh context to every other client (and sends the server the
        parameters); the others keep the dealer's public key for :meth:`setup_open`."""
        who = self.party_id
        if len(inbox) != 1 or inbox[0].sender != self.server_id or inbox[0].tag != TAG_KEYS:
            raise ProtocolError(f"{who}: expected one bundle of X25519 keys from the server")
        fields = inbox[0].payload.fields
        expected = sorted(self.federation - {who}) if who == self.dealer else [self.dealer]
        if sorted(fields) != expected:
            raise ProtocolError(f"{who}: the key bundle must hold exactly {expected}")
        try:
            publics = {c: check_public_key(fields[c]) for c in expected}
        except KeyAgreementError as err:
            raise ProtocolError(f"{who}: unusable X25519 key in the bundle ({err})") from err
        if who != self.dealer:
            self._dealer_public = publics[self.dealer]
            return []
        assert self._keypair is not None
        ctx = self.params.make_context()
        self._install(ctx, serialize_secret(ctx))
        out = {"params": serialize_public(ctx)}
        for client, public in publics.items():
            binding = _binding(self.experiment_id, who, client)
            out[f"to:{client}"] = seal(agree(self._keypair, public, binding),
                                       self._secret_bytes, binding)  # fmt: skip
        self._keypair = None
        return [Envelope(who, self.server_id, TAG_SEALED, Payload(out, {}))]

    def setup_open(self, inbox: Inbox) -> list[Envelope]:
        who = self.party_id
        if who == self.dealer:
            self._expect_empty(inbox)
            return []
        if (len(inbox) != 1 or inbox[0].sender != self.server_id
                or inbox[0].tag != TAG_FORWARDED or self._keypair is None):  # fmt: skip
            raise ProtocolError(f"{who}: expected one sealed context from the server")
        binding = _binding(self.experiment_id, self.dealer, who)
        try:
            sealed = inbox[0].payload.blob("sealed_context")
        except (KeyError, WireFormatError) as err:
            raise ProtocolError(f"{who}: malformed sealed-context message") from err
        raw = open_sealed(agree(self._keypair, self._dealer_public, binding), sealed, binding)
        self._install(load_context(raw, self.params, True, f"{who} <- {self.dealer}"), raw)
        self._keypair = None
        return []

    def _install(self, ctx: ts.Context, raw: bytes) -> None:
        self._secret, self._secret_bytes = ctx, raw

    def _require_ready(self) -> None:
        if self._secret is None:
            raise ProtocolError(f"{self.party_id}: no shared CKKS context: run the set-up first")

    def _start_encoding(self, requests: dict[str, SumRequest]) -> None:
        """Every block of the round under the shared key, on worker processes when large."""
        assert self._secret is not None
        codec = self._codec(self.party_id, self._secret)
        receivers = sorted(requests)
        jobs = [(self._secret_bytes, codec, gather(self._outgoing[r], requests[r], self.party_id))
                for r in receivers]  # fmt: skip
        self._pending = dict(zip(receivers, self._pool.encrypt_all(jobs, secret=True),
                                 strict=True))  # fmt: skip


class SharedKeyCKKSSumServer(CKKSSumServer):
    """Relays the dealer's sealed contexts and adds ciphertexts; holds the parameters only."""

    def __init__(
        self, party_id: str, client_ids: Sequence[str], min_senders: int, params: CKKSParams
    ) -> None:
        super().__init__(party_id, client_ids, min_senders, params)
        self.dealer = dealer_of(client_ids)

    def setup_forward(self, inbox: Inbox) -> list[Envelope]:
        keys = self.collect_setup_blobs(inbox, TAG_KEY, "x25519_public", "X25519 key")
        out = []
        for client in sorted(self.federation):
            wanted = sorted(self.federation - {client}) if client == self.dealer else [self.dealer]
            payload = Payload({c: keys[c] for c in wanted}, {})
            out.append(Envelope(self.party_id, client, TAG_KEYS, payload))
        return out

    def setup_forward_sealed(self, inbox: Inbox) -> list[Envelope]:
        if len(inbox) != 1 or inbox[0].sender != self.dealer or inbox[0].tag != TAG_SEALED:
            raise ProtocolError("server: expected one bundle of sealed contexts from the dealer")
        fields = inbox[0].payload.fields
        others = sorted(self.federation - {self.dealer})
        if sorted(fields) != sorted(["params", *(f"to:{c}" for c in others)]):
            raise ProtocolError("server: the dealer's bundle must seal a context to every client")
        ctx = load_context(fields["params"], self.params, False, "server <- dealer")
        codec = make_codec(ctx, self.params)
        for client in self.federation:  # one context serves every receiver
            self.contexts[client], self.codecs[client] = ctx, codec
            self._context_blobs[client] = fields["params"]
        return [Envelope(self.party_id, c, TAG_FORWARDED,
                         Payload({"sealed_context": fields[f"to:{c}"]}, {}))
                for c in others]  # fmt: skip


class SharedKeyCKKSSum(CKKSSum):
    """``ckks`` secure sums under one key the clients share (``keys="shared"`` in
    :func:`protocols.registry.make_secure_sum`); honest-but-curious server only."""

    setup_phases: ClassVar[tuple[Phase, ...]] = SHARED_SETUP_PHASES
    default_params: ClassVar[CKKSParams] = SHARED_PARAMS
    public_key_encryption: ClassVar[bool] = False

    def __init__(self, params: CKKSParams | None = None, **options: Any) -> None:
        if options.get("threat_model", HONEST_BUT_CURIOUS) != HONEST_BUT_CURIOUS:
            raise ValueError(
                "ckks sums under a shared key trust the server to follow the protocol: "
                "against a malicious server use the per-receiver keys (keys='receiver')"
            )
        super().__init__(params, **options)

    def create_parties(self, server_id: str, client_ids: Sequence[str]) -> SecureSumParties:
        ids = self._check_ids(server_id, client_ids)
        p, m, exp = self.params, self.min_senders, self.signing_id
        server = SharedKeyCKKSSumServer(server_id, ids, m, p)
        return SecureSumParties(
            server=self._limited(server, len(ids)),
            clients={c: SharedKeyCKKSSumClient(c, server_id, ids, m, p, exp) for c in ids},
        )
