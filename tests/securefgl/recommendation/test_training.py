"""End-to-end federated recommendation runs on a small synthetic rating set."""

from __future__ import annotations

import numpy as np
import pytest

from securefgl.recommendation.central import train_central
from securefgl.recommendation.data import synthetic_ratings
from securefgl.recommendation.ldp import LDPConfig
from securefgl.recommendation.trainer import FedRecTrainer, RecConfig
from securefgl.recommendation.views import ClientViews


@pytest.fixture(scope="module")
def views() -> ClientViews:
    return ClientViews.from_data(synthetic_ratings(n_users=150, n_items=120, per_user=15))


@pytest.mark.parametrize(
    ("method", "ldp"),
    [("fesog", LDPConfig("heuristic", 0.3, 0.1)), ("fedgnn", LDPConfig("laplace", 0.3, 0.05))],
)
def test_federated_training_reduces_rmse(views: ClientViews, method: str, ldp: LDPConfig) -> None:
    cfg = RecConfig(
        method=method,
        rounds=120,
        users_per_round=64,
        pseudo_items=5,
        ldp=ldp,
        eval_every=20,
        backend="ideal",
    )
    tr = FedRecTrainer(views, cfg)
    before = tr.evaluate("test")[0]
    res = tr.run()
    assert res.test_rmse < 0.7 * before
    assert res.privacy["max_releases"] >= 1
    if ldp.mode == "laplace":  # ε from the per-user accountant, grows with releases
        assert res.privacy["epsilon_max_user"] > 0
    else:
        assert res.privacy["epsilon_max_user"] is None


def test_fedgnn_expansion_refreshes(views: ClientViews) -> None:
    tr = FedRecTrainer(views, RecConfig(method="fedgnn", expand_every=2, users_per_round=20))
    for r in range(4):
        tr.round(r)
    tags = [e.tag for e in tr.channel.transcript.entries]
    assert tags.count("expansion/upload") == 2 and tags.count("expansion/reply") == 2
    assert tr.expansion is not None and tr.expansion.embedding.shape[0] > 0


def test_central_reference_trains(views: ClientViews) -> None:
    res = train_central(views, epochs=15, batch_users=50, lr=0.05)
    assert np.isfinite(res.test_rmse) and res.test_rmse < 1.5


@pytest.mark.datasets
def test_cli_recommend_on_filmtrust(capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import os
    from pathlib import Path

    from securefgl.cli import main

    root = os.environ.get("SECUREFGL_DATA")
    if not root or not (Path(root) / "SocialRec/FilmTrust/ratings.txt").is_file():
        pytest.skip("FilmTrust not under SECUREFGL_DATA")
    code = main(
        [
            "recommend",
            "--method",
            "fesog",
            "--dataset",
            "FilmTrust",
            "--rounds",
            "40",
            "--users-per-round",
            "128",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["method"] == "fesog" and out["rounds"] == 40
    assert out["dataset"]["users"] == 740 and np.isfinite(out["test_rmse"])
    assert out["attack"]["view"] == "per-user uploads" and out["privacy"]["mode"] == "heuristic"
