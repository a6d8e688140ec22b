"""FedStruct's structure gradient taken at the output of ``g_θs`` (``structure_grads =
"output"``), the chain rule through ``g_θs`` applied after aggregation.

With Hop2Vec, Prop. 2 has each client upload ``∇_S L_i`` (``n × d_s``) and ``∇_θs L_i``.
Both are one vector-Jacobian product of ``G = g_θs(S)`` away from ``E_i = ∂L_i/∂G``
(``n × c``, non-zero on the column support of the client's Ā rows): ``∇_S L_i = J_S^T E_i``,
``∇_θs L_i = J_θs^T E_i``. The product is linear in ``E_i`` and ``J`` is the same at every
client when they share ``(θ_s, S)`` (they do: the global model) and the structure MLP's
dropout masks. So a client uploads ``(∇_θf L_i ‖ E_i)`` and whoever applies the optimizer
expands the aggregate once: ``(Σ w_i ∇_θf L_i ‖ J_θs^T ΣE ‖ J_S^T ΣE)`` equals the sum of
the paper's uploads. On Cora with ``d_s = 256`` and ``c = 7`` that is about 7× fewer values.

What the aggregate reveals does not grow: the paper's aggregate is a function of ``ΣE`` and
the global model, and ``ΣE`` is recovered from it wherever ``J_S`` has full column rank.

Deviation: the structure MLP's dropout masks are drawn per round and node row from the
experiment seed, common to all clients (:func:`round_masks`), instead of from each client's
own dropout stream; the feature MLP's dropout stays per client. Dropout is training
randomness, not privacy noise.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn.utils import parameters_to_vector

from protocols.dp.rng import make_rng
from securefgl.algorithms.fedstruct.model import FedStructModel

__all__ = ["expand_update", "round_masks", "upload_dim"]


def _feature_size(model: FedStructModel) -> int:
    """``|θ_f|``: the feature MLP's parameters, first in the flat model."""
    return sum(p.numel() for p in model.feature_mlp.parameters())


def upload_dim(model: FedStructModel, num_nodes: int, num_classes: int) -> int:
    """Values a client uploads: ``|θ_f| + n·c``."""
    return _feature_size(model) + num_nodes * num_classes


def round_masks(
    model: FedStructModel, seed: int, round_idx: int, num_nodes: int
) -> list[torch.Tensor]:
    """The structure MLP's dropout masks of ``round_idx`` (one ``[n, width]`` 0/1 tensor
    per dropout layer, row = opaque node id), the same at every client."""
    widths = model.structure_dropout_widths()
    if not widths:
        return []
    gen = torch.Generator().manual_seed(
        int(make_rng(seed, "fedstruct-structure-dropout", round_idx).integers(2**63 - 1))
    )
    keep = 1.0 - model.dropout
    return [torch.bernoulli(torch.full((num_nodes, w), keep), generator=gen) for w in widths]


def expand_update(
    model: FedStructModel,
    s: torch.Tensor,
    update: np.ndarray,
    masks: list[torch.Tensor],
) -> np.ndarray:
    """The paper's update ``(u_θf ‖ u_θs [‖ vec u_S])`` from an output-gradient one
    ``(u_θf ‖ vec E)``, at the model's current ``(θ_s, S)`` (``S`` part only when ``s``
    requires a gradient: Hop2Vec)."""
    mlp = model.structure_mlp
    if mlp is None:
        raise ValueError("output gradients need the structure MLP g_θs")
    n, d = s.shape
    c = mlp[-1].out_features
    f_dim = update.size - n * c
    if f_dim != _feature_size(model):
        raise ValueError(f"an output-gradient update has {update.size} values, not |θ_f| + n·c")
    e = torch.as_tensor(update[f_dim:], dtype=torch.float32).view(n, c)
    rows = torch.nonzero(e.abs().sum(dim=1)).squeeze(1)
    params = list(mlp.parameters())
    learnable = s.requires_grad
    s_rows = s.detach()[rows].clone().requires_grad_(learnable)
    was_training = model.training
    model.train()
    with torch.enable_grad():
        out = model.structure_output(s_rows, [m[rows] for m in masks])
        inputs = [*params, s_rows] if learnable else params
        grads = torch.autograd.grad(out, inputs, grad_outputs=e[rows], allow_unused=True)
    model.train(was_training)
    u_theta_s = parameters_to_vector(
        [g if g is not None else torch.zeros_like(p) for g, p in zip(grads, params, strict=False)]
    )
    parts = [update[:f_dim].astype(np.float32), u_theta_s.numpy()]
    if learnable:
        u_s = torch.zeros(n, d)
        u_s[rows] = grads[-1]
        parts.append(u_s.reshape(-1).numpy())
    return np.concatenate(parts)  # float32, what the global optimizer steps with
