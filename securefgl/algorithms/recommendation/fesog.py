"""FeSoG (Liu, Yang, Fan, Peng, Yu, ACM TIST 2022): federated social recommendation with a
local relational GAT, server-held embeddings, LDP and pseudo-item sampling.

Per user n (one client), with e = server-held embeddings:

* social GAT: o_np = LeakyReLU(a_uᵀ[W_u e_n ‖ W_u e_p]), α = softmax_p, f_u = Σ_p α V_u e_p
* item GAT:   v_nk = LeakyReLU(a_iᵀ[W_i e_n ‖ W_i e_k]), β = softmax_k, f_i = Σ_k β V_i e_k
* relational: γ_r = softmax_r(cᵀ[f_r ‖ v_r]) over r ∈ {social, item, self} with f_s = e_n,
  user representation h_n = Σ_r γ_r f_r; rating r̂_nk = h_n · e_k.

This mirrors the official code (``FeSoG/model.py``, ``GAT.py``: separate value matrix
V = ``W_1``, LeakyReLU slope 0.1, the self term uses the raw embedding, a user without
social links gets f_u = 0), the per-user loss √mean((r̂ − r)²) over real + pseudo items, the
pseudo labels round(clip(r̂, r_min, r_max)) computed with the current global model before
the step, and the server update of ``FeSoG/server.py`` (see :mod:`.aggregation`).
Deviations: the users of a round are computed as one batched tensor program (each user's
gradient is its own: per-user parameter copies and per-occurrence embedding leaves, checked
against single-user runs in tests); LDP noise is drawn per coordinate (:mod:`.ldp`). Under a
secure aggregation, by default (``averages`` and ``social_rows`` = auto), user rows and
model parameters are averaged uniformly and each user uploads only its own user row, its
neighbours' embeddings entering its representation as constants (the family's README,
"What the counts reveal").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from securefgl.algorithms.recommendation.pseudo import sample_non_interacted
from securefgl.algorithms.recommendation.segment import (
    bvec,
    grad_of,
    per_user_copies,
    segment_softmax,
    segment_sum,
)
from securefgl.algorithms.recommendation.uploads import Uploads
from securefgl.data.rating_views import ClientViews

LEAKY = 0.1


def init_fesog(n_users: int, n_items: int, d: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Server state: embeddings ~ N(0, 1) and GAT / relation parameters (as the reference)."""

    def xavier(*shape: int) -> torch.Tensor:
        bound = (6.0 / (shape[0] + shape[-1])) ** 0.5
        return (torch.rand(*shape, generator=gen) * 2 - 1) * bound

    state = {
        "user_emb": torch.randn(n_users, d, generator=gen),
        "item_emb": torch.randn(n_items, d, generator=gen),
    }
    for r in ("u", "i"):
        state[f"W_{r}"] = xavier(d, d)
        state[f"a_{r}"] = xavier(2 * d, 1).view(-1)
        state[f"V_{r}"] = torch.randn(d, d, generator=gen)
    for r in ("u", "i", "s"):
        state[f"rel_{r}"] = torch.randn(d, generator=gen)
    state["c"] = torch.randn(2 * d, generator=gen)
    return state


MODEL_KEYS = ("W_u", "a_u", "V_u", "W_i", "a_i", "V_i", "rel_u", "rel_i", "rel_s", "c")


def _gat(
    P: dict[str, torch.Tensor],
    r: str,
    e_self: torch.Tensor,
    slot: torch.Tensor,
    e_nb: torch.Tensor,
    b: int,
) -> torch.Tensor:
    d = e_self.shape[1]
    W, a, V = P[f"W_{r}"], P[f"a_{r}"], P[f"V_{r}"]
    if slot.numel() == 0:
        return e_self.new_zeros(b, d)
    wh = torch.einsum("bd,bde->be", e_self, W)
    wn = bvec(e_nb, W[slot])
    score = (wh[slot] * a[slot, :d]).sum(1) + (wn * a[slot, d:]).sum(1)
    alpha = segment_softmax(F.leaky_relu(score, LEAKY), slot, b)
    return segment_sum(alpha.unsqueeze(1) * bvec(e_nb, V[slot]), slot, b)


def user_representation(
    P: dict[str, torch.Tensor],
    e_self: torch.Tensor,
    soc_slot: torch.Tensor,
    e_soc: torch.Tensor,
    item_slot: torch.Tensor,
    e_item: torch.Tensor,
) -> torch.Tensor:
    """h_n for a batch of users; ``P`` holds per-user parameters [B, ...]."""
    b, d = e_self.shape
    f_u = _gat(P, "u", e_self, soc_slot, e_soc, b)
    f_i = _gat(P, "i", e_self, item_slot, e_item, b)
    c = P["c"]

    def logit(f: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        return (c[:, :d] * f).sum(1) + (c[:, d:] * rel).sum(1)

    logits = torch.stack(
        [logit(f_u, P["rel_u"]), logit(f_i, P["rel_i"]), logit(e_self, P["rel_s"])]
    )
    g = torch.softmax(logits, dim=0)
    return g[0].unsqueeze(1) * f_u + g[1].unsqueeze(1) * f_i + g[2].unsqueeze(1) * e_self


@dataclass
class FeSoGConfig:
    dim: int = 8
    pseudo_items: int = 10  # q ("negative_sample" in the reference)
    #: average user rows and model parameters uniformly, not by w_u (:mod:`.aggregation`)
    uniform_averages: bool = False
    #: upload the neighbours' user rows too (FeSoG); False: only the user's own row, the
    #: neighbours' embeddings entering its representation as constants
    neighbour_rows: bool = True


def _batch_inputs(
    views: ClientViews, users: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    slot, item, rating = views.gather(users, "train")
    s_slot, s_nbr = views.gather_social(users)
    return (
        torch.from_numpy(slot),
        torch.from_numpy(item),
        torch.from_numpy(rating),
        torch.from_numpy(s_slot),
        torch.from_numpy(s_nbr),
    )


def representations(
    state: dict[str, torch.Tensor], views: ClientViews, users: np.ndarray
) -> torch.Tensor:
    """Users' representations under the current global state (no gradient)."""
    slot, item, _, s_slot, s_nbr = _batch_inputs(views, users)
    b = len(users)
    P = {k: state[k].unsqueeze(0).expand(b, *state[k].shape) for k in MODEL_KEYS}
    with torch.no_grad():
        return user_representation(
            P,
            state["user_emb"][torch.as_tensor(users)],
            s_slot,
            state["user_emb"][s_nbr],
            slot,
            state["item_emb"][item],
        )


def local_gradients(
    state: dict[str, torch.Tensor],
    views: ClientViews,
    users: np.ndarray,
    cfg: FeSoGConfig,
    rng: np.random.Generator,
) -> Uploads:
    """Each sampled user's FeSoG gradients from its own ratings, links and pseudo items."""
    b = len(users)
    slot, item, rating, s_slot, s_nbr = _batch_inputs(views, users)
    # pseudo items: q unrated items labelled with the rounded local prediction
    p_slot, p_item = sample_non_interacted(
        slot.numpy(), item.numpy(), b, views.n_items, cfg.pseudo_items, rng
    )
    p_slot_t, p_item_t = torch.from_numpy(p_slot), torch.from_numpy(p_item)
    if p_slot.size:
        h0 = representations(state, views, users)
        pred0 = (h0[p_slot_t] * state["item_emb"][p_item_t]).sum(1)
        p_label = pred0.clamp(views.rating_min, views.rating_max).round()
    else:
        p_label = torch.zeros(0)
    # leaves: per-user parameter copies and per-occurrence embedding rows
    P = per_user_copies({k: state[k] for k in MODEL_KEYS}, b)
    e_self = state["user_emb"][torch.as_tensor(users)].clone().requires_grad_(True)
    e_soc = state["user_emb"][s_nbr].clone().requires_grad_(cfg.neighbour_rows)
    all_slot = torch.cat([slot, p_slot_t])
    all_item = torch.cat([item, p_item_t])
    e_all = state["item_emb"][all_item].clone().requires_grad_(True)
    n_real = slot.numel()
    h = user_representation(P, e_self, s_slot, e_soc, slot, e_all[:n_real])
    pred = (h[all_slot] * e_all).sum(1)
    label = torch.cat([rating, p_label])
    mse = segment_sum((pred - label) ** 2, all_slot, b)
    cnt = torch.bincount(all_slot, minlength=b).clamp_min(1)
    loss_u = torch.sqrt(mse / cnt + 1e-12)
    loss_u.sum().backward()
    user_slot, user_idx, user_grad = torch.arange(b), torch.as_tensor(users), grad_of(e_self)
    if cfg.neighbour_rows:
        user_slot = torch.cat([s_slot, user_slot])
        user_idx = torch.cat([s_nbr, user_idx])
        user_grad = torch.cat([grad_of(e_soc), user_grad])
    return Uploads(
        users=np.asarray(users),
        weight=torch.bincount(all_slot, minlength=b).float(),
        average_weight=torch.ones(b) if cfg.uniform_averages else None,
        model={k: grad_of(P[k]) for k in MODEL_KEYS},
        item_slot=all_slot,
        item_idx=all_item,
        item_grad=grad_of(e_all),
        item_pseudo=torch.cat(
            [torch.zeros(n_real, dtype=torch.bool), torch.ones(p_slot.size, dtype=torch.bool)]
        ),
        user_slot=user_slot,
        user_idx=user_idx,
        user_grad=user_grad,
        loss=loss_u.detach(),
    )


def predict(
    state: dict[str, torch.Tensor],
    views: ClientViews,
    users: np.ndarray,
    items: np.ndarray,
    chunk: int = 4096,
) -> np.ndarray:
    """r̂ for (user, item) pairs: each user's representation from its own local graph."""
    uniq, inv = np.unique(users, return_inverse=True)
    reps = (
        torch.cat(
            [representations(state, views, uniq[s : s + chunk]) for s in range(0, uniq.size, chunk)]
        )
        if uniq.size
        else torch.zeros(0, state["item_emb"].shape[1])
    )
    with torch.no_grad():
        out = (reps[torch.from_numpy(inv)] * state["item_emb"][torch.from_numpy(items)]).sum(1)
    return out.numpy()
