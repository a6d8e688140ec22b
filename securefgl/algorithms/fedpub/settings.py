"""FED-PUB's settings: the ``[experiment.fedpub]`` section (``--fedpub-*`` flags).

Defaults are the official code's disjoint script (Baek et al., ICML 2023; README of this
family lists each and the deviations): τ = 3, a proxy graph of 5 × 100 nodes with p = 0.1,
hidden 128, Adam lr 0.01 and weight decay 10⁻⁶ with state kept across rounds, one
full-batch step per round, λ1 = λ2 = 10⁻³ with the code's gradient-free regularisers
(``regularisers = "official"``; ``"paper"``: the differentiable λ1‖μ‖₁ + λ2‖θ − θ̄‖₂).
The same client training serves the baselines of FED-PUB's Table 1 (FedAvg, FedProx,
FedPer, GCFL, Local), as in the authors' repository.

Privacy: ``sums`` (how θ̄_i = Σ_j α_ij θ_j reaches client i: ``plain``, the paper, every θ_j
to the server; ``masked`` / ``ckks``: a secure sum addressed to i, the server learns no
θ_j; default from the transport) and ``embedding`` (how h̃_i reaches the server: ``plain``,
or ``gaussian``: clipped to ``embedding_clip`` and noised with σ = ``embedding_noise`` ×
the sensitivity, accounted by RDP over the rounds).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from protocols.names import SECURE_SUM_NAMES as SECURE_SUMS

REGULARISERS = ("official", "paper")
EMBEDDINGS = ("plain", "gaussian")


def _f(default: Any, help: str, choices: tuple[Any, ...] | None = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class FedPubSettings:
    tau: float = _f(3.0, "α = softmax(τ·S): the scale τ (code: --norm-scale, 3 in its script)")
    proxy_blocks: int = _f(5, "random proxy graph: Erdős–Rényi blocks")
    proxy_nodes: int = _f(100, "nodes per block")
    proxy_p: float = _f(0.1, "edge probability inside a block")
    hidden: int = _f(128, "GCN width")
    lr: float = _f(0.01, "client Adam lr (state kept across rounds)")
    weight_decay: float = _f(1e-6, "client Adam weight decay")
    local_steps: int = _f(1, "full-batch steps per round (one local epoch)")
    l1: float = _f(1e-3, "λ1: L1 on the masks; also the eval-time pruning threshold")
    loc_l2: float = _f(1e-3, "λ2: proximal term to the received personalised model")
    regularisers: str = _f("official", "official: the code's terms (no gradient); paper: "
                           "differentiable λ1‖μ‖₁ + λ2‖θ − θ̄‖₂", REGULARISERS)  # fmt: skip
    masks: bool = _f(True, "personalised weight masks (off: the plain GCN of the baselines)")
    mu: float = _f(0.01, "FedProx proximal weight μ (the fedpub-fedprox baseline)")
    gcfl_eps1: float = _f(0.05, "GCFL: split a cluster when ‖mean ΔW‖ < ε1 ...")
    gcfl_eps2: float = _f(0.1, "... and max ‖ΔW‖ > ε2")
    gcfl_warmup: int = _f(20, "GCFL: no split before this round")
    sums: str | None = _f(None, "how θ̄_i reaches client i: plain (the server mixes every θ_j), "
                          "masked or ckks secure sums (default: from the transport)",
                          tuple(SECURE_SUMS))  # fmt: skip
    embedding: str = _f("plain", "how h̃_i reaches the server", EMBEDDINGS)
    embedding_clip: float = _f(1.0, "gaussian: h̃_i clipped to this L2 norm")
    embedding_noise: float = _f(1.0, "gaussian: noise multiplier σ (std σ·2·clip per entry)")
    delta: float = _f(1e-5, "δ at which the embeddings' ε is reported")
    min_senders: int = _f(2, "a secure sum needs this many other senders (fewer: the weight "
                          "moves to the client's own model)")  # fmt: skip

    def __post_init__(self) -> None:
        for key in ("proxy_blocks", "proxy_nodes", "hidden", "local_steps", "min_senders"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be ≥ 1, got {getattr(self, key)}")
        if not 0 < self.proxy_p <= 1:
            raise ValueError(f"proxy_p must lie in (0, 1], got {self.proxy_p}")
        for key in ("tau", "lr", "embedding_clip"):
            if not getattr(self, key) > 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        for key in ("weight_decay", "l1", "loc_l2", "mu", "embedding_noise", "gcfl_eps1",
                    "gcfl_eps2", "gcfl_warmup"):  # fmt: skip
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be ≥ 0, got {getattr(self, key)}")
        if self.regularisers not in REGULARISERS:
            raise ValueError(f"regularisers must be one of {list(REGULARISERS)}")
        if self.embedding not in EMBEDDINGS:
            raise ValueError(f"embedding must be one of {list(EMBEDDINGS)}")
        if self.sums is not None and self.sums not in SECURE_SUMS:
            raise ValueError(f"sums must be one of {list(SECURE_SUMS)}")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must lie in (0, 1), got {self.delta}")

    def resolved(self, transport_sum: str) -> FedPubSettings:
        """``sums`` filled in from the transport's secure-sum mode."""
        return dataclasses.replace(self, sums=self.sums or transport_sum)

    def replace(self, **changes: Any) -> FedPubSettings:
        return dataclasses.replace(self, **changes)
