"""protocols.dp.dpsgd: DP-SGD through Opacus on row-independent (precomputed) features."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from protocols.dp import PrivacyAccountant, make_private, make_private_with_epsilon


def setup(seed: int = 0):
    torch.manual_seed(seed)
    x = torch.randn(256, 8)  # e.g. rows of a precomputed Â^K X
    y = (x[:, 0] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    return model, torch.optim.SGD(model.parameters(), lr=0.5), loader


def train(private, epochs: int) -> None:
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        for xb, yb in private.data_loader:
            if len(xb) == 0:
                continue
            private.optimizer.zero_grad()
            loss_fn(private.module(xb), yb).backward()
            private.optimizer.step()


def test_make_private_reports_the_accountant_epsilon() -> None:
    model, opt, loader = setup()
    private = make_private(model, opt, loader, noise_multiplier=1.0, max_grad_norm=1.0, seed=0)
    assert private.sample_rate == pytest.approx(1 / 8)
    assert private.noise_multiplier == 1.0
    assert private.epsilon(1e-5) == 0.0
    train(private, epochs=2)
    assert len(private.privacy_accountant(1e-5)) == 16  # 2 epochs × 8 expected batches
    ref = PrivacyAccountant("rdp", 1e-5)
    ref.step(1.0, 1 / 8, 16)
    assert private.epsilon(1e-5) == pytest.approx(ref.epsilon())


def test_make_private_with_epsilon_spends_at_most_the_budget() -> None:
    model, opt, loader = setup(1)
    private = make_private_with_epsilon(
        model, opt, loader, target_epsilon=4.0, target_delta=1e-3, epochs=3, max_grad_norm=1.0
    )
    train(private, epochs=3)
    assert 3.9 <= private.epsilon(1e-3) <= 4.0


def test_opacus_rejects_unsupported_layers() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.zeros(64).long()), batch_size=8)
    with pytest.raises(Exception, match="BatchNorm"):
        make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), loader, 1.0, 1.0)


def _one_step(seed: int | None, poisson: bool = True) -> torch.Tensor:
    """One DP-SGD step from the same model and batch, after torch.manual_seed(0)."""
    model, opt, loader = setup(0)
    torch.manual_seed(0)  # the public experiment seed, as the runner sets it
    private = make_private(model, opt, loader, noise_multiplier=1.0, max_grad_norm=1.0,
                           poisson_sampling=poisson, seed=seed)  # fmt: skip
    xb, yb = next(iter(private.data_loader))
    private.optimizer.zero_grad()
    nn.CrossEntropyLoss()(private.module(xb), yb).backward()
    private.optimizer.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_dpsgd_noise_is_secret_not_the_global_seed() -> None:
    """Two runs after torch.manual_seed(0) must not draw the same noise (nor, with Poisson
    sampling, the same batches); the seeded debugging path stays reproducible."""
    assert not torch.allclose(_one_step(None), _one_step(None))
    torch.testing.assert_close(_one_step(7), _one_step(7))


def test_a_loader_without_poisson_sampling_is_refused() -> None:
    """Opacus would still charge q = 1/len(loader): 4.22 for 100 rows in batches of 10 over
    2 epochs at σ = 1, where a fixed loader's releases need q = 1 (7.08)."""
    with pytest.raises(ValueError, match="poisson_sampling"):
        _one_step(None, poisson=False)
