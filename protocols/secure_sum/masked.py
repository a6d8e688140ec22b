"""``masked``: pairwise additive masks (Bonawitz et al., CCS 2017) addressed to one receiver.

Setup: every client publishes one X25519 public key; the server forwards them to every
client. Round: sender k of receiver r's job (sender set S) encodes its block in fixed point
in Z_2^w (w = 64 by default, or 32; overflow-checked) and sends::

    y_k = enc(B_k) + sum_{v in S, v != k} (+/-) PRG(s_kv) + PRG(s_kr)    (mod 2^w)

(+ for the smaller id; one ChaCha20 stream per pair and round, seeded by HKDF bound to the
experiment, round and pair and cut into the jobs both senders share; ``s_kr`` bound to the
receiver). The server adds a job's ``y_k`` and forwards ONE vector; the pairwise masks
cancel and r removes its receiver masks, which are what hide the sum from the server.

Threat model (honest-but-curious; ``round_idx`` may not repeat): the server learns nothing
about any value, the sum included; the receiver learns only the sum on the encoded
positions; any coalition learns at most the honest senders' sum. ``collusion_threshold=t``
masks each sender with ``2*ceil((t+1)/2)`` others on a circulant graph (secure against at
most t colluding senders); ``pair_masks=False`` keeps receiver masks only (broken by a
server colluding with the receiver: the trust of ``ckks``). Not protected: an active server
(unauthenticated keys: use ``threat_model="malicious"``, which signs keys and requests),
senders lying about their blocks, what the sum reveals. Dropouts abort the batch. In
full: ``docs/protocols.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from protocols.base import Envelope, Inbox, ProtocolError
from protocols.crypto.keyagreement import (
    PUBLIC_KEY_BYTES,
    KeyAgreementError,
    KeyPair,
    check_public_key,
    derive_key,
    shared_secret,
)
from protocols.crypto.prg import MaskStream, add_mask
from protocols.fixedpoint import WORD_BITS, FixedPointCodec
from protocols.secure_sum.blocks import Block, Total
from protocols.secure_sum.jobs import SumRequest, gather, scatter
from protocols.secure_sum.parties import (
    SETUP_PHASES,
    SecureSum,
    SecureSumClient,
    SecureSumParties,
    SecureSumServer,
)
from protocols.wire import Payload

TAG_KEY = "secure-sum/masked/key"
TAG_KEYLIST = "secure-sum/masked/keylist"


def _context(experiment_id: str, round_idx: int, purpose: str, *parts: str) -> bytes:
    return json.dumps(
        ["securefgl/secure-sum/masked/v1", experiment_id, round_idx, purpose, *parts],
        separators=(",", ":"),
    ).encode()


def mask_peers(
    who: str, senders: Sequence[str], collusion_threshold: int | None, pair_masks: bool = True
) -> list[str]:
    """The co-senders ``who`` shares a pairwise mask with in a job of ``senders`` (public
    order): all of them, its ``h = ceil((t + 1) / 2)`` neighbours on each side of the
    circle (symmetric: ``v`` in ``mask_peers(u)`` iff ``u`` in ``mask_peers(v)``), or none
    (``pair_masks=False``)."""
    if not pair_masks:
        return []
    others = [v for v in senders if v != who]
    if collusion_threshold is None:
        return others
    m, h = len(senders), (collusion_threshold + 2) // 2
    if 2 * h >= m - 1:  # the circulant is the complete graph
        return others
    i = list(senders).index(who)
    return [senders[(i + d) % m] for d in (*range(-h, 0), *range(1, h + 1))]


class PairSegment(NamedTuple):
    """Where job ``r``'s pairwise mask lies in a pair's stream, and its sign."""

    stream: MaskStream  # the pair's stream (shared by its segments: read on in job order)
    offset: int  # first keystream word of the segment
    add: bool  # + for the smaller id of the pair, - for the larger


class MaskedSumClient(SecureSumClient):
    def __init__(
        self,
        party_id: str,
        server_id: str,
        client_ids: Sequence[str],
        min_senders: int,
        experiment_id: str,
        codec: FixedPointCodec,
        collusion_threshold: int | None = None,
        pair_masks: bool = True,
    ) -> None:
        super().__init__(party_id, server_id, client_ids, min_senders)
        self.experiment_id = experiment_id
        self.codec = codec
        self.collusion_threshold = collusion_threshold
        self.pair_masks = pair_masks
        self._keys: KeyPair | None = None
        self._peer_keys: dict[str, bytes] = {}
        self._shared: dict[str, bytes] = {}  # peer -> raw X25519 secret (derived per seed)
        self._pair_masks: dict[tuple[str, str], PairSegment] = {}

    # -- setup
    def setup_publish(self, inbox: Inbox) -> list[Envelope]:
        self._expect_empty(inbox)
        self._keys, self._peer_keys, self._shared = KeyPair.generate(), {}, {}
        fields = {"x25519_public": self._keys.public}
        if self.registry is not None:
            fields["sig"] = self._sign("setup-key", None, self._keys.public)
        payload = Payload(fields, {"experiment": self.experiment_id})
        return [Envelope(self.party_id, self.server_id, TAG_KEY, payload)]

    def setup_install(self, inbox: Inbox) -> list[Envelope]:
        who = self.party_id
        envs = [e for e in inbox if e.sender == self.server_id and e.tag == TAG_KEYLIST]
        if len(envs) != 1 or len(inbox) != 1:
            raise ProtocolError(f"{who}: expected one key list from the server")
        ids, keys = envs[0].payload.meta.get("ids"), envs[0].payload.fields.get("keys")
        peers = sorted(self.federation - {who})
        if (
            ids != peers
            or not isinstance(keys, np.ndarray)
            or keys.dtype != np.uint8
            or keys.shape != (len(peers), PUBLIC_KEY_BYTES)
        ):
            raise ProtocolError(f"{who}: garbled key list (must hold every other client's key)")
        try:
            self._peer_keys = {v: check_public_key(keys[i].tobytes()) for i, v in enumerate(peers)}
        except KeyAgreementError as err:
            raise ProtocolError(f"{who}: bad public key in the key list: {err}") from err
        if self.registry is not None:
            sigs = envs[0].payload.fields.get("sigs")
            if not isinstance(sigs, np.ndarray) or sigs.shape != (len(peers), 64):
                self._peer_keys = {}
                raise ProtocolError(f"{who}: the key list carries no signatures")
            for i, v in enumerate(peers):
                try:
                    self._verify(v, "setup-key", None, sigs[i].tobytes(), self._peer_keys[v])
                except ProtocolError:
                    self._peer_keys = {}
                    raise
        self._shared = {}
        return []

    def _require_ready(self) -> None:
        if self._keys is None or len(self._peer_keys) != len(self.federation) - 1:
            raise ProtocolError(f"{self.party_id}: no keys: run setup_secure_sums first")

    def _seed(self, peer: str, purpose: str, receiver: str, *pair: str) -> bytes:
        assert self._keys is not None
        if peer not in self._shared:  # one X25519 exchange per peer, one HKDF per seed
            self._shared[peer] = shared_secret(self._keys, self._peer_keys[peer])
        ctx = _context(self.experiment_id, self._r, purpose, receiver, *pair)
        return derive_key(self._shared[peer], ctx)

    # -- round
    def _peers(self, request: SumRequest) -> list[str]:
        return mask_peers(self.party_id, request.senders, self.collusion_threshold, self.pair_masks)

    def _check_peak(self, peak: float, receiver: str) -> None:
        self.codec.check_peak(peak)  # FixedPointOverflowError before anything is sent

    def _start_encoding(self, requests: dict[str, SumRequest]) -> None:
        """One pair mask stream per peer and round, cut into the jobs both contribute to.

        The jobs a pair shares (receivers whose public request lists both, in sorted order)
        and their lengths are public, so both ends cut the same stream at the same offsets;
        every segment masks one job, once. One seed per peer and round; each job's segment
        is generated where it is added, in cache-sized chunks (no stream is materialised),
        continuing the pair's cipher when jobs are encoded in receiver order.
        """
        who, lengths = self.party_id, {}
        for receiver in sorted(requests):
            request = requests[receiver]
            for v in self._peers(request):
                lengths.setdefault(v, []).append((receiver, request.length))
        self._pair_masks = {}
        for v, jobs in lengths.items():
            a, b = sorted((who, v))
            stream, start = MaskStream(self._seed(v, "pair-stream", "", a, b)), 0
            for receiver, n in jobs:
                self._pair_masks[v, receiver] = PairSegment(stream, start, who == a)
                start += n

    def _encode(self, receiver: str, request: SumRequest, block: Block) -> Payload:
        who = self.party_id
        y = self.codec.encode(gather(block, request, who))
        for v in self._peers(request):
            seg = self._pair_masks.pop((v, receiver))
            seg.stream.add_to(y, +1 if seg.add else -1, seg.offset)  # mod 2^w
        add_mask(y, self._seed(receiver, "receiver-mask", receiver, who), +1)
        return Payload({"y": y}, {})

    def _combine(self, request: SumRequest, deliveries: Inbox) -> Total:
        who = self.party_id
        if len(deliveries) != 1:
            raise ProtocolError(f"{who}: expected one masked sum, got {len(deliveries)}")
        payload = deliveries[0].payload
        total = payload.fields.get("y_sum")
        if (
            set(payload.fields) != {"y_sum"}
            or not isinstance(total, np.ndarray)
            or total.dtype != self.codec.dtype
            or total.shape != (request.length,)
        ):
            raise ProtocolError(
                f"{who}: garbled masked sum (expected one {self.codec.dtype} vector of "
                f"{request.length})"
            )
        if payload.meta.get("senders") != list(request.senders):
            raise ProtocolError(f"{who}: the masked sum is not over the requested senders")
        total = total.copy()  # unmask a private copy, never the delivered message
        for k in request.senders:
            add_mask(total, self._seed(k, "receiver-mask", who, k), -1)
        return scatter(self.codec.decode(total), request)


class MaskedSumServer(SecureSumServer):
    """Relays keys; adds each job's masked vectors mod 2^w (it cannot unmask the sum)."""

    def __init__(
        self,
        party_id: str,
        client_ids: Sequence[str],
        min_senders: int,
        dtype: type[np.unsignedinteger] | np.dtype = np.uint64,
    ) -> None:
        super().__init__(party_id, client_ids, min_senders)
        self.dtype = np.dtype(dtype)  # the public word type of the masked vectors

    def setup_forward(self, inbox: Inbox) -> list[Envelope]:
        keys = self.collect_setup_blobs(inbox, TAG_KEY, "x25519_public", "public key")
        for sender, key in keys.items():
            try:
                check_public_key(key)
            except KeyAgreementError as err:
                raise ProtocolError(f"server: bad public key from {sender!r}: {err}") from err
        sigs = self.setup_signatures(inbox)
        if self.registry is not None and any(len(sigs.get(v, b"")) != 64 for v in keys):
            raise ProtocolError("server: a public key arrived without its signature")
        out = []
        for u in sorted(self.federation):
            ids = sorted(self.federation - {u})
            arr = np.frombuffer(b"".join(keys[v] for v in ids), np.uint8)
            fields = {"keys": arr.reshape(len(ids), PUBLIC_KEY_BYTES)}
            if self.registry is not None:
                raw = np.frombuffer(b"".join(sigs[v] for v in ids), np.uint8)
                fields["sigs"] = raw.reshape(len(ids), 64)
            out.append(Envelope(self.party_id, u, TAG_KEYLIST, Payload(fields, {"ids": ids})))
        return out

    def _aggregate(
        self, receiver: str, request: SumRequest, contributions: dict[str, Payload]
    ) -> list[Payload]:
        total = np.zeros(request.length, dtype=self.dtype)
        for k in request.senders:
            payload = contributions[k]
            y = payload.fields.get("y")
            if (
                set(payload.fields) != {"y"}
                or not isinstance(y, np.ndarray)
                or y.dtype != self.dtype
                or y.shape != (request.length,)
            ):
                desc = (y.dtype, y.shape) if isinstance(y, np.ndarray) else type(y).__name__
                raise ProtocolError(
                    f"server: garbled masked block from {k!r} for {receiver!r}: expected "
                    f"{self.dtype} of shape ({request.length},), got {desc}"
                )
            np.add(total, y, out=total)
        return [Payload({"y_sum": total}, {"senders": list(request.senders)})]


class MaskedSum(SecureSum):
    """Pairwise-masked sums; the receiver learns only the sum, the server nothing.

    ``experiment_id`` is bound into every derived seed. ``word_bits``: the ring Z_2^w of
    masks and encodings, 64 (default) or 32 (half the keystream, bytes and additions).
    ``frac_bits``: fixed-point resolution 2^-frac_bits (default 32: ~2.3e-10); None = the
    finest that fits the bound below for the federation size. ``value_bound``: declared
    max ``|entry|`` of a block (None: the largest the headroom allows, i.e.
    ``2^(w - 1 - frac_bits) / n_clients``); checked by each sender before masking.
    ``sum_bound`` (instead of ``value_bound``, with ``frac_bits=None``): a bound on
    ``|entry|`` of every SUM that the caller guarantees (the receiver knows it; see
    ``FixedPointCodec.for_sum_bound``): about ``log2(n_clients)`` more fractional bits.
    ``collusion_threshold``: None (default) masks every pair of senders (any coalition);
    an int t >= 1 masks on a circulant graph that tolerates t colluding senders (module
    docstring; ``docs/protocols.md``). ``pair_masks=False``: receiver masks only (module docstring:
    safe unless the server colludes with the receiver, the trust of ``ckks``).
    ``min_senders``, ``max_round_bytes``, ``threat_model``, ``registry``: as in
    :class:`SecureSum`.
    """

    name: ClassVar[str] = "masked"
    setup_phases = SETUP_PHASES

    def __init__(
        self,
        experiment_id: str,
        *,
        word_bits: int = 64,
        frac_bits: int | None = 32,
        value_bound: float | None = None,
        sum_bound: float | None = None,
        min_senders: int = 2,
        collusion_threshold: int | None = None,
        pair_masks: bool = True,
        max_round_bytes: float | None = None,
        threat_model: str = "honest-but-curious",
        registry: Any = None,
    ) -> None:
        super().__init__(
            min_senders=min_senders,
            max_round_bytes=max_round_bytes,
            threat_model=threat_model,
            registry=registry,
            signing_id=experiment_id,
        )
        if word_bits not in WORD_BITS:
            raise ValueError(f"word_bits must be one of {WORD_BITS}, got {word_bits!r}")
        if sum_bound is not None and (value_bound is not None or frac_bits is not None):
            raise ValueError("sum_bound takes neither a value_bound nor frac_bits (it sets both)")
        if frac_bits is None and value_bound is None and sum_bound is None:
            raise ValueError("frac_bits=None (the finest that fits) needs a value_bound")
        if not isinstance(experiment_id, str) or not experiment_id:
            raise ValueError("experiment_id must be a non-empty string (it binds every seed)")
        t = collusion_threshold
        if t is not None and (not isinstance(t, int) or isinstance(t, bool) or t < 1):
            raise ValueError(f"collusion_threshold must be None or an int >= 1, got {t!r}")
        if not isinstance(pair_masks, bool) or (t is not None and not pair_masks):
            raise ValueError("pair_masks must be a bool; a collusion_threshold needs pair masks")
        self.experiment_id = experiment_id
        self.word_bits = word_bits
        self.frac_bits = frac_bits
        self.value_bound = value_bound
        self.sum_bound = sum_bound
        self.collusion_threshold = t
        self.pair_masks = pair_masks

    def codec_for(self, n_clients: int) -> FixedPointCodec:
        n = max(n_clients, 1)
        if self.sum_bound is not None:
            return FixedPointCodec.for_sum_bound(self.sum_bound, n, self.word_bits)
        if self.frac_bits is None:
            assert self.value_bound is not None  # checked in __init__
            return FixedPointCodec.finest(self.value_bound, n, self.word_bits)
        return FixedPointCodec(self.frac_bits, self.value_bound, n, self.word_bits)

    def bytes_per_value(self, n_clients: int) -> float:
        return float(self.codec_for(n_clients).dtype.itemsize)

    def create_parties(self, server_id: str, client_ids: Sequence[str]) -> SecureSumParties:
        ids = self._check_ids(server_id, client_ids)
        codec = self.codec_for(len(ids))
        m, exp = self.min_senders, self.experiment_id
        return self._authenticated(
            SecureSumParties(
                server=self._limited(MaskedSumServer(server_id, ids, m, codec.dtype), len(ids)),
                clients={
                    c: MaskedSumClient(
                        c, server_id, ids, m, exp, codec, self.collusion_threshold, self.pair_masks
                    )
                    for c in ids
                },
            )
        )
