"""A recommendation run saves itself and resumes where it stopped, each party from its
own file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from securefgl.algorithms.recommendation.ldp import LDPConfig
from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import synthetic_ratings


@pytest.fixture(scope="module")
def views() -> ClientViews:
    return ClientViews.from_data(synthetic_ratings(n_users=120, n_items=90, per_user=12))


def _config(method: str) -> RecConfig:
    ldp = LDPConfig("laplace", 0.3, 0.05)
    return RecConfig(method=method, rounds=60, users_per_round=32, pseudo_items=4, ldp=ldp,
                     eval_every=10, patience=100, seeded_noise=True, expand_every=7)  # fmt: skip


def _interrupted(views: ClientViews, cfg: RecConfig, where: Path, at: int) -> None:
    """A run that dies in round ``at`` after saving every second evaluation."""
    tr = FedRecTrainer(views, cfg)
    step = tr.round

    def dying(r: int, users=None):
        if r == at:
            raise KeyboardInterrupt
        return step(r, users)

    tr.round = dying  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        tr.run(checkpoint=where, checkpoint_every=2)


def test_a_resumed_fesog_run_gives_the_uninterrupted_result(views, tmp_path) -> None:
    cfg = _config("fesog")
    whole = FedRecTrainer(views, cfg).run()
    _interrupted(views, cfg, tmp_path, at=45)
    saved = sorted(p.name for p in (tmp_path / "round-40").iterdir())
    assert saved == ["driver.npz", "server.npz", "users-0.npz", "users-1.npz"]
    resumed = FedRecTrainer(views, cfg).run(checkpoint=tmp_path, checkpoint_every=2)
    assert resumed.history == whole.history
    assert resumed.test_rmse == whole.test_rmse and resumed.rounds == whole.rounds
    assert resumed.privacy == whole.privacy  # the users' ledger came back whole


def test_a_resumed_fedgnn_run_expands_again_and_finishes(views, tmp_path) -> None:
    cfg = _config("fedgnn")
    _interrupted(views, cfg, tmp_path, at=45)
    assert (tmp_path / "round-40" / "third_party.npz").exists()
    tr = FedRecTrainer(views, cfg)
    res = tr.run(checkpoint=tmp_path, checkpoint_every=2)
    assert [h["round"] for h in res.history] == list(range(10, 61, 10))
    assert res.rounds == 60
    first = min(e.round for e in tr.channel.transcript.entries if e.receiver == "third_party")
    assert first == 40  # the expansion is not kept: the resumed run expands first


def test_a_checkpoint_of_another_configuration_is_refused(views, tmp_path) -> None:
    cfg = _config("fesog")
    _interrupted(views, cfg, tmp_path, at=25)
    longer = replace(cfg, rounds=80)  # how long a run goes on may change
    FedRecTrainer(views, longer).load_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="another configuration"):
        FedRecTrainer(views, replace(cfg, lr=0.5)).load_checkpoint(tmp_path)


def test_party_files_are_readable_by_their_owner_only(tmp_path) -> None:
    from securefgl.algorithms.recommendation.checkpoint import load_arrays, save_arrays

    path = tmp_path / "ckpt" / "round-1" / "users-0.npz"
    save_arrays(path, {"user_emb": np.ones((2, 3), np.float32)}, {"rng": [1, 2]})
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    arrays, meta = load_arrays(path)
    assert arrays["user_emb"].shape == (2, 3) and meta == {"rng": [1, 2]}
