"""The edge server's graph imputation: potential links from ``H·Hᵀ`` and generated
neighbour features from an autoencoder trained against a versatile assessor.

SpreadFGL (Zhong et al., §III-C, §III-D, Eq. 9-14):

* potential links: the ``k`` largest entries of each row of ``Ā = H Hᵀ`` (inner product of
  the uploaded softmax rows; self excluded; ``candidates="cross_client"`` also excludes the
  row's own client, ``"own_client"`` keeps only it), computed in row chunks, never as a
  dense ``n × n`` matrix;
* autoencoder: a fixed noise matrix ``S ∈ R^{n×c}`` → encoder ``c → 16 → d`` gives the
  generated features ``X̄ = f(S)``, decoder ``d → 16 → c`` with softmax gives ``H̄ = h(X̄)``;
* assessor: ``c → 128 → 16 → 1`` with sigmoid;
* negative sampling: ``e_u = 1[h_u > 1/c]`` from the real row, applied to real and fake;
  Eq. 13 (assessor) and Eq. 14 (AE: adversarial term on ``h̄ ⊙ e`` plus
  ``‖(h − h̄) ⊙ (1 − e)‖²``), T_ae AE steps then T_as assessor steps per outer iteration.

Deviations and choices (§III-C, §III-D, §IV-A leave them open; flags in
:class:`SpreadFGLSettings`): mini-batches of rows (``ae_batch``) instead of full batches; a
fixed number of outer iterations (``ae_iterations``, warm-started across imputations)
instead of "until convergence"; ``gan_loss="bce"`` (the BCE forms; ``"paper"``: Eq. 13-14's
logs, clamped); with the assessor off the AE minimises the full-vector L2 reconstruction;
``S ~ N(0, I)`` drawn once (``noise_input="fixed"``), from the run's public seed: it is
model randomness, not privacy noise (the paper's "noise for privacy" gives no guarantee).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from securefgl.algorithms.common.edge.model import Factored
from securefgl.algorithms.spreadfgl.settings import CANDIDATES, SpreadFGLSettings

AE_HIDDEN = 16
ASSESSOR_DIMS = (128, 16)
_EPS = 1e-7


def potential_links(
    h: np.ndarray,
    owner: np.ndarray,
    k: int,
    scope: str = "all",
    chunk: int = 2048,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """``[n, k]`` row indices of each row's ``k`` most similar rows by inner product (self
    excluded; ``scope`` ``"cross_client"`` excludes the rows of the same owner,
    ``"own_client"`` those of other owners), best first. Rows with
    fewer candidates are padded with ``-1``.

    With ``rng``, a tie at the k-th score is broken uniformly at random (otherwise in a
    fixed order): released one-hot rows (randomised response) make every same-class pair
    a tie, and a fixed order would send every row's links to the same few nodes."""
    if scope not in CANDIDATES:
        raise ValueError(f"scope must be one of {list(CANDIDATES)}, got {scope!r}")
    h = np.asarray(h, dtype=np.float32)
    n = len(h)
    k_eff = min(k, max(n - 1, 0))
    out = np.full((n, k), -1, dtype=np.int64)
    if k_eff == 0:
        return out
    owner = np.asarray(owner)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        sim = h[lo:hi] @ h.T
        sim[np.arange(hi - lo), np.arange(lo, hi)] = -np.inf
        if scope == "cross_client":
            sim[owner[lo:hi, None] == owner[None, :]] = -np.inf
        elif scope == "own_client":
            sim[owner[lo:hi, None] != owner[None, :]] = -np.inf
        top = np.argpartition(-sim, k_eff - 1, axis=1)[:, :k_eff]
        if rng is not None:
            _break_ties(sim, top, rng)
        order = np.argsort(-np.take_along_axis(sim, top, axis=1), axis=1, kind="stable")
        top = np.take_along_axis(top, order, axis=1)
        valid = np.isfinite(np.take_along_axis(sim, top, axis=1))
        out[lo:hi, :k_eff] = np.where(valid, top, -1)
    return out


def _break_ties(sim: np.ndarray, top: np.ndarray, rng: np.random.Generator) -> None:
    """Re-draw, in place, the top-k of the rows whose k-th score is tied beyond the top-k:
    every higher score is kept, the tied ones are chosen uniformly at random."""
    k = top.shape[1]
    kth = np.take_along_axis(sim, top, axis=1).min(axis=1)[:, None]
    above = (sim > kth).sum(axis=1)
    tied = np.flatnonzero(((sim == kth).sum(axis=1) > k - above) & np.isfinite(kth[:, 0]))
    if tied.size:
        s, t = sim[tied], kth[tied]
        key = np.where(s > t, 2.0, np.where(s == t, rng.random(s.shape, np.float32), -1.0))
        top[tied] = np.argpartition(-key, k - 1, axis=1)[:, :k]


class Imputer(nn.Module):
    """One edge server's autoencoder and assessor (kept between imputations)."""

    def __init__(self, num_classes: int, dim: int, settings: SpreadFGLSettings, seed: int) -> None:
        super().__init__()
        self.c, self.d, self.settings = num_classes, dim, settings
        self.gen = torch.Generator().manual_seed(int(seed) & (2**63 - 1))
        with torch.random.fork_rng():
            torch.manual_seed(int(seed) & (2**63 - 1))
            self.enc1 = nn.Linear(num_classes, AE_HIDDEN)
            self.enc2 = nn.Linear(AE_HIDDEN, dim)
            self.dec1 = nn.Linear(dim, AE_HIDDEN)
            self.dec2 = nn.Linear(AE_HIDDEN, num_classes)
            a1, a2 = ASSESSOR_DIMS
            self.assessor_net = nn.Sequential(
                nn.Linear(num_classes, a1), nn.ReLU(), nn.Linear(a1, a2), nn.ReLU(),
                nn.Linear(a2, 1),
            )  # fmt: skip
        ae_params = [
            p for m in (self.enc1, self.enc2, self.dec1, self.dec2) for p in m.parameters()
        ]
        self.ae_opt = torch.optim.Adam(ae_params, lr=settings.ae_lr)
        self.as_opt = torch.optim.Adam(self.assessor_net.parameters(), lr=settings.ae_lr)
        self.noise: torch.Tensor | None = None
        self.tie_rng = np.random.default_rng(int(seed) & (2**63 - 1))  # potential links' ties

    # ---------------------------------------------------------------- the networks
    def _noise(self, n: int, idx: torch.Tensor) -> torch.Tensor:
        if self.settings.noise_input == "resampled":
            return torch.randn(len(idx), self.c, generator=self.gen)
        if self.noise is None or len(self.noise) != n:
            self.noise = torch.randn(n, self.c, generator=self.gen)
        return self.noise[idx]

    def _code(self, s: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.enc1(s))

    def _decode(self, z: torch.Tensor) -> torch.Tensor:
        """``h(f(S))`` from the encoder's hidden code; factored when X̄ is linear in z."""
        if self.settings.feature_act == "none":
            w = self.enc2.weight.t() @ self.dec1.weight.t()  # [16, 16]: X̄ never materialised
            pre = z @ w + self.enc2.bias @ self.dec1.weight.t() + self.dec1.bias
        else:
            pre = self.dec1(torch.sigmoid(self.enc2(z)))
        return torch.softmax(self.dec2(torch.relu(pre)), dim=-1)

    def _assess(self, h: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.assessor_net(h)).squeeze(-1).clamp(_EPS, 1 - _EPS)

    # ---------------------------------------------------------------- training
    def fit(self, h: np.ndarray) -> dict[str, float]:
        """``ae_iterations`` outer iterations of T_ae AE steps and T_as assessor steps on
        mini-batches of the rows of ``h``; returns the last losses."""
        st = self.settings
        real = torch.as_tensor(np.asarray(h, np.float32))
        n = len(real)
        if n == 0:
            return {}
        mask = (real > 1.0 / self.c).float() if st.negative_sampling else torch.ones_like(real)
        losses = {"ae": float("nan"), "assessor": float("nan")}
        for _ in range(st.ae_iterations):
            for _ in range(st.ae_steps):
                idx = self._batch(n)
                self.ae_opt.zero_grad()
                loss = self._ae_loss(
                    real[idx], mask[idx], self._decode(self._code(self._noise(n, idx)))
                )
                loss.backward()
                self.ae_opt.step()
                losses["ae"] = float(loss.detach())
            if not st.assessor:
                continue
            for _ in range(st.as_steps):
                idx = self._batch(n)
                with torch.no_grad():
                    fake = self._decode(self._code(self._noise(n, idx)))
                self.as_opt.zero_grad()
                loss = self._as_loss(real[idx] * mask[idx], fake * mask[idx])
                loss.backward()
                self.as_opt.step()
                losses["assessor"] = float(loss.detach())
        return losses

    def _batch(self, n: int) -> torch.Tensor:
        if n <= self.settings.ae_batch:
            return torch.arange(n)
        return torch.randperm(n, generator=self.gen)[: self.settings.ae_batch]

    def _ae_loss(self, real: torch.Tensor, mask: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
        st = self.settings
        if not st.assessor:
            return ((real - fake) ** 2).sum(dim=1).mean()
        l2 = (((real - fake) * (1 - mask)) ** 2).sum(dim=1).mean()
        score = self._assess(fake * mask)
        adv = -torch.log(score).mean() if st.gan_loss == "bce" else torch.log(1 - score).mean()
        return adv + l2

    def _as_loss(self, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
        d_real, d_fake = self._assess(real), self._assess(fake)
        if self.settings.gan_loss == "bce":
            return -(torch.log(d_real) + torch.log(1 - d_fake)).mean()
        return (torch.log(1 - d_real) + torch.log(d_fake)).mean()

    # ---------------------------------------------------------------- generation
    @torch.no_grad()
    def generate(self, n: int, rows: np.ndarray) -> Factored | np.ndarray:
        """Generated features ``x̄_v`` of the given rows: :class:`Factored` (``Z``,
        ``Wₑ``, ``bₑ``) for a linear encoder output, else dense ``[len(rows), d]``."""
        idx = torch.as_tensor(np.asarray(rows, dtype=np.int64))
        z = self._code(self._noise(n, idx))
        if self.settings.feature_act == "none" and self.settings.factored:
            w = self.enc2.weight.t().numpy().astype(np.float32)
            return Factored(
                z.numpy().astype(np.float32), w, self.enc2.bias.numpy().astype(np.float32)
            )
        x = self.enc2(z)
        if self.settings.feature_act == "sigmoid":
            x = torch.sigmoid(x)
        return x.numpy().astype(np.float32)
