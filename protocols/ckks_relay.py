"""CKKS aggregation with one decryption per round: a client relays the mean to the others.

:mod:`protocols.ckks` has every client download the summed ciphertext (an expanded
ciphertext, about 4x the float32 bytes of the update) and decrypt the same sum. Here the
server forwards the sum to one participant, the round's *relay* (the participants in sorted
order, rotating with the round), which decrypts it, divides by the total weight and seals
the mean (float32, the models' precision, as :mod:`protocols.plain` sends it) and the total
weight (float64) with ChaCha20-Poly1305. The server forwards that sealed blob to the other
participants, who open it. Round phases: client ``encrypt`` -> server ``add_and_forward``
-> relay ``relay_mean`` -> server ``forward_mean`` -> client ``open_mean``.

The AEAD key is shared by the clients and unknown to the server: each derives it with HKDF
(SHA-256) from the secret context the key authority sealed to it (the same bytes for every
client) and the experiment id. The associated data bind the experiment, the round, the
participant list and the relay, so the server cannot replay a mean into another round or
cohort unnoticed.

Cost: n - 1 fewer decryptions a round, and each client other than the relay downloads
about 1x float32 instead of 4x. Precision: the mean is rounded to float32 (relative error
2^-24), which is the precision plain aggregation sends.

Threat model: the same as :mod:`protocols.ckks` against an honest-but-curious server (it
sees ciphertexts and a sealed mean; the clients, who share the key, were already able to
read each other's updates only by colluding with it). Honest-but-curious only: the
malicious-server mode (:mod:`protocols.ckks_signed`) keeps one decryption per client, so
each client checks the tags of the aggregate it decrypts itself.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from protocols.base import (
    AggregateResult,
    Envelope,
    Inbox,
    Phase,
    ProtocolError,
    Role,
)
from protocols.ckks import (
    TAG_AGGREGATE,
    CKKSAggregation,
    CKKSClient,
    CKKSServer,
    positive_weight,
)
from protocols.crypto.aead import open_sealed, seal
from protocols.wire import Payload

__all__ = ["RelayCKKSAggregation", "RelayCKKSClient", "RelayCKKSServer", "relay_of"]

TAG_RELAYED = "ckks/relayed-mean"
MEAN_DTYPE = np.dtype("<f4")
_WEIGHT = struct.Struct("<d")


def relay_of(participants: Sequence[str], round_idx: int) -> str:
    """The round's relay: the participants in sorted order, rotating with the round."""
    ordered = sorted(participants)
    return ordered[round_idx % len(ordered)]


def _associated_data(
    experiment_id: str, round_idx: int, participants: list[str], relay: str
) -> bytes:
    return (
        b"securefgl/ckks/v1/relayed-mean|"
        + json.dumps([experiment_id, round_idx, participants, relay]).encode()
    )


class RelayCKKSServer(CKKSServer):
    """Adds the ciphertexts, hands the sum to the round's relay and forwards its sealed mean."""

    def begin_round(self, round_idx: int, participants: Sequence[str]) -> None:
        super().begin_round(round_idx, participants)
        self._relay: str | None = None
        self._participants: list[str] = []

    def add_and_forward(self, inbox: Inbox) -> list[Envelope]:
        fields, meta, senders = self._sum_updates(inbox)
        assert self._round is not None
        self._relay, self._participants = relay_of(senders, self._round), senders
        meta = {**meta, "relay": self._relay}
        return [Envelope(self.party_id, self._relay, TAG_AGGREGATE, Payload(fields, meta))]

    def forward_mean(self, inbox: Inbox) -> list[Envelope]:
        envs = [e for e in inbox if e.tag == TAG_RELAYED]
        if len(envs) != 1 or envs[0].sender != self._relay:
            raise ProtocolError(f"server: expected one sealed mean from the relay {self._relay!r}")
        payload = envs[0].payload
        return [
            Envelope(
                self.party_id, cid, TAG_RELAYED, Payload(dict(payload.fields), dict(payload.meta))
            )
            for cid in self._participants
            if cid != self._relay
        ]


class RelayCKKSClient(CKKSClient):
    """Decrypts the sum when it is the round's relay; otherwise opens the relayed mean."""

    _group_key: bytes | None = None

    def open_secret_context(self, payload: Payload) -> bytes:
        raw = super().open_secret_context(payload)
        self._group_key = HKDF(
            algorithm=SHA256(),
            length=32,
            salt=self.experiment_id.encode(),
            info=b"securefgl/ckks/v1/relay-key",
        ).derive(raw)
        return raw

    def relay_mean(self, inbox: Inbox) -> list[Envelope]:
        if not any(e.tag == TAG_AGGREGATE for e in inbox):
            return []  # not this round's relay
        assert self._round is not None
        sums, participants = self._open_aggregate(inbox)
        relay = next(e for e in inbox if e.tag == TAG_AGGREGATE).payload.meta.get("relay")
        if relay != self.party_id or relay_of(participants, self._round) != relay:
            raise ProtocolError(f"{self.party_id}: the server named the wrong relay ({relay!r})")
        total_weight = positive_weight(sums[self.dim])
        mean = (sums[: self.dim] / total_weight).astype(MEAN_DTYPE)
        self._result = AggregateResult(mean.astype(np.float64), total_weight, tuple(participants))
        sealed = seal(
            self._key(),
            mean.tobytes() + _WEIGHT.pack(total_weight),
            _associated_data(self.experiment_id, self._round, participants, self.party_id),
        )
        meta = {"round": self._round, "participants": participants, "relay": self.party_id}
        return [
            Envelope(self.party_id, self.server_id, TAG_RELAYED, Payload({"sealed": sealed}, meta))
        ]

    def open_mean(self, inbox: Inbox) -> list[Envelope]:
        if self._result is not None:
            return []  # the relay holds the mean already
        envs = [e for e in inbox if e.tag == TAG_RELAYED and e.sender == self.server_id]
        if len(envs) != 1:
            raise ProtocolError(f"{self.party_id}: expected one relayed mean, got {len(envs)}")
        meta = envs[0].payload.meta
        participants = self._check_round_meta(meta)
        relay = meta.get("relay")
        assert self._round is not None
        if relay != relay_of(participants, self._round):
            raise ProtocolError(f"{self.party_id}: the mean comes from the wrong relay")
        if set(envs[0].payload.fields) != {"sealed"}:
            raise ProtocolError(f"{self.party_id}: malformed relayed mean")
        plain = open_sealed(
            self._key(),
            envs[0].payload.blob("sealed"),
            _associated_data(self.experiment_id, self._round, participants, relay),
        )
        if len(plain) != self.dim * MEAN_DTYPE.itemsize + _WEIGHT.size:
            raise ProtocolError(f"{self.party_id}: relayed mean has the wrong length")
        mean = np.frombuffer(plain, MEAN_DTYPE, count=self.dim).astype(np.float64)
        (total_weight,) = _WEIGHT.unpack_from(plain, self.dim * MEAN_DTYPE.itemsize)
        self._result = AggregateResult(mean, positive_weight(total_weight), tuple(participants))
        return []

    def _key(self) -> bytes:
        if self._group_key is None:
            raise ProtocolError(f"{self.party_id}: no relay key (run setup first)")
        return self._group_key


class RelayCKKSAggregation(CKKSAggregation):
    """Weighted mean under CKKS with one decryption a round (module docstring)."""

    round_phases = (
        Phase(Role.CLIENT, "encrypt"),
        Phase(Role.SERVER, "add_and_forward"),
        Phase(Role.CLIENT, "relay_mean"),
        Phase(Role.SERVER, "forward_mean"),
        Phase(Role.CLIENT, "open_mean"),
    )

    server_class = RelayCKKSServer
    client_class = RelayCKKSClient
