"""FedEgo's settings: the ``[experiment.fedego]`` section (``--fedego-*`` flags).

Defaults are the authors' code for Cora and CiteSeer (Zhang et al., ACM TKDD 2023; this
family's README lists them and the deviations): hidden 512, 2 hops × 6 neighbours with
replacement, mini-batches and mixup batches of 32, 5 local and 5 server epochs on a fresh
20 % of the nodes, Adam lr 3·10⁻⁴ without weight decay (state kept), λ_k = (EMD_k / 2)^0.5.

Privacy: the shared reduction layer is averaged through the experiment's protocol stack
(``--protocol secagg``: the server learns only the mean); ``dp_noise`` > 0 adds DP to the
uploaded mixed batches (each ego-graph's contribution clipped to ``dp_clip`` in L2, Gaussian
noise σ·clip on each batch sum, RDP-accounted per round; unit: one ego-graph).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


def _f(default: Any, help: str, choices: tuple[Any, ...] | None = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class FedEgoSettings:
    hidden: int = _f(512, "width of the reduction and SAGE layers")
    lr: float = _f(3e-4, "Adam lr of the clients and of the server")
    batch_size: int = _f(32, "centres per mini-batch and per mixed ego-graph (mixup batch)")
    local_epochs: int = _f(5, "local epochs per round (each on a fresh n_k // 5 nodes)")
    server_epochs: int = _f(5, "server epochs per round (each on 20 % of the mixed graphs)")
    train_fraction: float = _f(0.2, "fraction of the mixed graphs the server trains on per "
                               "epoch (a client's epoch is n_k // 5 nodes, as in the "
                               "authors' code)")  # fmt: skip
    lambda_power: float = _f(0.5, "λ_k = (EMD_k / 2)^power")
    lambda_fixed: float | None = _f(None, "a fixed λ instead of the adaptive one")
    mixup: bool = _f(True, "mix the batch (off: upload each ego-graph alone, batch of 1)")
    authors_server_edges: bool = _f(
        False, "the authors' server graph: the clients' mixed trees concatenated without "
        "offsetting their edges, so trees past the largest client's count arrive edgeless "
        "(a reproduction check; off: every tree keeps its edges)")
    mu: float = _f(0.01, "FedProx proximal weight μ (the fedego-fedprox baseline)")
    dp_noise: float = _f(0.0, "Gaussian noise multiplier on the mixed batches (0: off)")
    dp_clip: float = _f(5.0, "L2 bound of one ego-graph's contribution (r and y slots)")
    delta: float = _f(1e-5, "δ at which the mixed batches' ε is reported")

    def __post_init__(self) -> None:
        for key in ("hidden", "batch_size", "local_epochs", "server_epochs"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be ≥ 1, got {getattr(self, key)}")
        for key in ("lr", "dp_clip", "lambda_power"):
            if not getattr(self, key) > 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if not 0 < self.train_fraction <= 1:
            raise ValueError(f"train_fraction must lie in (0, 1], got {self.train_fraction}")
        if self.lambda_fixed is not None and not 0 <= self.lambda_fixed <= 1:
            raise ValueError(f"lambda_fixed must lie in [0, 1], got {self.lambda_fixed}")
        if self.mu < 0 or self.dp_noise < 0:
            raise ValueError("mu and dp_noise must be ≥ 0")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must lie in (0, 1), got {self.delta}")

    def replace(self, **changes: Any) -> FedEgoSettings:
        return dataclasses.replace(self, **changes)
