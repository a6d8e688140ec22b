"""Gram matrices of client vectors: the server learns ``⟨u_i, u_j⟩`` for every pair of clients.

GPFL (TMLR 2025, §3.2–3.4) learns its client network from the cosine similarities of the
clients' marginal parameters and functional embeddings; this protocol gives the server those
k×k matrices (for unit vectors, inner products are cosines) without the vectors. Modes
(:data:`GRAMS`):

* ``plain``: each client sends its vectors; the server computes the Gram matrices (it
  learns every vector: the paper's setting).
* ``ckks``: a key authority (never the server) makes a CKKS key pair and publishes the
  public key to the clients and evaluation keys (relinearisation, Galois) to the server.
  Each client encrypts each of its vectors; the server computes every encrypted inner
  product (one ciphertext product and a rotate-and-sum per pair, which leaves the inner
  product in every slot) and sends the products to the authority, which decrypts them,
  rounds them to ``2^-round_bits`` and returns only the k×k matrices to the server.
  Parameters: N = 4096, moduli (38, 33, 38) bits (109: 128-bit security by the HE
  Standard), scale 2^33; inner products of unit vectors are exact to about 1e-4.

Threat model (``ckks``; honest-but-curious, no collusion between the server and the
authority): the server learns the Gram matrices and nothing else of any vector; the
authority learns the Gram matrices (it decrypts them) and sees no vector; a client learns
nothing of the others. Not protected: a server colluding with the authority (it learns
every vector), an active server (it could ask for other functions of the ciphertexts), what
the Gram matrices themselves reveal. Round phases: client ``send_vectors`` -> server
``compute`` -> authority ``decrypt`` -> server ``receive``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import tenseal as ts

from protocols.base import Envelope, Inbox, Phase, ProtocolError, ProtocolParty, Role
from protocols.ckks import CKKSParams, load_chunk
from protocols.wire import Payload

TAG_VECTORS = "gram/vectors"
TAG_PRODUCTS = "gram/encrypted-products"
TAG_MATRICES = "gram/matrices"
TAG_PUBLIC = "gram/public-key"
TAG_EVAL = "gram/evaluation-keys"
DEFAULT_AUTHORITY = "gram-authority"

GRAM_PARAMS = CKKSParams(
    poly_modulus_degree=4096, coeff_mod_bit_sizes=(38, 33, 38), scale_bits=33, round_bits=12,
    packing="real", seeded=False,  # products: one real per slot (TenSEAL's CKKSVector)
)  # fmt: skip


def pairs(k: int) -> list[tuple[int, int]]:
    """Every unordered pair ``i < j`` of ``k`` clients, in a public order."""
    return [(i, j) for i in range(k) for j in range(i + 1, k)]


def _join(blobs: Sequence[bytes]) -> dict[str, np.ndarray | bytes]:
    return {"ct": b"".join(blobs), "ct_len": np.array([len(b) for b in blobs], dtype=np.uint64)}


def _split(payload: Payload, count: int, who: str) -> list[bytes]:
    blob, lengths = payload.blob("ct"), payload.array("ct_len")
    if lengths.shape != (count,) or int(lengths.sum()) != len(blob):
        raise ProtocolError(f"{who}: expected {count} ciphertexts in one blob")
    bounds = [0, *np.cumsum(lengths.astype(np.int64)).tolist()]
    return [blob[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


class GramClient(ProtocolParty):
    def __init__(self, party_id: str, server_id: str, dims: Mapping[str, int], mode: str):
        super().__init__(party_id)
        self.server_id, self.dims, self.mode = server_id, dict(dims), mode
        self._vectors: dict[str, np.ndarray] | None = None
        self._round = -1
        self._ctx: ts.Context | None = None

    def begin_round(self, round_idx: int, vectors: Mapping[str, np.ndarray]) -> None:
        if set(vectors) != set(self.dims):
            raise ValueError(f"{self.party_id}: vectors {sorted(vectors)} != {sorted(self.dims)}")
        for name, v in vectors.items():
            if np.shape(v) != (self.dims[name],) or not np.all(np.isfinite(v)):
                raise ValueError(f"{self.party_id}: {name} must be {self.dims[name]} finite values")
        self._vectors = {n: np.asarray(v, dtype=np.float64) for n, v in vectors.items()}
        self._round = round_idx

    def install_key(self, inbox: Inbox) -> list[Envelope]:
        for env in inbox:
            if env.tag != TAG_PUBLIC:
                raise ProtocolError(f"{self.party_id}: unexpected {env.tag!r}")
            ctx = ts.context_from(env.payload.blob("context"), n_threads=1)
            if ctx.is_private() or not ctx.has_public_key():
                raise ProtocolError(f"{self.party_id}: the public context must hold a public "
                                    "key and no secret key")  # fmt: skip
            self._ctx = ctx
        return []

    def send_vectors(self, inbox: Inbox) -> list[Envelope]:
        if self._vectors is None:
            raise ProtocolError(f"{self.party_id}: begin_round was not called")
        vectors, self._vectors = self._vectors, None
        meta = {"round": self._round}
        if self.mode == "plain":
            payload = Payload(dict(vectors), meta)
        else:
            if self._ctx is None:
                raise ProtocolError(f"{self.party_id}: no public key: run the set-up first")
            blobs = [ts.ckks_vector(self._ctx, vectors[n]).serialize() for n in sorted(vectors)]
            payload = Payload(_join(blobs), meta)
        return [Envelope(self.party_id, self.server_id, TAG_VECTORS, payload)]


class GramServer(ProtocolParty):
    def __init__(self, party_id: str, client_ids: Sequence[str], dims: Mapping[str, int],
                 mode: str, authority_id: str | None, params: CKKSParams) -> None:  # fmt: skip
        super().__init__(party_id)
        self.clients, self.dims, self.mode = list(client_ids), dict(dims), mode
        self.authority_id, self.params = authority_id, params
        self._ctx: ts.Context | None = None
        self._round = -1
        self._result: dict[str, np.ndarray] | None = None

    def install_eval_key(self, inbox: Inbox) -> list[Envelope]:
        for env in inbox:
            ctx = ts.context_from(env.payload.blob("context"), n_threads=1)
            if env.tag != TAG_EVAL or ctx.is_private():
                raise ProtocolError("server: expected evaluation keys without a secret key")
            self._ctx = ctx
        return []

    def begin_round(self, round_idx: int) -> None:
        self._round, self._result = round_idx, None

    def compute(self, inbox: Inbox) -> list[Envelope]:
        got = {env.sender: env.payload for env in inbox if env.tag == TAG_VECTORS}
        missing = [c for c in self.clients if c not in got]
        if missing or len(got) != len(inbox):
            raise ProtocolError(f"server: no vectors from {missing} (no dropout recovery)")
        names, k = sorted(self.dims), len(self.clients)
        if self.mode == "plain":
            self._result = {}
            for n in names:
                u = np.stack([got[c].array(n) for c in self.clients])
                self._result[n] = u @ u.T
            return []
        if self._ctx is None:
            raise ProtocolError("server: no evaluation keys: run the set-up first")
        vecs = {}
        for c in self.clients:
            for n, blob in zip(names, _split(got[c], len(names), c), strict=True):
                vecs[c, n] = load_chunk(self._ctx, blob, self.dims[n], self.params, f"{c}/{n}")
        blobs = [
            vecs[self.clients[i], n].dot(vecs[self.clients[j], n]).serialize()
            for n in names
            for i, j in pairs(k)
        ]
        payload = Payload(_join(blobs), {"round": self._round, "names": names, "clients": k})
        return [Envelope(self.party_id, str(self.authority_id), TAG_PRODUCTS, payload)]

    def receive(self, inbox: Inbox) -> list[Envelope]:
        if self.mode == "plain":
            return []
        if len(inbox) != 1 or inbox[0].tag != TAG_MATRICES:
            raise ProtocolError("server: expected the Gram matrices from the authority")
        payload = inbox[0].payload
        self._result = {n: payload.array(n) for n in sorted(self.dims)}
        return []

    def result(self) -> dict[str, np.ndarray] | None:
        """Per vector name, the k×k Gram matrix (client order as given); diagonal: 1 for
        ``ckks`` (the clients send unit vectors), computed for ``plain``."""
        return self._result


class GramAuthority(ProtocolParty):
    """Holds the secret key; decrypts only the inner products the server sends."""

    def __init__(self, party_id: str, server_id: str, client_ids: Sequence[str],
                 params: CKKSParams) -> None:  # fmt: skip
        super().__init__(party_id)
        self.server_id, self.clients, self.params = server_id, list(client_ids), params
        self._ctx: ts.Context | None = None

    def publish_keys(self, inbox: Inbox) -> list[Envelope]:
        ctx = self.params.make_context(asymmetric=True)
        ctx.generate_galois_keys()
        ctx.generate_relin_keys()
        self._ctx = ctx
        public = ctx.serialize(save_public_key=True, save_secret_key=False,
                               save_galois_keys=False, save_relin_keys=False)  # fmt: skip
        evaluation = ctx.serialize(save_public_key=True, save_secret_key=False,
                                   save_galois_keys=True, save_relin_keys=True)  # fmt: skip
        out = [Envelope(self.party_id, self.server_id, TAG_EVAL, Payload({"context": evaluation}))]
        out += [Envelope(self.party_id, c, TAG_PUBLIC, Payload({"context": public}))
                for c in self.clients]  # fmt: skip
        return out

    def decrypt(self, inbox: Inbox) -> list[Envelope]:
        if self._ctx is None:
            raise ProtocolError(f"{self.party_id}: no key pair: run the set-up first")
        if len(inbox) != 1 or inbox[0].tag != TAG_PRODUCTS or inbox[0].sender != self.server_id:
            raise ProtocolError(f"{self.party_id}: expected one batch of products")
        payload = inbox[0].payload
        names, k = list(payload.meta["names"]), int(payload.meta["clients"])
        if k != len(self.clients):
            raise ProtocolError(f"{self.party_id}: products for {k} clients")
        ps = pairs(k)
        blobs = _split(payload, len(names) * len(ps), self.party_id)
        step = 2.0 ** -(self.params.round_bits or 0)
        out: dict[str, np.ndarray] = {}
        for a, n in enumerate(names):
            g = np.eye(k)
            for b, (i, j) in enumerate(ps):
                try:
                    vec = ts.ckks_vector_from(self._ctx, blobs[a * len(ps) + b])
                except (ValueError, RuntimeError, TypeError) as err:
                    raise ProtocolError(f"{self.party_id}: not a ciphertext ({err})") from err
                if vec.size() != 1:
                    raise ProtocolError(f"{self.party_id}: a product must be one value")
                g[i, j] = g[j, i] = np.round(vec.decrypt()[0] / step) * step
            out[n] = g
        meta = {"round": payload.meta.get("round")}
        return [Envelope(self.party_id, self.server_id, TAG_MATRICES, Payload(out, meta))]


@dataclass
class GramParties:
    server: GramServer
    clients: dict[str, GramClient]
    authority: GramAuthority | None = None
    others: dict[str, ProtocolParty] = field(default_factory=dict)

    def roles(self) -> dict[Role, list[str]]:
        auth = [self.authority.party_id] if self.authority is not None else []
        return {Role.SERVER: [self.server.party_id], Role.CLIENT: list(self.clients),
                Role.AUTHORITY: auth}  # fmt: skip

    def by_id(self) -> dict[str, ProtocolParty]:
        auth = {self.authority.party_id: self.authority} if self.authority else {}
        return {self.server.party_id: self.server, **self.clients, **auth}


class GramProtocol:
    """Gram matrices of named client vectors (``dims``: name -> length)."""

    name: ClassVar[str] = "gram"
    #: the role interfaces its phases run on (see ``AggregationProtocol.party_types``)
    party_types: ClassVar[tuple[type[ProtocolParty], ...]] = (GramClient, GramServer, GramAuthority)
    setup_phases: ClassVar[tuple[Phase, ...]] = (
        Phase(Role.AUTHORITY, "publish_keys"),
        Phase(Role.SERVER, "install_eval_key"),
        Phase(Role.CLIENT, "install_key"),
    )
    round_phases: ClassVar[tuple[Phase, ...]] = (
        Phase(Role.CLIENT, "send_vectors"),
        Phase(Role.SERVER, "compute"),
        Phase(Role.AUTHORITY, "decrypt"),
        Phase(Role.SERVER, "receive"),
    )

    def __init__(self, mode: str, params: CKKSParams = GRAM_PARAMS,
                 authority_id: str = DEFAULT_AUTHORITY) -> None:  # fmt: skip
        if mode not in GRAMS:
            raise ValueError(f"unknown Gram mode {mode!r}; choose from {list(GRAMS)}")
        if params.packing != "real":
            raise ValueError("the Gram protocol multiplies ciphertexts: packing must be 'real'")
        self.mode, self.params, self.authority_id = mode, params, authority_id

    def create_parties(
        self, server_id: str, client_ids: Sequence[str], dims: Mapping[str, int]
    ) -> GramParties:
        if any(d < 1 or d > self.params.slots for d in dims.values()):
            raise ValueError(f"vector lengths must lie in [1, {self.params.slots}]: {dims}")
        clients = {c: GramClient(c, server_id, dims, self.mode) for c in client_ids}
        authority = (
            GramAuthority(self.authority_id, server_id, client_ids, self.params)
            if self.mode == "ckks"
            else None
        )
        auth_id = authority.party_id if authority else None
        server = GramServer(server_id, client_ids, dims, self.mode, auth_id, self.params)
        return GramParties(server, clients, authority)


GRAMS = ("plain", "ckks")
