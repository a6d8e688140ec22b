"""One recommendation experiment: every named method × seed on the configured rating
dataset (``securefgl recommend``; the family's runner, :mod:`securefgl.config.families`).

``fesog`` / ``fedgnn`` train federated (:class:`~.trainer.FedRecTrainer`), ``central`` the
non-federated upper reference (:func:`~.central.train_central`, its own defaults: the
reference is not the subject). A report ``report(trainer, views, aggregation) -> dict``
(the attacks' interaction inference, a CLI plug-in) runs on each trained federated model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from securefgl import extras
from securefgl.algorithms.recommendation.central import central_settings, train_central
from securefgl.algorithms.recommendation.settings import RecConfig, RecommendationSettings
from securefgl.algorithms.recommendation.trainer import FedRecTrainer
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data.rating_splits import published_split
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import load_ratings
from securefgl.federation.subnormals import subnormals_flushed

Report = Callable[[FedRecTrainer, ClientViews, str], dict[str, Any]]


def rating_views(config: ExperimentConfig, seed: int) -> tuple[Any, ClientViews]:
    """The dataset of ``config`` and its per-user (or published) split for ``seed``."""
    s = config.section(RecommendationSettings)
    data = load_ratings(config.dataset, config.data_root, max_users=s.max_users, seed=seed,
                        variant=s.variant)  # fmt: skip
    if s.split == "per-user":
        return data, ClientViews.from_data(data, seed=seed)
    try:
        split = published_split(data, s.split, config.data_root, seed=seed)
    except ValueError as err:
        raise ConfigError(f"recommendation.split: {err}") from None
    return data, ClientViews(data, split)


@subnormals_flushed()
def run_recommendation(
    config: ExperimentConfig, reports: Sequence[Report] = (),
    checkpoint: str | Path | None = None, progress: bool = False,
) -> list[dict[str, Any]]:  # fmt: skip
    """Every algorithm × seed of ``config``; one result dict per run. ``progress``: a bar on
    a terminal, else a progress line a minute (:mod:`securefgl.federation.progress`)."""
    if checkpoint is not None and (len(config.seeds) > 1 or len(config.algorithms) > 1):
        raise ConfigError("a checkpoint holds one run: give one algorithm and one seed")
    if config.executor == "ray":  # before any data is loaded
        extras.check("ray", "--executor ray")
    config.refuse_unread_protocol_settings()
    torch.set_num_threads(config.threads)
    out = []
    for seed in config.seeds:
        data, views = rating_views(config, seed)
        for method in config.algorithms:
            row: dict[str, Any] = {"dataset": data.summary(), "method": method, "seed": seed}
            if method == "central":
                if checkpoint is not None:
                    raise ConfigError("--checkpoint is for fesog / fedgnn runs")
                res = train_central(views, seed=seed, time_budget_s=config.section(
                    RecommendationSettings).time_budget)  # fmt: skip
                row["reference_settings"] = central_settings()
            else:
                cfg = RecConfig.from_experiment(config, method, seed)
                with FedRecTrainer(views, cfg) as trainer:
                    res = trainer.run(checkpoint=checkpoint, progress=progress)
                    for report in reports:
                        row.update(report(trainer, views, cfg.aggregation))
            row |= {
                "test_rmse": res.test_rmse, "test_mae": res.test_mae, "val_rmse": res.val_rmse,
                "rounds": res.rounds, "seconds": res.seconds, "stopped": res.stopped,
                "privacy": res.privacy, "settings": res.config,
                "aggregate_max_abs_error": res.aggregate_max_abs_error,
            }  # fmt: skip
            out.append(row)
    return out
