"""Centralised GNN recommender: the upper reference (NOT federated).

The FeSoG architecture (:func:`securefgl.algorithms.recommendation.fesog.user_representation`:
social and item GATs + relational attention, dot-product rating) trained on the pooled training
ratings by one party holding everything, with Adam on the MSE over mini-batches of users,
validation-based early stopping, no pseudo items and no privacy. It plays the role of the
non-federated GNN baselines of FeSoG's Table 4 (GraphRec / ConsisRec), not a re-implementation
of either. Deviation from the federated models: r̂ = μ + h·e with μ the mean training rating and
embeddings initialised at 0.1·N(0, 1), so items without training ratings (30% of Ciao's test
ratings) are predicted near μ; with FeSoG's bias-free r̂ = h·e they are predicted near 0, which
dominates the federated RMSE (see the warm / cold split in the benchmark)."""

from __future__ import annotations

import inspect
import time

import numpy as np
import torch

from protocols.dp.rng import NOISE_NONE
from securefgl.algorithms.recommendation import fesog
from securefgl.algorithms.recommendation.segment import expanded, segment_sum
from securefgl.algorithms.recommendation.trainer import RecResult, rmse_detail
from securefgl.data.rating_views import ClientViews


def central_settings() -> str:
    """What the central reference trains with (its own defaults, whatever the run's flags:
    the reference is not the subject), for result files."""
    d = {k: v.default for k, v in inspect.signature(train_central).parameters.items()}
    return (f"dim {d['dim']}, Adam lr {d['lr']:g}, weight decay {d['weight_decay']:g}, at most "
            f"{d['epochs']} epochs, patience {d['patience']}, no protocol")  # fmt: skip


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
    t0, stopped = time.perf_counter(), "rounds"
    best, detail, bad, history, ep = np.inf, {}, 0, [], 0
    mu = float(views.train.val.mean())
    warm = views.warm_items()

    def evaluate(part: str) -> dict[str, float]:
        u, i, r = views.eval_pairs(part)
        with torch.no_grad():
            pred = mu + fesog.predict({k: v.detach() for k, v in params.items()}, views, u, i)
        return rmse_detail(pred, r, warm[i])

    for ep in range(epochs):
        order = rng.permutation(active)
        for s in range(0, order.size, batch_users):
            users = np.sort(order[s : s + batch_users])
            slot, item, rating = (torch.from_numpy(x) for x in views.gather(users, "train"))
            s_slot, s_nbr = (torch.from_numpy(x) for x in views.gather_social(users))
            b = users.size
            P = expanded({k: params[k] for k in fesog.MODEL_KEYS}, b)
            h = fesog.user_representation(
                P,
                params["user_emb"][torch.from_numpy(users)],
                s_slot,
                params["user_emb"][s_nbr],
                slot,
                params["item_emb"][item],
            )
            pred = mu + (h[slot] * params["item_emb"][item]).sum(1)
            loss = segment_sum((pred - rating) ** 2, slot, b).sum() / max(slot.numel(), 1)
            opt.zero_grad()
            loss.backward()
            opt.step()
        val = evaluate("val")
        history.append({"epoch": ep + 1, "val_rmse": val["rmse"], "val_mae": val["mae"]})
        if val["rmse"] < best:
            best, bad, detail = val["rmse"], 0, evaluate("test")
        else:
            bad += 1
            if bad > patience:
                stopped = "patience"
                break
        if time_budget_s and time.perf_counter() - t0 > time_budget_s:
            stopped = "time budget"
            break
    secs = time.perf_counter() - t0
    cfg = {
        "method": "central",
        "dim": dim,
        "epochs": epochs,
        "batch_users": batch_users,
        "lr": lr,
        "weight_decay": weight_decay,
        "seed": seed,
    }
    return RecResult(
        cfg,
        detail["rmse"],
        detail["mae"],
        float(best),
        ep + 1,
        secs,
        secs / max(ep + 1, 1),
        {"mode": "none (not federated)", "noise": NOISE_NONE},
        history,
        detail,
        stopped,
    )
