"""DP-SGD through Opacus, for models whose training examples are independent rows.

Abadi et al., CCS 2016; Opacus' ``PrivacyEngine`` (Yousefpour et al. 2021): per-example
clipping, Gaussian noise on the summed batch gradient, Poisson sampling and an RDP / PRV
accountant. A thin wrapper returning the engine with the wrapped model, optimizer and loader.

Protects the **rows of the data loader**: the weights are (ε, δ)-DP with respect to one row,
against anyone who sees them. NOT node-level (nor edge-level) DP for a message-passing GNN,
whose nodes enter each other's losses (Daigavane et al., arXiv 2111.15521). Supported: an
MLP on precomputed features such as ``Â^K X``, DP per row of that matrix plus its label,
which is still not one node; results must be labelled that way.

Noise and sampling are secret by default: the engine runs in Opacus' secure mode with a
torch generator whose whole MT19937 state comes from ``secrets``
(:func:`protocols.dp.rng.make_torch_generator`) instead of torchcsprng (unmaintained, not
installable for current torch), so the Gaussian noise and the Poisson batches never depend
on torch's global generator or the experiment seed, and each noise draw is Opacus'
floating-point-robust sum of four Gaussians (Holohan & Braghin 2021; about 4× the noise
draws, small next to per-example gradients). ``seed`` (NOT PRIVATE: debugging only) seeds
the noise instead and samples from torch's global generator. MT19937 is not a CSPRNG
(:mod:`protocols.dp.rng`). In full: ``docs/protocols.md``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader

from protocols.dp.accounting import AccountantKind, PrivacyAccountant
from protocols.dp.rng import make_torch_generator


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


class _SecretEngine(PrivacyEngine):
    """Opacus' secure mode with a secret MT19937 generator in place of torchcsprng: its
    noise and its sampling read ``secure_rng``."""

    def __init__(self, accountant: AccountantKind) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Secure RNG turned off")
            super().__init__(accountant=accountant, secure_mode=False)
        self.secure_mode = True
        self.secure_rng = make_torch_generator(None)


def _engine(accountant: AccountantKind, seed: int | None) -> PrivacyEngine:
    """Secure mode over a secret generator; a plain engine for a debugging ``seed``."""
    if seed is None:
        return _SecretEngine(accountant)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Secure RNG turned off")
        return PrivacyEngine(accountant=accountant, secure_mode=False)


def _require_poisson(poisson_sampling: bool) -> None:
    """Opacus charges every step as a Poisson-subsampled Gaussian at q = 1/len(loader); a
    fixed or shuffled loader (each row in one known batch an epoch) is not that mechanism."""
    if not poisson_sampling:
        raise ValueError("DP-SGD needs poisson_sampling = True: the accountant charges each "
                         "step at q = 1/len(loader), which a fixed or shuffled loader does "
                         "not give")  # fmt: skip


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

    Noise and Poisson sampling come from a secret generator unless ``seed`` is given (NOT
    PRIVATE: reproducible debugging only).

    Extra keyword arguments go to ``opacus.PrivacyEngine.make_private`` (``clipping``,
    ``grad_sample_mode``, ``loss_reduction``, ...). Opacus validates the model and raises on
    unsupported layers (e.g. BatchNorm; fix with ``opacus.validators.ModuleValidator.fix``).
    """
    _require_poisson(poisson_sampling)
    engine = _engine(accountant, seed)
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
    _require_poisson(poisson_sampling)
    engine = _engine(accountant, seed)
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
