"""FedGLS's losses (Fu et al., TMLR, Sec. 4.2-4.3).

* :func:`contrastive_loss` (Eq. 8-9): anchor ``z_i`` only, positive ``(z_i, h_i)``,
  negatives ``(z_i, h_j)`` and ``(z_i, z_j)`` for ``j ≠ i``; the positive is NOT in the
  denominator (unlike NT-Xent); cosine similarity / τ; mean over all nodes.
* :func:`kd_loss` (Eq. 11): ``KL(teacher ‖ student)`` on class distributions, summed over
  all nodes (``"batchmean"``: divided by n), no temperature; the caller detaches the
  teacher and keeps θ_c out of the student's gradient.
* :func:`ce_loss` (Eq. 10): mean cross-entropy over the labelled (training) nodes.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def contrastive_loss(z: torch.Tensor, h: torch.Tensor, tau: float) -> torch.Tensor:
    """``(1/n) Σ_i ℓ_i(Z, H)`` of Eq. 8-9 (needs n ≥ 2)."""
    n = z.shape[0]
    if n < 2:
        raise ValueError("the contrastive loss needs at least two nodes")
    z, h = F.normalize(z, dim=1), F.normalize(h, dim=1)
    zh, zz = z @ h.T / tau, z @ z.T / tau
    eye = torch.eye(n, dtype=torch.bool)
    negatives = torch.cat([zh.masked_fill(eye, -torch.inf), zz.masked_fill(eye, -torch.inf)], 1)
    return (torch.logsumexp(negatives, dim=1) - zh.diagonal()).mean()


def kd_loss(
    student_logits: torch.Tensor, teacher_probs: torch.Tensor, reduction: str = "sum"
) -> torch.Tensor:
    """``Σ_i KL(p_teacher,i ‖ softmax(student_i))`` (or its mean with ``"batchmean"``)."""
    return F.kl_div(F.log_softmax(student_logits, dim=-1), teacher_probs, reduction=reduction)


def ce_loss(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits[mask], y[mask])
