"""User-level DP for a secure aggregation's rows: bounded uploads, noisy counts and sums.

Under a secure aggregation the server learns each round's per-row counts (which rows the
cohort uploaded, and how often) and sums. Across rounds the counts narrow down every user's
rated items (:mod:`attacks.row_counts`). This mechanism puts everything the server learns of
a round under one Gaussian mechanism with respect to one user's whole upload:

* each user uploads at most ``rows`` m item rows a round (a uniform sample of its rows
  otherwise) and clips each part of what the sums add to its own L2 bound (per-part
  clipping, as McMahan et al., ICLR 2018, clip per layer): its item rows times w_u to
  ``clip_items``, its user rows to ``clip_users``, its model gradients to ``clip_model``
  (:func:`bound_uploads`);
* phase 1 releases the count of **every** item row plus N(0, (z·√(2m))²) noise (replacing a
  user's ≤ m indicators moves the count vector by at most √(2m) in L2); the support is the
  rows whose noisy count reaches ``threshold`` noise stds (post-processing);
* phase 2 releases the sums over that support, the user rows and the model, each part plus
  N(0, (z·2C_part)²) noise per coordinate (replacing a user's upload moves a part by
  ≤ 2C_part); the item averages divide by phase 1's noisy counts (phase 2's own count
  columns are not sent).

Each of the k released parts (counts, item rows, user rows where the method uploads them,
model) has noise z times its sensitivity, so a round is one Gaussian mechanism of noise
multiplier z/√k with respect to replacing one user's data; a user composes it once per
round it joins (RDP accountant; no amplification by sampling: the server sees the cohorts,
and a malicious one chooses them). Users' own user rows (FeSoG under ``social_rows =
own``) and the uniform averages' weights are counts of cohort members, which the server
knows anyway: their counts carry no noise.

Noise: under a real transport each of the B cohort members adds its share N(0, σ²/B) before
masking, so the sum carries N(0, σ²). A sum of m shares, c of them known to the server
(colluding members, Sybils included), keeps σ²·(m − c)/B: the run's ε takes m = B against
an honest-but-curious server and, against a malicious one (which may claim dropouts), the
fewest shares the transport's members enforce in any sum it opens, with c = ``colluding``
(the trainer's ``row_dp_claim``). ``ideal`` draws the sum of the shares at once. Shares
come from a secret source (:func:`protocols.dp.rng.make_rng`) per round, never replayed on
resume.
Deviation from FeSoG and FedGNN: neither paper bounds or noises the aggregate.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from securefgl.algorithms.recommendation.settings import RowDPConfig
from securefgl.algorithms.recommendation.uploads import Uploads

__all__ = ["RowDPConfig", "bound_uploads", "part_norms", "shares", "support_of"]


def _slot_sq_norms(
    slot: torch.Tensor, rows: torch.Tensor, scale: torch.Tensor, b: int
) -> torch.Tensor:
    out = torch.zeros(b, dtype=torch.float64)
    if rows.numel():
        out.index_add_(0, slot, (rows.double() * scale[slot].unsqueeze(1)).pow(2).sum(1))
    return out


def part_norms(up: Uploads) -> dict[str, torch.Tensor]:
    """Each user's L2 norm of each part the sums add: w_u·item rows, a_u·user rows,
    a_u·model."""
    w, a = up.weight.double(), up.averaging_weight().double()
    model = torch.zeros(up.n, dtype=torch.float64)
    for v in up.model.values():
        model += (v.reshape(up.n, -1).double() * a.unsqueeze(1)).pow(2).sum(1)
    return {
        "items": _slot_sq_norms(up.item_slot, up.item_grad, w, up.n).sqrt(),
        "users": _slot_sq_norms(up.user_slot, up.user_grad, a, up.n).sqrt(),
        "model": model.sqrt(),
    }


def keep_items(up: Uploads, keep: torch.Tensor) -> Uploads:
    """``up`` with only the item rows where ``keep`` holds."""
    return up.with_grads(
        item_slot=up.item_slot[keep],
        item_idx=up.item_idx[keep],
        item_grad=up.item_grad[keep],
        item_pseudo=up.item_pseudo[keep],
    )


def bound_uploads(up: Uploads, cfg: RowDPConfig, rng: np.random.Generator) -> Uploads:
    """Each user's upload with at most ``cfg.rows`` item rows (a uniform sample) and each
    part (:func:`part_norms`) scaled to its L2 bound."""
    counts = torch.bincount(up.item_slot, minlength=up.n)
    if up.item_idx.numel() and int(counts.max()) > cfg.rows:
        # a random rank within each user's rows; keep the first m of each user
        slot = up.item_slot.numpy()
        order = np.lexsort((rng.random(slot.size), slot))
        starts = np.concatenate([[0], np.cumsum(counts.numpy())[:-1]])
        rank = np.empty(order.size, np.int64)
        rank[order] = np.arange(order.size) - starts[slot[order]]
        up = keep_items(up, torch.from_numpy(rank < cfg.rows))
    # a margin below the bound keeps the float32 rounding of the scaled rows inside it
    shrink = {
        part: torch.clamp(getattr(cfg, f"clip_{part}") * (1 - 1e-6) / norm.clamp_min(1e-300),
                          max=1.0).float()
        for part, norm in part_norms(up).items()
    }  # fmt: skip
    return up.with_grads(
        item_grad=up.item_grad * shrink["items"][up.item_slot].unsqueeze(1),
        user_grad=up.user_grad * shrink["users"][up.user_slot].unsqueeze(1)
        if up.user_grad.numel() else up.user_grad,
        model={k: v * shrink["model"].view(-1, *([1] * (v.dim() - 1)))
               for k, v in up.model.items()},
    )  # fmt: skip


def shares(rng: np.random.Generator, std: float, members: int, shape: tuple[int, ...]
           ) -> np.ndarray:  # fmt: skip
    """Each of ``members`` users' noise share, N(0, std²/members) each: [members, *shape]."""
    return rng.normal(0.0, std / math.sqrt(members), size=(members, *shape))


def support_of(noisy_counts: torch.Tensor, cfg: RowDPConfig) -> torch.Tensor:
    """The item rows whose noisy count reaches ``threshold`` count-noise stds (a negative
    threshold keeps rows nobody uploaded: more noise, no more leak; the averages divide by
    a count of at least 1)."""
    return torch.nonzero(noisy_counts >= cfg.threshold * cfg.count_std).flatten()
