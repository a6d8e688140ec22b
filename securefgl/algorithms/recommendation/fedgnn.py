"""FedGNN (Wu, Wu, Cao, Huang, Xie, arXiv 2102.04925, FL-ICML'21): federated GNN
recommendation with client-held user embeddings, LDP, Gaussian pseudo-item gradients and
third-party graph expansion.

User u's local graph: u, its rated items k and, after expansion (:mod:`.expansion`),
anonymous neighbour users v attached to co-rated items (fixed embeddings). An item-level GAT
(one head) over {e_k} ∪ {e_v} gives h_k, a user-level GAT over {e_u} ∪ {h_k} gives h_u;
rating ``r̂_{u,t} = h_u · e_t``. The user embedding is updated locally and never leaves the
client except to the third party. Uploaded: item-embedding gradients of the rated items,
``pseudo_items`` Gaussian rows and model gradients; LDP (ε = 2δ/λ per coordinate) is
applied by the trainer. Deviations: one GAT layer per level (LeakyReLU slope 0.1); FeSoG's
per-user RMSE loss instead of the MSE (which diverges within ten rounds with plain SGD at
lr 0.1 on FilmTrust); embedding dimension 8 like FeSoG's code; neighbour lists capped at
``max_neighbors`` per item.

``arch="star"`` is the paper's own local graph (§3.2): one GAT layer at the user node over
itself, its rated items and its neighbour users, which are attached to the user (footnote 9),
not to the items; with ``loss="mse"`` (the paper's loss), dimension 256, SGD lr 0.01, 128
users per round, M = 1000 and δ = 0.1, λ = 0.2 it is the paper's §4.1 setting
(``python -m benchmarks.reproduce_recommendation``). Dropout (0.2 in the paper, placement not
stated) is not applied. ``loss="sse"`` (ours) uploads the item rows of the sum of squared
errors over the user's ratings instead of their mean: with a per-user mean, and every user
weighted 1 in the per-item average, a rater of n items moves each item by 1/n of a
per-rating step. The user's own embedding still steps on the mean (on the sum, a user with
hundreds of ratings takes unbounded local steps: a run diverged so on MovieLens-100K).

Flagged deviations for items without training ratings, whose embeddings no real gradient
ever reaches (off by default): ``offset="user-mean"`` predicts ``m_u + h_u · e_t`` with
``m_u`` the user's own mean training rating (computed locally: no release), and
``item_std`` scales the items' initial embeddings (N(0, item_std²); the paper gives none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from securefgl.algorithms.recommendation.expansion import ExpansionResult
from securefgl.algorithms.recommendation.pseudo import (
    gaussian_pseudo_gradients,
    sample_non_interacted,
)
from securefgl.algorithms.recommendation.segment import (
    bvec,
    grad_of,
    per_user_copies,
    segment_outer,
    segment_softmax,
    segment_sum,
)
from securefgl.algorithms.recommendation.settings import ARCHS, LOSSES, OFFSETS
from securefgl.algorithms.recommendation.uploads import Uploads
from securefgl.data.rating_views import ClientViews

LEAKY = 0.1
MODEL_KEYS = ("W_1", "a_1", "W_2", "a_2")


def model_keys(arch: str) -> tuple[str, ...]:
    """The GAT parameters of ``arch`` (the star graph has one layer)."""
    if arch not in ARCHS:
        raise ValueError(f"unknown FedGNN architecture {arch!r}; expected one of {ARCHS}")
    return MODEL_KEYS if arch == "two-level" else MODEL_KEYS[:2]


@dataclass
class FedGNNConfig:
    dim: int = 8
    pseudo_items: int = 10  # M
    max_neighbors: int = 5
    offset: str = "none"  # or "user-mean" (a flagged deviation, see the module docstring)
    arch: str = "two-level"  # or "star" (the paper's local graph)
    loss: str = "rmse"  # per-user RMSE (FeSoG's), or the paper's MSE



def user_offsets(views: ClientViews, users: np.ndarray, offset: str) -> torch.Tensor:
    """Each user's rating offset: 0, or its own mean training rating (``user-mean``)."""
    if offset not in OFFSETS:
        raise ValueError(f"unknown rating offset {offset!r}; expected one of {OFFSETS}")
    if offset == "none":
        return torch.zeros(len(users))
    slot, _, rating = views.gather(np.asarray(users, np.int64), "train")
    total = np.bincount(slot, weights=rating, minlength=len(users))
    count = np.bincount(slot, minlength=len(users))
    return torch.from_numpy(total / np.maximum(count, 1)).float()


def init_fedgnn(
    n_users: int,
    n_items: int,
    d: int,
    gen: torch.Generator,
    item_std: float = 1.0,
    arch: str = "two-level",
) -> dict[str, torch.Tensor]:
    """Server state (item embeddings, GAT weights) and the clients' user embeddings."""

    def xavier(*shape: int) -> torch.Tensor:
        bound = (6.0 / (shape[0] + shape[-1])) ** 0.5
        return (torch.rand(*shape, generator=gen) * 2 - 1) * bound

    state = {
        "item_emb": item_std * torch.randn(n_items, d, generator=gen),
        "local_user_emb": torch.randn(n_users, d, generator=gen),  # row u lives on client u
        "W_1": xavier(d, d) + torch.eye(d),
        "a_1": xavier(2 * d, 1).view(-1),
        "W_2": xavier(d, d) + torch.eye(d),
        "a_2": xavier(2 * d, 1).view(-1),
    }
    unused = set(MODEL_KEYS) - set(model_keys(arch))
    return {k: v for k, v in state.items() if k not in unused}


def _attend(
    W: torch.Tensor,
    a: torch.Tensor,
    centre: torch.Tensor,
    members: torch.Tensor,
    group: torch.Tensor,
    n: int,
) -> torch.Tensor:
    """Σ α W x over each group's members; W, a given per member row, or once for all
    (2-D ``W``: the shared model, as in evaluation, without a d×d copy per row)."""
    d = centre.shape[1]
    if W.dim() == 2:
        wc, wx = (centre @ W)[group], members @ W
        s = F.leaky_relu(wc @ a[:d] + wx @ a[d:], LEAKY)
    else:
        wc, wx = bvec(centre[group], W), bvec(members, W)
        s = F.leaky_relu((wc * a[:, :d]).sum(1) + (wx * a[:, d:]).sum(1), LEAKY)
    alpha = segment_softmax(s, group, n)
    return segment_sum(alpha.unsqueeze(1) * wx, group, n)


def user_representation(
    P: dict[str, torch.Tensor],
    e_user: torch.Tensor,
    item_slot: torch.Tensor,
    e_item: torch.Tensor,
    nb_occ: torch.Tensor,
    e_nb: torch.Tensor,
) -> torch.Tensor:
    """The two attention layers; ``P`` holds one parameter copy per batch slot, or the
    shared parameters themselves (2-D ``W``)."""
    b, k = e_user.shape[0], e_item.shape[0]

    def rows(key: str, slot: torch.Tensor) -> torch.Tensor:
        return P[key] if P["W_1"].dim() == 2 else P[key][slot]

    occ = torch.arange(k)
    members = torch.cat([e_item, e_nb])
    group = torch.cat([occ, nb_occ])
    mslot = item_slot[group]
    h_item = _attend(rows("W_1", mslot), rows("a_1", mslot), e_item, members, group, k)
    members = torch.cat([e_user, h_item])
    group = torch.cat([torch.arange(b), item_slot])
    return _attend(rows("W_2", group), rows("a_2", group), e_user, members, group, b)


def star_members(
    e_user: torch.Tensor,
    item_slot: torch.Tensor,
    e_item: torch.Tensor,
    nb_occ: torch.Tensor,
    e_nb: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The star graph's nodes (the user itself first, its items, its neighbour users) and
    the user each belongs to."""
    b = e_user.shape[0]
    group = torch.cat([torch.arange(b), item_slot, item_slot[nb_occ]])
    return torch.cat([e_user, e_item, e_nb]), group


def star_attend(wx: torch.Tensor, a: torch.Tensor, group: torch.Tensor, b: int) -> torch.Tensor:
    """h_u = Σ_j α_j W x_j over the user's star, α = softmax_j LeakyReLU(aᵀ[W e_u ‖ W x_j]);
    ``wx`` = W x_j per member (the user's own rows first), ``a`` given per member row."""
    d = wx.shape[1]
    s = F.leaky_relu((wx[group] * a[:, :d]).sum(1) + (wx * a[:, d:]).sum(1), LEAKY)
    alpha = segment_softmax(s, group, b)
    return segment_sum(alpha.unsqueeze(1) * wx, group, b)


def _inputs(
    views: ClientViews, users: np.ndarray, expansion: ExpansionResult | None
) -> tuple[torch.Tensor, ...]:
    slot, pos = views.train.positions(np.asarray(users, np.int64))
    item = views.train.col[pos]
    rating = views.train.val[pos]
    if expansion is None:
        nb_occ, nb = np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    else:
        nb_occ, nb = expansion.gather(pos)
    return (
        torch.from_numpy(slot),
        torch.from_numpy(item),
        torch.from_numpy(rating),
        torch.from_numpy(nb_occ),
        torch.from_numpy(np.asarray(nb, np.float32)),
    )


def _nb(e: torch.Tensor, d: int) -> torch.Tensor:
    return e if e.numel() else torch.zeros(0, d)


def representations(
    state: dict[str, torch.Tensor],
    views: ClientViews,
    users: np.ndarray,
    expansion: ExpansionResult | None,
) -> torch.Tensor:
    slot, item, _, nb_occ, nb = _inputs(views, users, expansion)
    b, d = len(users), state["item_emb"].shape[1]
    e_user = state["local_user_emb"][torch.as_tensor(users)]
    if "W_2" not in state:  # the star graph
        with torch.no_grad():
            members, group = star_members(e_user, slot, state["item_emb"][item], nb_occ, _nb(nb, d))
            a = state["a_1"].unsqueeze(0).expand(group.numel(), -1)
            return star_attend(members @ state["W_1"], a, group, b)
    with torch.no_grad():
        return user_representation(
            {k: state[k] for k in MODEL_KEYS},
            state["local_user_emb"][torch.as_tensor(users)],
            slot,
            state["item_emb"][item],
            nb_occ,
            _nb(nb, d),
        )


def local_gradients(
    state: dict[str, torch.Tensor],
    views: ClientViews,
    users: np.ndarray,
    cfg: FedGNNConfig,
    expansion: ExpansionResult | None,
    rng: np.random.Generator,
    gen: torch.Generator | None = None,
) -> tuple[Uploads, torch.Tensor]:
    """Uploads (pre-LDP, with Gaussian pseudo rows) and each user's own-embedding gradient."""
    b, d = len(users), state["item_emb"].shape[1]
    slot, item, rating, nb_occ, nb = _inputs(views, users, expansion)
    e_user = state["local_user_emb"][torch.as_tensor(users)].clone().requires_grad_(True)
    e_item = state["item_emb"][item].clone().requires_grad_(True)
    keys = model_keys(cfg.arch)
    if cfg.arch == "star":
        # every user's W is the global W at the round's start, so one shared product gives
        # each user's forward; each user's gradient of W is Σ x_jᵀ ∂L/∂(W x_j) over its star
        members, group = star_members(e_user, slot, e_item, nb_occ, _nb(nb, d))
        wx = members @ state["W_1"]
        wx.retain_grad()
        P = per_user_copies({"a_1": state["a_1"]}, b)
        h = star_attend(wx, P["a_1"][group], group, b)
    else:
        P = per_user_copies({k: state[k] for k in keys}, b)
        h = user_representation(P, e_user, slot, e_item, nb_occ, _nb(nb, d))
    pred = (h[slot] * e_item).sum(1) + user_offsets(views, users, cfg.offset)[slot]
    cnt = torch.bincount(slot, minlength=b).clamp_min(1)
    mse_u = segment_sum((pred - rating) ** 2, slot, b) / cnt
    if cfg.loss not in LOSSES:
        raise ValueError(f"unknown loss {cfg.loss!r}; expected one of {LOSSES}")
    loss_u = {"mse": mse_u, "rmse": torch.sqrt(mse_u + 1e-12), "sse": mse_u * cnt}[cfg.loss]
    loss_u.sum().backward()
    model = {k: grad_of(P[k]) for k in P}
    if cfg.arch == "star":
        model["W_1"] = segment_outer(members.detach(), grad_of(wx), group, b)
    real = grad_of(e_item)
    p_slot, p_item = sample_non_interacted(
        slot.numpy(), item.numpy(), b, views.n_items, cfg.pseudo_items, rng
    )
    p_slot_t = torch.from_numpy(p_slot)
    fake = (
        gaussian_pseudo_gradients(real, slot, p_slot_t, b, gen)
        if p_slot.size
        else torch.zeros(0, d)
    )
    up = Uploads(
        users=np.asarray(users),
        weight=torch.ones(b),
        model={k: model[k] for k in keys},
        item_slot=torch.cat([slot, p_slot_t]),
        item_idx=torch.cat([item, torch.from_numpy(p_item)]),
        item_grad=torch.cat([real, fake]),
        item_pseudo=torch.cat(
            [torch.zeros(slot.numel(), dtype=torch.bool), torch.ones(p_slot.size, dtype=torch.bool)]
        ),
        loss=loss_u.detach(),
    )
    g_self = grad_of(e_user)
    # "sse": the user's own embedding steps on the mean over its ratings
    return up, g_self / cnt.unsqueeze(1) if cfg.loss == "sse" else g_self


def predict(
    state: dict[str, torch.Tensor],
    views: ClientViews,
    users: np.ndarray,
    items: np.ndarray,
    expansion: ExpansionResult | None,
    offset: str = "none",
    chunk: int = 4096,
) -> np.ndarray:
    uniq, inv = np.unique(users, return_inverse=True)
    reps = torch.cat(
        [
            representations(state, views, uniq[s : s + chunk], expansion)
            for s in range(0, uniq.size, chunk)
        ]
    )
    with torch.no_grad():
        out = (reps[torch.from_numpy(inv)] * state["item_emb"][torch.from_numpy(items)]).sum(1)
    return (out + user_offsets(views, uniq, offset)[torch.from_numpy(inv)]).numpy()
