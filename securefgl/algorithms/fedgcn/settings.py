"""FedGCN's settings: the ``[experiment.fedgcn]`` section of a configuration."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from protocols.names import CKKS_SUM_KEYS, HONEST_BUT_CURIOUS
from protocols.names import SECURE_SUM_NAMES as SECURE_SUMS

SUM_MODES = tuple(SECURE_SUMS)
NORMS = ("sym", "rw")
FEATURES = ("last", "hops", "all")


@dataclass(frozen=True)
class FedGCNSettings:
    """How FedGCN's neighbour sums run and what the model sees (defaults: FedGCN-2hop, the
    GCN normalisation, the sums as protected as the training rounds' transport; ``None``
    outside an experiment means the paper's sums in the clear)."""

    hops: int = field(default=2, metadata={"help": "L: the sums give ÂX (and Â²X)"})
    sum_mode: str | None = field(
        default=None,
        metadata={
            "help": "neighbour sums in the clear, masked or CKKS (default: what the protocol "
            "stack's transport implies: plain, secagg/secagg+ -> masked, ckks -> ckks)",
            "choices": SUM_MODES,
        },
    )
    sum_keys: str = field(
        default="receiver",
        metadata={
            "help": "ckks sums: each receiver's key pair, or one key every client shares "
            "(FedGCN's trust: faster, but the server colluding with ANY client reads every "
            "neighbour sum's parts; honest-but-curious server only)",
            "choices": CKKS_SUM_KEYS,
        },
    )
    norm: str = field(
        default="sym",
        metadata={"help": "sym: D̃^-1/2 Ã D̃^-1/2 (GCN), rw: D̃^-1 Ã", "choices": NORMS},
    )
    features: str = field(
        default="last",
        metadata={"help": "model input: ÂᴸX, [ÂX ‖ …] or [x ‖ ÂX ‖ …]", "choices": FEATURES},
    )
    min_senders: int = field(
        default=2,
        metadata={
            "help": "masked/ckks sums refuse a client with fewer neighbouring clients (1: "
            "allow one, whose contribution the client then learns; plain: not applied)"
        },
    )

    def __post_init__(self) -> None:
        if self.hops not in (1, 2):
            raise ValueError(f"FedGCN hops must be 1 or 2, got {self.hops!r}")
        if self.sum_mode is not None and self.sum_mode not in SUM_MODES:
            raise ValueError(f"unknown sum mode {self.sum_mode!r}; choose from {list(SUM_MODES)}")
        if self.sum_keys not in CKKS_SUM_KEYS:
            raise ValueError(
                f"sum_keys must be one of {list(CKKS_SUM_KEYS)}, got {self.sum_keys!r}"
            )
        if self.norm not in NORMS:
            raise ValueError(f"unknown norm {self.norm!r}; choose from {list(NORMS)}")
        if self.features not in FEATURES:
            raise ValueError(f"unknown features {self.features!r}; choose from {list(FEATURES)}")
        if isinstance(self.min_senders, bool) or not isinstance(self.min_senders, int):
            raise ValueError(f"min_senders must be an int >= 1, got {self.min_senders!r}")
        if self.min_senders < 1:
            raise ValueError(f"min_senders must be >= 1, got {self.min_senders}")

    def check(self, config: Any) -> None:
        """Secure sums need at least two clients to sum over (run when the configuration is
        built)."""
        mode = self.sum_mode or config.protocol.secure_sum_mode()
        ours = {"fedgcn", "fedgcn-1hop"} & set(config.algorithms)
        shared = ours and self.sum_keys == "shared"
        if shared and mode != "ckks":
            raise ValueError(f"sum_keys = 'shared' applies to ckks sums, not {mode!r}")
        if shared and config.protocol.threat_model != HONEST_BUT_CURIOUS:
            raise ValueError(
                "sum_keys = 'shared' trusts the server to follow the protocol: use "
                "sum_keys = 'receiver' against a malicious server"
            )
        if ours and mode != "plain" and config.clients < 2:
            raise ValueError(
                f"sum_mode = {mode!r} needs at least 2 clients (a secure sum over one client "
                "is that client's own value): raise clients, or use sum_mode = 'plain'"
            )

    def replace(self, **changes: Any) -> FedGCNSettings:
        return dataclasses.replace(self, **changes)
