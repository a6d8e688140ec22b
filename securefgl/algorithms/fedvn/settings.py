"""FedVN's settings: the ``[experiment.fedvn]`` section (``--fedvn-*`` flags).

Defaults are the authors' code's (AAAI 2025; the paper leaves them to its appendix): M = 20
virtual nodes, λ1 = 0.1 (decoupling), λ2 = 1 (score-contrastive), τ = 0.1, an edge
generator of width 100. The backbone, optimizer and batches are ``[experiment.graph]``'s
(``--fedvn-setup`` sets FedVN's: GIN-BN of width 100, SGD lr 10⁻³, batches of 32).

``s_global``: ``mean`` (the paper, §4.3: s_global = (1/K) Σ_k s_local^(k), a secure sum of
the clients' mean edge-score vectors, in ``sums`` mode; default: the mode the transport
implies, plain → plain, secagg → masked, ckks → ckks) or ``constant`` (the authors' code:
s_global = 1/M · 1, nothing about scores is sent).

``s_local`` inside L_E: ``batch`` (the authors' code: the previous mini-batch's mean s̃) or
``all`` (the paper's formula, §4.3: s_local^(k) = (1/N^(k)) Σ_i s̃_i over all the client's
training graphs; here the mean of its previous ω pass, fixed for a pass, since the current
pass's is not known until it ends).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from protocols.names import SECURE_SUM_NAMES as SECURE_SUMS

S_GLOBAL = ("mean", "constant")
S_LOCAL = ("batch", "all")


def _f(default: Any, help: str, choices: tuple[Any, ...] | None = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class FedVNSettings:
    virtual_nodes: int = _f(20, "M, the shared virtual nodes (the code: 20)")
    lambda_decouple: float = _f(0.1, "λ1, weight of the decoupling loss L_V on Q")
    lambda_contrast: float = _f(1.0, "λ2, weight of the score-contrastive loss L_E on ω")
    tau: float = _f(0.1, "τ, temperature of the score-contrastive loss")
    edge_hidden: int = _f(100, "width of the personal edge generator ω")
    s_global: str = _f("mean", "mean: the clients' mean s_local by a secure sum (the paper); "
                       "constant: 1/M (the authors' code)", S_GLOBAL)  # fmt: skip
    s_local: str = _f("batch", "s_local in L_E: batch: the previous mini-batch's mean (the "
                      "authors' code); all: the mean over the client's graphs in its "
                      "previous ω pass (the paper's formula)", S_LOCAL)  # fmt: skip
    sums: str | None = _f(None, "secure-sum mode of s_global (default: from the transport)",
                          tuple(SECURE_SUMS))  # fmt: skip
    min_senders: int = _f(2, "a client's s_global sum needs this many other senders")

    def __post_init__(self) -> None:
        for key in ("virtual_nodes", "edge_hidden", "min_senders"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be ≥ 1, got {getattr(self, key)}")
        if self.lambda_decouple < 0 or self.lambda_contrast < 0 or not self.tau > 0:
            raise ValueError("need lambda_decouple ≥ 0, lambda_contrast ≥ 0 and tau > 0")
        if self.s_global not in S_GLOBAL:
            raise ValueError(f"s_global must be one of {list(S_GLOBAL)}")
        if self.s_local not in S_LOCAL:
            raise ValueError(f"s_local must be one of {list(S_LOCAL)}")
        if self.sums is not None and self.sums not in SECURE_SUMS:
            raise ValueError(f"sums must be one of {list(SECURE_SUMS)}")

    def resolved(self, transport_sum: str) -> FedVNSettings:
        """``sums`` filled in from the transport's secure-sum mode."""
        return dataclasses.replace(self, sums=self.sums or transport_sum)

    def replace(self, **changes: Any) -> FedVNSettings:
        return dataclasses.replace(self, **changes)
