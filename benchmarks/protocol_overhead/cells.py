"""The grid: a cell is (protocol, n clients, dimension d, dropout fraction, threat model).

``threat_model``: ``honest-but-curious`` (every protocol) or ``malicious`` (the signed,
consistency-checked variants of secagg, secagg+ and ckks; plain has nothing to protect).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from protocols.base import AggregationProtocol, Role
from protocols.identity import HONEST_BUT_CURIOUS, THREAT_MODELS
from protocols.registry import TRANSPORTS, make_transport
from protocols.secagg import SecAggregation

try:  # TenSEAL is a dependency, but keep the PRG / secagg part usable without it
    from protocols.ckks import CKKSParams

    CKKS_PARAMS: CKKSParams | None = CKKSParams()
    CKKS_SLOTS: int | None = CKKS_PARAMS.values_per_ciphertext  # reals per ciphertext
except ImportError:  # pragma: no cover
    CKKS_PARAMS, CKKS_SLOTS = None, None

PROTOCOLS = tuple(TRANSPORTS)
#: protocols with a malicious-server variant
MALICIOUS_PROTOCOLS = ("secagg", "secagg+", "ckks")
DEFAULT_CLIENTS = (10, 100, 500)
DEFAULT_DIMS = (10**4, 10**5, 10**6)
QUICK_CLIENTS = (10, 100)
QUICK_DIMS = (10**4, 10**5)
DEFAULT_DROPOUTS = (0.0, 0.1)
#: The client phase that sends the protected input.
INPUT_PHASE = {
    "plain": "send_update",
    "secagg": "masked_input",
    "secagg+": "masked_input",
    "ckks": "encrypt",
}
SECAGG_TARGET = 3.0  # client_seconds <= 3 x limit_seconds
CKKS_BYTES_TARGET = 4.0  # client_bytes_up <= 4 x plain_bytes (issue 49; stretch 2.5)
#: issue 49: secagg / secagg+ client_bytes_up <= 1.15 x plain_bytes at d >= 1e5
SECAGG_BYTES_TARGET, BYTES_TARGET_MIN_DIM = 1.15, 10**5
#: the inputs' declared bound: x in [-1, 1] and weights 1..3, so |w x| and w are <= 3
#: (SecAggregation's value_bound; the ring follows from it and n)
VALUE_BOUND = 3.0
EXPERIMENT_ID = "benchmark-protocol-overhead"
N_DISTINCT_INPUTS = 4  # clients cycle through a few input vectors (memory: not n x d floats)


@dataclass(frozen=True)
class Cell:
    protocol: str
    clients: int
    dim: int
    dropout: float
    drop_phase: str = ""  # "" = default_drop_phase(protocol, threat_model)
    threat_model: str = HONEST_BUT_CURIOUS

    @property
    def phase(self) -> str:
        if self.drop_phase:
            return self.drop_phase
        return default_drop_phase(self.protocol, self.threat_model)

    @property
    def dropped_in_sum(self) -> bool:
        """Whether dropping clients sent their input first (drop after the input phase)."""
        methods = [ph.method for ph in make_protocol(self.protocol, self.threat_model).round_phases]
        return methods.index(self.phase) > methods.index(INPUT_PHASE[self.protocol])

    @property
    def n_dropped(self) -> int:
        return math.ceil(self.dropout * self.clients - 1e-9) if self.dropout > 0 else 0

    def client_ids(self) -> list[str]:
        return [f"c{i:04d}" for i in range(self.clients)]

    def dropped(self) -> dict[str, str]:
        """Every (n / n_dropped)-th client drops before the protocol's post-input phase."""
        ids = self.client_ids()
        if not self.n_dropped:
            return {}
        step = self.clients / self.n_dropped
        picked = sorted({int(i * step) for i in range(self.n_dropped)})
        return {ids[i]: self.phase for i in picked}


def make_protocol(name: str, threat_model: str = HONEST_BUT_CURIOUS) -> AggregationProtocol:
    return make_transport(name, EXPERIMENT_ID, threat_model=threat_model, value_bound=VALUE_BOUND)


def default_drop_phase(name: str, threat_model: str = HONEST_BUT_CURIOUS) -> str:
    """The phase before which a dropping client goes silent by default
    (notes/protocol_overhead.md): the round's last client phase, after it sent its input."""
    phases = make_protocol(name, threat_model).round_phases
    return [ph.method for ph in phases if ph.role is Role.CLIENT][-1]


def ring_bits(name: str, n: int) -> int:
    """The width of secagg's masked words for ``n`` clients (32 or 64)."""
    protocol = make_protocol(name)
    assert isinstance(protocol, SecAggregation)
    return protocol.config_for(n).codec.word_bits


def mask_degree(name: str, n: int) -> int:
    """Mask neighbours per client: n - 1 for secagg, min(k, n - 1) for secagg+."""
    protocol = make_protocol(name)
    assert isinstance(protocol, SecAggregation)
    k = protocol.config_for(n).k
    return n - 1 if k is None or k >= n - 1 else int(k)


def ckks_chunks(d: int) -> int:
    return math.ceil((d + 1) / CKKS_SLOTS) if CKKS_SLOTS else math.ceil((d + 1) / 2048)


def sort_key(row: dict) -> tuple:
    threat = THREAT_MODELS.index(row.get("threat_model", HONEST_BUT_CURIOUS))
    return (PROTOCOLS.index(row["protocol"]), threat, row["clients"], row["dim"], row["dropout"])
