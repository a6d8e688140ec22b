"""Centralised GNN recommender: the upper reference (NOT federated).

The FeSoG architecture (:func:`securefgl.recommendation.fesog.user_representation`: social
and item GATs + relational attention, dot-product rating) trained on the pooled training
ratings by one party holding everything, with Adam on the MSE over mini-batches of users,
validation-based early stopping, no pseudo items and no privacy. It plays the role of the
non-federated GNN baselines of FeSoG's Table 4 (GraphRec / ConsisRec), not a re-implementation
of either.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from securefgl.recommendation import fesog
from securefgl.recommendation.segment import expanded, segment_sum
from securefgl.recommendation.trainer import RecResult, rmse_mae
from securefgl.recommendation.views import ClientViews


def train_central(
    views: ClientViews,
    dim: int = 8,
    epochs: int = 60,
    batch_users: int = 512,
    lr: float = 0.01,
    weight_decay: float = 1e-4,
    patience: int = 5,
    seed: int = 0,
    time_budget_s: float | None = None,
) -> RecResult:
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng([seed, 5])
    state = fesog.init_fesog(views.n_users, views.n_items, dim, gen)
    for k in ("user_emb", "item_emb"):
        state[k].mul_(0.1)
    params = {k: v.requires_grad_(True) for k, v in state.items()}
    opt = torch.optim.Adam(params.values(), lr=lr, weight_decay=weight_decay)
    active = views.active_users()
    t0 = time.perf_counter()
    best, best_test, bad, history, ep = np.inf, (np.nan, np.nan), 0, [], 0

    def evaluate(part: str) -> tuple[float, float]:
        u, i, r = views.eval_pairs(part)
        with torch.no_grad():
            return rmse_mae(fesog.predict({k: v.detach() for k, v in params.items()},
                                          views, u, i), r)

    for ep in range(epochs):
        order = rng.permutation(active)
        for s in range(0, order.size, batch_users):
            users = np.sort(order[s:s + batch_users])
            slot, item, rating = (torch.from_numpy(x) for x in views.gather(users, "train"))
            s_slot, s_nbr = (torch.from_numpy(x) for x in views.gather_social(users))
            b = users.size
            P = expanded({k: params[k] for k in fesog.MODEL_KEYS}, b)
            h = fesog.user_representation(
                P, params["user_emb"][torch.from_numpy(users)], s_slot,
                params["user_emb"][s_nbr], slot, params["item_emb"][item],
            )
            pred = (h[slot] * params["item_emb"][item]).sum(1)
            loss = segment_sum((pred - rating) ** 2, slot, b).sum() / max(slot.numel(), 1)
            opt.zero_grad()
            loss.backward()
            opt.step()
        val = evaluate("val")
        history.append({"epoch": ep + 1, "val_rmse": val[0], "val_mae": val[1]})
        if val[0] < best:
            best, bad, best_test = val[0], 0, evaluate("test")
        else:
            bad += 1
            if bad > patience:
                break
        if time_budget_s and time.perf_counter() - t0 > time_budget_s:
            break
    secs = time.perf_counter() - t0
    cfg = {"method": "central", "dim": dim, "epochs": epochs, "batch_users": batch_users,
           "lr": lr, "weight_decay": weight_decay, "seed": seed}
    return RecResult(cfg, best_test[0], best_test[1], float(best), ep + 1, secs,
                     secs / max(ep + 1, 1), {"mode": "none (not federated)"}, history)
