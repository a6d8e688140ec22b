"""DP-SGD through Opacus, for models whose training examples are independent rows.

Abadi et al., "Deep Learning with Differential Privacy", CCS'16; Opacus (Yousefpour et al.
2021) ``PrivacyEngine``: per-example gradient clipping to ``max_grad_norm``, Gaussian noise
of std ``noise_multiplier·max_grad_norm`` on the summed batch gradient, Poisson sampling,
and an RDP/PRV accountant. This module is a thin wrapper that returns the engine (whose
accountant gives ε) together with the wrapped model, optimizer and loader.

What it protects: example-level DP for the **rows of the data loader** — the trained
weights (and every later release derived from them) are (ε, δ)-DP with respect to adding
or removing one row, against anyone who sees the weights (server, other clients, model
users). The trainer itself sees its data.

Where it is NOT node-level DP for graphs (read before using it on a GNN)
-----------------------------------------------------------------------
* A message-passing GNN couples nodes: node v's features enter the loss of every node in its
  L-hop neighbourhood, so clipping each node's loss gradient bounds one *term*, not one
  node's total influence (up to Σ_{i≤L} D^i terms). Opacus applied to a GNN therefore gives
  no node-level (nor edge-level) guarantee (Daigavane et al., arXiv 2111.15521); it also
  fails mechanically on PyG convolutions (opacus issue #588).
* What we support: an MLP / linear head on **precomputed features**, e.g. SGC-style
  X_K = Â^K X. DP-SGD then makes the weights DP with respect to one **row of X_K** (plus its
  label). That is not one node: Â^K X mixes each node's features into the rows of its K-hop
  neighbours, and the rows depend on the edges. A node-level (or edge-level) claim needs the
  propagation step itself to be private and bounded — degree-capped sampling with
  sensitivity ≤ Σ_{i≤K} D^i occurrences (Daigavane et al.) or GAP-style noisy aggregation
  of unit-norm rows (Sajadmanesh et al., USENIX Sec'23) — composed with the DP-SGD ε.
  We claim only the row-level guarantee; results must be labelled that way.
* Full-batch training (sample rate 1) gets no amplification and burns ε fast.

Noise is Opacus' (``torch.normal``); ``seed`` seeds the noise generator for reproducible
tests, while Poisson sampling draws from torch's global RNG (``torch.manual_seed``).
``secure_mode`` (torchcsprng) is not available in this environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from protocols.dp.accounting import AccountantKind, PrivacyAccountant


@dataclass
class PrivateTraining:
    """What :func:`make_private` returns: use ``module``, ``optimizer``, ``data_loader``."""

    engine: Any  # opacus.PrivacyEngine
    module: nn.Module
    optimizer: torch.optim.Optimizer
    data_loader: DataLoader

    @property
    def noise_multiplier(self) -> float:
        return float(self.optimizer.noise_multiplier)  # type: ignore[attr-defined]

    @property
    def sample_rate(self) -> float:
        return 1.0 / len(self.data_loader)

    def epsilon(self, delta: float) -> float:
        """ε spent so far at ``delta`` (the engine's accountant over all optimizer steps)."""
        return float(self.engine.get_epsilon(delta))

    def privacy_accountant(self, delta: float) -> PrivacyAccountant:
        """The engine's history as a :class:`PrivacyAccountant` (to compose with others)."""
        return PrivacyAccountant.from_state_dict(
            {
                "kind": self.engine.accountant.mechanism(),
                "delta": delta,
                "history": list(self.engine.accountant.history),
            }
        )


def _engine(accountant: AccountantKind) -> Any:
    from opacus import PrivacyEngine

    return PrivacyEngine(accountant=accountant, secure_mode=False)


def _generator(seed: int | None) -> torch.Generator | None:
    return None if seed is None else torch.Generator().manual_seed(int(seed))


def make_private(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data_loader: DataLoader,
    noise_multiplier: float,
    max_grad_norm: float,
    *,
    accountant: AccountantKind = "rdp",
    poisson_sampling: bool = True,
    seed: int | None = None,
    **kwargs: Any,
) -> PrivateTraining:
    """Wrap ``model``/``optimizer``/``data_loader`` for DP-SGD (row-level DP, see module doc).

    Extra keyword arguments go to ``opacus.PrivacyEngine.make_private`` (``clipping``,
    ``grad_sample_mode``, ``loss_reduction``, ...). Opacus validates the model and raises on
    unsupported layers (e.g. BatchNorm; fix with ``opacus.validators.ModuleValidator.fix``).
    """
    engine = _engine(accountant)
    module, opt, loader = engine.make_private(
        module=model,
        optimizer=optimizer,
        data_loader=data_loader,
        noise_multiplier=float(noise_multiplier),
        max_grad_norm=float(max_grad_norm),
        poisson_sampling=poisson_sampling,
        noise_generator=_generator(seed),
        **kwargs,
    )
    return PrivateTraining(engine, module, opt, loader)


def make_private_with_epsilon(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data_loader: DataLoader,
    target_epsilon: float,
    target_delta: float,
    epochs: int,
    max_grad_norm: float,
    *,
    accountant: AccountantKind = "rdp",
    poisson_sampling: bool = True,
    seed: int | None = None,
    **kwargs: Any,
) -> PrivateTraining:
    """As :func:`make_private`, with σ chosen so that ``epochs`` epochs spend the budget."""
    engine = _engine(accountant)
    module, opt, loader = engine.make_private_with_epsilon(
        module=model,
        optimizer=optimizer,
        data_loader=data_loader,
        target_epsilon=float(target_epsilon),
        target_delta=float(target_delta),
        epochs=int(epochs),
        max_grad_norm=float(max_grad_norm),
        poisson_sampling=poisson_sampling,
        noise_generator=_generator(seed),
        **kwargs,
    )
    return PrivateTraining(engine, module, opt, loader)
