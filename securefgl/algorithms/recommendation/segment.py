"""Segment operations that keep batched per-user programs separate (keyed by batch slot)."""

from __future__ import annotations

from itertools import pairwise

import torch
from torch_geometric.utils import softmax as _segment_softmax


def segment_softmax(score: torch.Tensor, seg: torch.Tensor, n: int) -> torch.Tensor:
    """Softmax of ``score`` within each segment ``seg`` (0..n-1)."""
    return _segment_softmax(score, seg, num_nodes=n)


def segment_sum(x: torch.Tensor, seg: torch.Tensor, n: int) -> torch.Tensor:
    out = x.new_zeros((n, *x.shape[1:]))
    return out.index_add(0, seg, x)


def segment_mean(x: torch.Tensor, seg: torch.Tensor, n: int) -> torch.Tensor:
    cnt = torch.bincount(seg, minlength=n).clamp_min(1).to(x.dtype)
    return segment_sum(x, seg, n) / cnt.view(-1, *([1] * (x.dim() - 1)))


def segment_outer(x: torch.Tensor, y: torch.Tensor, seg: torch.Tensor, n: int) -> torch.Tensor:
    """Σ_{j in segment s} x_jᵀ y_j for each segment: [n, d, e], one matmul per segment (never
    one d×e matrix per row)."""
    order = torch.argsort(seg, stable=True)
    bounds = torch.searchsorted(seg[order], torch.arange(n + 1)).tolist()
    xs, ys = x[order], y[order]
    return torch.stack([xs[lo:hi].T @ ys[lo:hi] for lo, hi in pairwise(bounds)])


def per_user_copies(shared: dict[str, torch.Tensor], b: int) -> dict[str, torch.Tensor]:
    """One leaf copy of every model parameter per batch slot, so that backward of the
    summed per-user losses yields each user's own gradient in row ``slot``."""
    return {
        k: v.detach().unsqueeze(0).repeat(b, *([1] * v.dim())).requires_grad_(True)
        for k, v in shared.items()
    }


def grad_of(leaf: torch.Tensor) -> torch.Tensor:
    """A leaf's gradient, zero when no loss term reached it (e.g. a batch without
    social links leaves the social attention parameters out of the graph)."""
    return torch.zeros_like(leaf) if leaf.grad is None else leaf.grad.detach()


def expanded(shared: dict[str, torch.Tensor], b: int) -> dict[str, torch.Tensor]:
    """Broadcast views of shared parameters (centralised training: gradients are summed)."""
    return {k: v.unsqueeze(0).expand(b, *v.shape) for k, v in shared.items()}


def bvec(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Row-wise ``x[n] @ w[n]`` for ``x`` [n, d] and per-row matrices ``w`` [n, d, e]."""
    return torch.einsum("nd,nde->ne", x, w)
