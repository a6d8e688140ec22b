"""A recommendation run saves itself and resumes where it stopped, each party from its
own file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from securefgl.algorithms.recommendation.checkpoint import load_arrays
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
    # the ledger holds every release ever made: 60 rounds, and rounds 40-44 twice (released
    # before the crash, replayed after it), 32 users each
    journal = (tmp_path / "ledger.jsonl").read_text().splitlines()[1:]
    assert sum(len(json.loads(line)["users"]) for line in journal) == 65 * 32
    assert resumed.privacy["epsilon_max_user"] >= whole.privacy["epsilon_max_user"]


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
    with pytest.raises(ValueError, match=r"another configuration \(lr 0.1 → 0.5\)"):
        FedRecTrainer(views, replace(cfg, lr=0.5)).load_checkpoint(tmp_path)


def test_party_files_are_readable_by_their_owner_only(tmp_path) -> None:
    from securefgl.algorithms.recommendation.checkpoint import save_arrays

    path = tmp_path / "ckpt" / "round-1" / "users-0.npz"
    save_arrays(path, {"user_emb": np.ones((2, 3), np.float32)}, {"rng": [1, 2]})
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    arrays, meta = load_arrays(path)
    assert arrays["user_emb"].shape == (2, 3) and meta == {"rng": [1, 2]}


def test_a_resumed_run_draws_fresh_noise_and_charges_every_release(views, tmp_path) -> None:
    """Secret noise: the rounds a resumed run redoes get new noise (the same noise on other
    gradients would cancel in a difference of two uploads), and the ledger, written before
    each release, charges the releases made after the checkpoint as well as their replay."""
    cfg = RecConfig(method="fedgnn", users_per_round=views.n_users, pseudo_items=0,
                    ldp=LDPConfig("laplace", 0.1, 0.1), expand_every=100)  # fmt: skip
    first = FedRecTrainer(views, cfg)
    first.resume(tmp_path)
    for r in range(3):
        first.round(r)
    first.save_checkpoint(tmp_path, {"round": 3})
    before = first.round(3).per_user  # released, then the run dies
    again = FedRecTrainer(views, cfg)
    assert again.resume(tmp_path) == {"round": 3}
    after = again.round(3).per_user
    assert before is not None and after is not None
    np.testing.assert_array_equal(before.item_idx.numpy(), after.item_idx.numpy())
    gap = (before.item_grad - after.item_grad).abs().mean()
    assert gap > 0.5 * before.item_grad.abs().mean()  # independent noise, not a replay
    assert again.ledger.summary()["max_releases"] == 5  # rounds 0-3, and 3 again
    for party in ("users-0", "users-1"):  # secret generators are never written down
        arrays, meta = load_arrays(tmp_path / "round-3" / f"{party}.npz")
        assert "noise_gen" not in arrays and "private_rng" not in meta


def test_a_ledger_journal_cut_short_drops_its_unsent_last_record(tmp_path) -> None:
    from securefgl.algorithms.recommendation.ldp import UserLedger

    path, header = tmp_path / "ledger.jsonl", {"config": {"method": "fedgnn"}}
    ledger = UserLedger.journaled(4, path, header)
    ledger.record(np.array([0, 1]), np.array([0.5, 0.5]))
    with path.open("a") as f:
        f.write('{"users": [2, 3], "eps"')  # the crash came while writing the next one
    back = UserLedger.journaled(4, path, header)
    assert back.summary()["max_releases"] == 1 and back.accountant(0).epsilon() == 0.5
    back.record(np.array([1]), np.array([0.25]))
    assert UserLedger.journaled(4, path, header).accountant(1).epsilon() == 0.75
    with pytest.raises(ValueError, match="another run"):
        UserLedger.journaled(4, path, {"config": {"method": "fesog"}})


def test_a_resumed_secure_run_keeps_the_quantisation_of_the_rounds_before(views, tmp_path):
    cfg = replace(_config("fesog"), rounds=24, eval_every=4, users_per_round=12,
                  transport="secagg+")  # fmt: skip
    whole = FedRecTrainer(views, cfg).run()
    _interrupted(views, cfg, tmp_path, at=18)  # saved after round 16
    resumed = FedRecTrainer(views, cfg).run(checkpoint=tmp_path, checkpoint_every=2)
    assert resumed.test_rmse == whole.test_rmse
    assert resumed.aggregate_max_abs_error == whole.aggregate_max_abs_error > 0
