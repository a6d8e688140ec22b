"""Federated training loop for FeSoG / FedGNN: sample users, local gradients (batched), LDP,
aggregation backend, server update; validation-based early stopping as ``FeSoG/main.py``
(evaluate every ``eval_every`` rounds, test RMSE/MAE at the best validation RMSE, stop after
``patience`` evaluations without improvement).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
import torch

from protocols.dp.rng import make_rng, make_torch_generator
from securefgl.federation.channel import Channel
from securefgl.federation.transcript import Transcript
from securefgl.recommendation import fedgnn, fesog
from securefgl.recommendation.aggregation import ServerView, aggregate_uploads, server_update
from securefgl.recommendation.expansion import (
    ExpansionResult,
    ThirdParty,
    expand,
    new_token_key,
)
from securefgl.recommendation.ldp import LDPConfig, UserLedger, apply_ldp
from securefgl.recommendation.uploads import Uploads
from securefgl.recommendation.views import ClientViews

logger = logging.getLogger(__name__)
Method = Literal["fesog", "fedgnn"]


@dataclass
class RecConfig:
    method: Method = "fesog"
    dim: int = 8
    rounds: int = 400
    users_per_round: int = 256
    lr: float = 0.1
    weight_decay: float = 1e-3
    pseudo_items: int = 10
    ldp: LDPConfig = field(default_factory=LDPConfig)
    backend: str = "plain"
    eval_every: int = 20
    patience: int = 5
    max_neighbors: int = 5
    expand_every: int = 20
    seed: int = 0
    seeded_noise: bool = False  # NOT PRIVATE: LDP noise and pseudo items from ``seed``
    keep_views: int = 0  # keep the server's views of the first k rounds (attacks)
    time_budget_s: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def rmse_mae(pred: np.ndarray, label: np.ndarray) -> tuple[float, float]:
    err = pred - label
    return float(np.sqrt(np.mean(err**2))), float(np.mean(np.abs(err)))


def rmse_detail(pred: np.ndarray, label: np.ndarray, warm: np.ndarray) -> dict[str, float]:
    """RMSE / MAE overall and split by warm items (≥ 1 training rating) vs cold items."""
    rmse, mae = rmse_mae(pred, label)
    out = {"rmse": rmse, "mae": mae, "cold_share": float(1.0 - warm.mean())}
    for name, m in (("warm", warm), ("cold", ~warm)):
        out[f"rmse_{name}"] = rmse_mae(pred[m], label[m])[0] if m.any() else float("nan")
    return out


@dataclass
class RecResult:
    config: dict
    test_rmse: float
    test_mae: float
    val_rmse: float
    rounds: int
    seconds: float
    seconds_per_round: float
    privacy: dict
    history: list[dict]
    detail: dict = field(default_factory=dict)  # test metrics split by warm / cold items


class FedRecTrainer:
    def __init__(self, views: ClientViews, cfg: RecConfig) -> None:
        self.views, self.cfg = views, cfg
        self.gen = torch.Generator().manual_seed(cfg.seed)  # model initialisation
        self.rng = np.random.default_rng([cfg.seed, 3])  # the server's choice of users
        # privacy randomness (LDP noise, pseudo items and their gradients, the third party's
        # shuffles): secret unless seeded_noise, never derivable from the published seed
        noise_seed = cfg.seed if cfg.seeded_noise else None
        self.private_rng = make_rng(noise_seed, "recommendation-private")
        self.noise_gen = make_torch_generator(noise_seed, "recommendation-noise")
        init = fesog.init_fesog if cfg.method == "fesog" else fedgnn.init_fedgnn
        self.state = init(views.n_users, views.n_items, cfg.dim, self.gen)
        self.active = views.active_users()
        self.ledger = UserLedger(views.n_users)
        self.server_views: list[ServerView] = []
        self.expansion: ExpansionResult | None = None
        self.channel = Channel(Transcript(store_payloads=False))
        self.token_key = new_token_key() if cfg.method == "fedgnn" else b""
        self.third_party = ThirdParty(cfg.max_neighbors)
        self.round_seconds: list[float] = []

    # ------------------------------------------------------------------ FedGNN expansion
    def run_expansion(self) -> None:
        users = self.active
        slot, pos = self.views.train.positions(users)
        emb = self.state["local_user_emb"][torch.as_tensor(users)].numpy()
        self.expansion = expand(
            users,
            slot,
            self.views.train.col[pos],
            pos,
            self.views.train.col.size,
            emb,
            self.token_key,
            self.third_party,
            self.channel,
            self.private_rng,
        )

    # ------------------------------------------------------------------ one round
    def table_sizes(self) -> tuple[int, int]:
        """The server's item / user embedding rows (public; FedGNN keeps no user table)."""
        user = self.state.get("user_emb")
        return self.state["item_emb"].shape[0], 0 if user is None else user.shape[0]

    def sample_users(self) -> np.ndarray:
        k = min(self.cfg.users_per_round, self.active.size)
        return np.sort(self.rng.choice(self.active, size=k, replace=False))

    def local_step(self, users: np.ndarray, update_local: bool = True) -> Uploads:
        """The sampled users' uploads (pre-LDP); FedGNN users also update their own
        embedding locally unless ``update_local`` is False."""
        cfg = self.cfg
        if cfg.method == "fesog":
            return fesog.local_gradients(
                self.state,
                self.views,
                users,
                fesog.FeSoGConfig(cfg.dim, cfg.pseudo_items),
                self.private_rng,
            )
        up, g_self = fedgnn.local_gradients(
            self.state,
            self.views,
            users,
            fedgnn.FedGNNConfig(cfg.dim, cfg.pseudo_items, cfg.max_neighbors),
            self.expansion,
            self.private_rng,
            self.noise_gen,
        )
        if not update_local:
            return up
        with torch.no_grad():  # each client updates its own embedding locally
            U = self.state["local_user_emb"]
            idx = torch.as_tensor(users)
            U[idx] -= cfg.lr * g_self + cfg.weight_decay * U[idx]
        return up

    def round(self, r: int, users: np.ndarray | None = None) -> ServerView:
        cfg = self.cfg
        if cfg.method == "fedgnn" and (self.expansion is None or r % cfg.expand_every == 0):
            self.run_expansion()
        users = self.sample_users() if users is None else users
        up = self.local_step(users)
        up, eps = apply_ldp(up, cfg.ldp, self.noise_gen)
        self.ledger.record(users, eps)
        sums, view = aggregate_uploads(up, cfg.backend, r, *self.table_sizes())
        server_update(
            self.state,
            sums,
            cfg.lr,
            cfg.weight_decay,
            "user_emb" if cfg.method == "fesog" else None,
        )
        view.extra["train_loss"] = float(up.loss.mean()) if up.loss is not None else float("nan")
        if len(self.server_views) < cfg.keep_views:
            self.server_views.append(view)
        return view

    def observe(self, r: int, backend: str | None = None) -> ServerView:
        """What the server would receive in round ``r`` (no update is applied, nothing is
        charged to the ledger): the input of the interaction-inference attack."""
        if self.cfg.method == "fedgnn" and self.expansion is None:
            self.run_expansion()
        users = self.sample_users()
        up, _ = apply_ldp(self.local_step(users, update_local=False), self.cfg.ldp, self.noise_gen)
        return aggregate_uploads(up, backend or self.cfg.backend, r, *self.table_sizes())[1]

    # ------------------------------------------------------------------ evaluation
    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        if self.cfg.method == "fesog":
            return fesog.predict(self.state, self.views, users, items)
        return fedgnn.predict(self.state, self.views, users, items, self.expansion)

    def evaluate(self, part: str) -> tuple[float, float]:
        u, i, r = self.views.eval_pairs(part)
        return rmse_mae(self.predict(u, i), r)

    def evaluate_detail(self, part: str) -> dict[str, float]:
        u, i, r = self.views.eval_pairs(part)
        return rmse_detail(self.predict(u, i), r, self.views.warm_items()[i])

    def run(self) -> RecResult:
        cfg = self.cfg
        t0 = time.perf_counter()
        best, detail, bad, history = np.inf, {}, 0, []
        r = 0
        for r in range(cfg.rounds):
            t = time.perf_counter()
            view = self.round(r)
            self.round_seconds.append(time.perf_counter() - t)
            if (r + 1) % cfg.eval_every == 0:
                val = self.evaluate("val")
                if val[0] < best:
                    best, bad = val[0], 0
                    detail = self.evaluate_detail("test")
                else:
                    bad += 1
                history.append(
                    {
                        "round": r + 1,
                        "val_rmse": val[0],
                        "val_mae": val[1],
                        "train_loss": view.extra["train_loss"],
                    }
                )
                logger.info("round %d val rmse %.4f mae %.4f", r + 1, *val)
                if bad > cfg.patience:
                    break
                if cfg.time_budget_s and time.perf_counter() - t0 > cfg.time_budget_s:
                    logger.info("time budget reached at round %d", r + 1)
                    break
        if not np.isfinite(best):
            best = self.evaluate("val")[0]
            detail = self.evaluate_detail("test")
        secs = time.perf_counter() - t0
        privacy = {
            "mode": cfg.ldp.mode,
            "clip": cfg.ldp.clip,
            "lam": cfg.ldp.lam,
            "paper_epsilon_per_coordinate": cfg.ldp.paper_epsilon,
            **self.ledger.summary(),
            "noise": "seeded from the public seed: NOT PRIVATE" if cfg.seeded_noise else "secret",
            "private": not cfg.seeded_noise,
        }
        return RecResult(
            cfg.to_dict(),
            detail["rmse"],
            detail["mae"],
            float(best),
            r + 1,
            secs,
            float(np.mean(self.round_seconds)),
            privacy,
            history,
            detail,
        )
