"""Shared set-up of the secure-sum tests: modes, parties, jobs and a transcript recorder."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from protocols.base import Envelope, no_transport
from protocols.bundles import unbundle
from protocols.secure_sum import (
    CKKSSum,
    MaskedSum,
    PlainSum,
    SecureSum,
    SharedKeyCKKSSum,
    run_secure_sums,
    setup_secure_sums,
)
from protocols.secure_sum.parties import TAG_CONTRIBUTION
from protocols.wire import Payload

SERVER = "server"
FRAC_BITS = 32
#: mode -> factory taking the protocol's options (e.g. ``min_senders=1``)
MODES: dict[str, Callable[..., SecureSum]] = {
    "plain": PlainSum,
    "masked": lambda **o: MaskedSum("exp-test", frac_bits=FRAC_BITS, **o),
    # Z_2^32 with the finest resolution that fits |entries| <= 1 (2^-24 or finer up to 127)
    "masked32": lambda **o: MaskedSum(
        "exp-test", word_bits=32, frac_bits=None, value_bound=1.0, **o
    ),
    # receiver masks only (no pairwise masks): the trust of ckks
    "masked-rx": lambda **o: MaskedSum("exp-test", frac_bits=FRAC_BITS, pair_masks=False, **o),
    "ckks": CKKSSum,
    "ckks-shared": lambda **o: SharedKeyCKKSSum(experiment_id="exp-test", **o),
}


class Recorder:
    """A transmit that serializes like the Channel, records, and can tamper with envelopes."""

    def __init__(self, mutate: Callable[[Envelope], Envelope] | None = None) -> None:
        self.log: list[Envelope] = []
        self.mutate = mutate

    def __call__(self, envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        if self.mutate is not None:
            out = [self.mutate(e) for e in out]
        self.log.extend(no_transport(out))  # the transcript keeps its own copy of the bytes
        return out

    @property
    def parts(self) -> list[Envelope]:
        """The log with every sender's bundle of contributions split into one envelope per
        receiver of a part (still addressed to the server)."""
        return [part for env in self.log for part in split_bundle(env)]

    def to(self, receiver: str, tag: str | None = None) -> list[Envelope]:
        return [e for e in self.parts if e.receiver == receiver and tag in (None, e.tag)]


def split_bundle(env: Envelope) -> list[Envelope]:
    """A contribution bundle as one envelope per part; any other envelope as it is."""
    if env.tag != TAG_CONTRIBUTION:
        return [env]
    parts = unbundle(env.payload, "test").values()
    return [Envelope(env.sender, env.receiver, env.tag, part) for part in parts]


def client_ids(n: int) -> list[str]:
    return [f"c{i:02d}" for i in range(n)]


def no_transport_payload(payload: Payload) -> Payload:
    return Payload.from_bytes(payload.to_bytes())


def as_dense(block) -> np.ndarray:
    return block.toarray() if sp.issparse(block) else np.asarray(block, dtype=np.float64)


def make_parties(mode: str, n: int, transmit=no_transport, **options):
    protocol = MODES[mode](**options)
    parties = protocol.create_parties(SERVER, client_ids(n))
    setup_secure_sums(protocol, parties, transmit)
    return protocol, parties


def run_mode(mode: str, n: int, jobs, transmit=no_transport, round_idx=0, *, options=None, **kw):
    """One batch of ``jobs`` in ``mode``; ``options`` go to the protocol (``min_senders``),
    ``kw`` to :func:`run_secure_sums`."""
    protocol, parties = make_parties(mode, n, **(options or {}))
    return run_secure_sums(protocol, parties, jobs, transmit, round_idx=round_idx, **kw)


def tolerance_for(mode: str, n_senders: int) -> float:
    if mode == "plain":
        return 1e-12
    if mode.startswith("masked"):  # round-to-nearest: 2^-(f+1) per summand
        frac_bits = 24 if mode == "masked32" else FRAC_BITS
        return n_senders * 2.0 ** -(frac_bits + 1) + 1e-12
    return 1e-6


def random_block(rng: np.random.Generator, shape: tuple[int, int], sparse: bool):
    if sparse:
        fmt = str(rng.choice(["csr", "csc", "coo"]))
        block = sp.random_array(shape, density=float(rng.uniform(0, 0.7)), format=fmt, rng=rng)
        return sp.csr_matrix(block) if rng.random() < 0.3 else block  # spmatrix too
    return rng.uniform(-1, 1, shape) * (rng.random(shape) < 0.6)


def simple_jobs(n: int, shape=(6, 9), seed=0, sparse=False):
    """Every client is the receiver of a sum over all the others (FedStruct's pattern)."""
    rng = np.random.default_rng(seed)
    ids = client_ids(n)
    return {r: {k: random_block(rng, shape, sparse) for k in ids if k != r} for r in ids}

