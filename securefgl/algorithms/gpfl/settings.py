"""GPFL's settings: the ``[experiment.gpfl]`` section (``--gpfl-*`` flags).

GPFL (TMLR 2025). Defaults follow the authors' code where it differs from the paper text
(securefgl/algorithms/gpfl/README.md lists the differences and says which reproduces Table 2):
``self_weight`` 0.05 on the identity (the paper's γ = 0.95 reads as the weight of the
network term), the code's "sym" normalisation (which is row normalisation), distinct
Erdős–Rényi probe graphs (the code's fixed seed makes all 20 identical:
``identical_probes``), h = 0.1/k on the row-softmax, client features avg-pooled to ~100
values, 2 properties kept at least.

Privacy: ``sums`` (the personalised aggregation and the feature means, a secure-sum mode;
default: what the transport implies, plain -> plain, secagg -> masked, ckks -> ckks),
``similarity`` (``plain`` or ``ckks``: the server gets only the k×k cosine matrices; default
``ckks`` whenever the sums are not plain) and ``property_epsilon`` (Laplace LDP on the
client's property vector, ε per client, unit ``property_unit``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from protocols.names import SECURE_SUM_NAMES as SECURE_SUMS

NORMS = ("row", "sym")
INITIALS = ("property", "random")
PROPERTY_UNITS = ("dataset", "graph")
SIMILARITIES = ("plain", "ckks")


def _f(default: Any, help: str, choices: tuple[Any, ...] | None = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class GPFLSettings:
    self_weight: float = _f(0.05, "weight of a client's own update in W = γI + (1−γ)A (the "
                            "code: 0.05; the paper's text: 0.95)")  # fmt: skip
    beta: float = _f(0.95, "A_t = β A_{t−1} + (1−β) A_E (Eq. 8)")
    norm: str = _f("row", "normalisation of A_t: row (the code's 'sym', = row) or sym "
                   "(D^-1/2 A D^-1/2)", NORMS)  # fmt: skip
    probes: int = _f(20, "Erdős–Rényi probe graphs of the functional embedding")
    probe_nodes: int = _f(30, "nodes per probe graph")
    probe_p: float = _f(0.1, "edge probability of the probe graphs")
    identical_probes: bool = _f(False, "the code's bug: every probe graph is the same one")
    compress_dim: int = _f(100, "client features: parameters avg-pooled to about this many")
    gae_hidden: int = _f(128, "server GAE width (output: width / 4)")
    gae_epochs: int = _f(100, "GAE Adam steps per round (a fresh GAE every round)")
    gae_lr: float = _f(1e-3, "GAE Adam lr")
    gae_weight_decay: float = _f(5e-4, "GAE Adam weight decay")
    sparsity: float = _f(1.0, "weight of the sparsity term of L_server (Eq. 9)")
    threshold: float = _f(0.1, "keep A_ij when softmax row entry ≥ threshold / k (Eq. 6)")
    min_properties: int = _f(2, "the rule-based selector keeps at least this many properties")
    initial: str = _f("property", "initial client network A_0", INITIALS)
    learn: bool = _f(True, "learn the network with the GAE (off: use A_t itself)")
    update: bool = _f(True, "update A_t with A_E every round (off: keep A_0)")
    sums: str | None = _f(
        None, "secure-sum mode of the personalised aggregation and the feature means "
        "(default: from the transport)", tuple(SECURE_SUMS),
    )  # fmt: skip
    similarity: str | None = _f(None, "how the server gets the cosine similarities (default: "
                                "ckks unless the sums are plain)", SIMILARITIES)  # fmt: skip
    property_epsilon: float | None = _f(None, "Laplace LDP ε of each client's property vector "
                                        "(unset: sent in the clear)")  # fmt: skip
    property_unit: str = _f("dataset", "what the property ε protects: the client's whole "
                            "dataset, or one of its graphs", PROPERTY_UNITS)  # fmt: skip
    min_senders: int = _f(2, "a receiver's personalised sum needs this many other senders "
                          "(fewer: its remote weight moves to its own update)")  # fmt: skip

    def __post_init__(self) -> None:
        for key in ("self_weight", "beta", "probe_p"):
            if not 0 <= getattr(self, key) <= 1:
                raise ValueError(f"{key} must lie in [0, 1], got {getattr(self, key)}")
        for key in ("probes", "probe_nodes", "compress_dim", "gae_hidden", "gae_epochs",
                    "min_properties", "min_senders"):  # fmt: skip
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be ≥ 1, got {getattr(self, key)}")
        if self.gae_hidden < 4 or self.min_properties > 6:
            raise ValueError("gae_hidden must be ≥ 4 and min_properties ≤ 6")
        if self.threshold < 0 or self.gae_lr <= 0 or self.gae_weight_decay < 0:
            raise ValueError("need threshold ≥ 0, gae_lr > 0, gae_weight_decay ≥ 0")
        if not self.sparsity >= 0:
            raise ValueError(f"sparsity must be ≥ 0, got {self.sparsity}")
        if self.property_epsilon is not None and not self.property_epsilon > 0:
            raise ValueError(f"property_epsilon must be > 0, got {self.property_epsilon}")
        for key, allowed in (("norm", NORMS), ("initial", INITIALS),
                             ("property_unit", PROPERTY_UNITS)):  # fmt: skip
            if getattr(self, key) not in allowed:
                raise ValueError(f"{key} must be one of {list(allowed)}")
        if self.sums is not None and self.sums not in SECURE_SUMS:
            raise ValueError(f"sums must be one of {list(SECURE_SUMS)}")
        if self.similarity is not None and self.similarity not in SIMILARITIES:
            raise ValueError(f"similarity must be one of {list(SIMILARITIES)}")

    def resolved(self, transport_sum: str) -> GPFLSettings:
        """``sums`` and ``similarity`` with their defaults filled in (``transport_sum``: the
        secure-sum mode the run's transport implies)."""
        sums = self.sums or transport_sum
        similarity = self.similarity or ("plain" if sums == "plain" else "ckks")
        return dataclasses.replace(self, sums=sums, similarity=similarity)

    def replace(self, **changes: Any) -> GPFLSettings:
        return dataclasses.replace(self, **changes)
