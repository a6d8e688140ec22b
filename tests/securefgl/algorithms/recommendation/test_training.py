"""End-to-end federated recommendation runs on a small synthetic rating set."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from securefgl.algorithms.recommendation.central import train_central
from securefgl.algorithms.recommendation.ldp import LDPConfig
from securefgl.algorithms.recommendation.settings import aggregating
from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import synthetic_ratings


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
        **aggregating("ideal"),
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
    sent = [(e.sender, e.receiver) for e in tr.channel.transcript.entries]
    for g in tr.groups:  # rounds 0 and 2: one frame each way per user group
        assert sent.count((g, "third_party")) == 2 and sent.count(("third_party", g)) == 2
        expansion = tr.executor.held(g).expansion
        assert expansion is not None and expansion.embedding.shape[0] > 0


def test_central_reference_trains(views: ClientViews) -> None:
    res = train_central(views, epochs=15, batch_users=50, lr=0.05)
    assert np.isfinite(res.test_rmse) and res.test_rmse < 1.5


@pytest.mark.datasets
def test_cli_recommend_on_filmtrust(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
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
            "--algorithms",
            "fesog",
            "--dataset",
            "FilmTrust",
            "--rounds",
            "40",
            "--users-per-round",
            "128",
            "--json",
            "--output-dir",
            str(tmp_path),
            "--name",
            "ft",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    saved = json.loads((tmp_path / "ft" / "result.json").read_text())
    assert saved["runs"] == [out] and saved["config"]["task"] == "recommendation"
    assert code == 0 and out["method"] == "fesog" and out["rounds"] == 40
    assert out["dataset"]["users"] == 740 and np.isfinite(out["test_rmse"])
    assert out["attack"]["view"] == "per-user uploads" and out["privacy"]["mode"] == "heuristic"
    # like securefgl run: result.md, units, provenance; the heuristic LDP claims no ε
    assert saved["units"]["rmse"] and saved["provenance"]["packages"]["torch"]
    assert out["privacy"]["guarantees"] == [] and out["privacy"]["noise"] == "secret"
    assert out["settings"]["ldp"]["clip"] == 0.3  # the resolved default
    md = (tmp_path / "ft" / "result.md").read_text()
    assert md.startswith("# FilmTrust") and "| fesog | 0 |" in md


@pytest.mark.parametrize("method", ["fesog", "fedgnn"])
def test_a_user_group_holds_only_its_own_users(views: ClientViews, method: str) -> None:
    with FedRecTrainer(views, RecConfig(method=method, user_groups=3)) as tr:
        for g, pid in enumerate(tr.groups):
            group = tr.executor.held(pid)
            members = np.arange(views.n_users) % 3 == g
            for part in ("train", "val", "test"):
                lengths = group.views.split[part].lengths(np.arange(views.n_users))
                ours = views.split[part].lengths(np.arange(views.n_users))
                assert (lengths[~members] == 0).all()
                np.testing.assert_array_equal(lengths[members], ours[members])
            if method == "fedgnn":  # the embeddings of other groups' users are not here
                assert not group.user_emb[torch.from_numpy(~members)].any()
                assert group.user_emb[torch.from_numpy(members)].abs().sum() > 0


def test_uploads_survive_the_wire_and_merge_to_the_same_sums(views: ClientViews) -> None:
    from securefgl.algorithms.recommendation import fesog
    from securefgl.algorithms.recommendation.aggregation import plain_sums
    from securefgl.algorithms.recommendation.uploads import from_payloads, to_payload

    state = fesog.init_fesog(views.n_users, views.n_items, 8, torch.Generator().manual_seed(0))
    batches = [np.array([1, 4, 7]), np.array([2, 9])]
    ups = [
        fesog.local_gradients(state, views, u, fesog.FeSoGConfig(8, 3), np.random.default_rng(1))
        for u in batches
    ]
    merged = plain_sums(from_payloads([to_payload(u) for u in ups]))
    joint = ups[0].with_grads()
    for name in ("item_idx", "item_grad", "user_idx", "user_grad"):
        setattr(joint, name, torch.cat([getattr(u, name) for u in ups]))
    joint.item_slot = torch.cat([ups[0].item_slot, ups[1].item_slot + 3])
    joint.user_slot = torch.cat([ups[0].user_slot, ups[1].user_slot + 3])
    joint.weight = torch.cat([u.weight for u in ups])
    joint.model = {k: torch.cat([u.model[k] for u in ups]) for k in ups[0].model}
    expected = plain_sums(joint)
    torch.testing.assert_close(merged.item_sum, expected.item_sum)
    torch.testing.assert_close(merged.user_sum, expected.user_sum)
    for k in expected.model_sum:
        torch.testing.assert_close(merged.model_sum[k], expected.model_sum[k])


@pytest.mark.parametrize(
    "bad",
    [
        {"method": "fesog", "offset": "user-mean"},
        {"method": "fedgnn", "arch": "three-level"},
        {"method": "fedgnn", "item_std": 0.0},
        {"user_groups": 0},
        {"executor": "spark"},
    ],
)
def test_bad_settings_are_configuration_errors(bad: dict) -> None:
    from securefgl.config import ConfigError

    with pytest.raises(ConfigError):
        RecConfig(**bad)


def test_settings_travel_as_json_unchanged() -> None:
    cfg = RecConfig(method="fedgnn", offset="user-mean", arch="star", loss="mse",
                    ldp=LDPConfig("laplace", 0.1, 0.2), user_groups=3)  # fmt: skip
    assert RecConfig.from_json(cfg.to_json()) == cfg


def test_fedgnn_per_rating_loss_does_not_shrink_heavy_users_item_gradients(
    views: ClientViews,
) -> None:
    """``loss="sse"`` sums over a user's ratings: each item row is n_u times the per-user
    mean's (``"mse"``), so a heavy rater's item steps are not divided by n_u; the user's own
    embedding still steps on the mean."""
    from securefgl.algorithms.recommendation import fedgnn

    state = fedgnn.init_fedgnn(views.n_users, views.n_items, 8, torch.Generator().manual_seed(0))
    users = np.arange(10)
    grads = {}
    for loss in ("mse", "sse"):
        cfg = fedgnn.FedGNNConfig(pseudo_items=0, loss=loss)
        grads[loss] = fedgnn.local_gradients(
            state, views, users, cfg, None, np.random.default_rng(0)
        )
    (mse, own_mse), (sse, own_sse) = grads["mse"], grads["sse"]
    n_u = torch.bincount(mse.item_slot, minlength=users.size).float()
    torch.testing.assert_close(sse.loss, mse.loss * n_u)
    # float32 sums of n_u terms against n_u times their mean: rounding grows with n_u
    torch.testing.assert_close(
        sse.item_grad, mse.item_grad * n_u[mse.item_slot].unsqueeze(1), rtol=1e-4, atol=1e-4
    )
    torch.testing.assert_close(own_sse, own_mse)


@pytest.mark.parametrize("method", ["fesog", "fedgnn"])
def test_a_batch_without_social_links_uploads_zero_social_gradients(method: str) -> None:
    """Users with no trust links leave the social attention out of the loss; their
    upload carries zeros there instead of failing (small cohorts hit this often)."""
    from securefgl.algorithms.recommendation import fedgnn, fesog

    lonely = ClientViews.from_data(synthetic_ratings(n_users=40, n_items=30), social=False)
    users, rng = np.array([3, 5]), np.random.default_rng(0)
    gen = torch.Generator().manual_seed(0)
    if method == "fesog":
        state = fesog.init_fesog(lonely.n_users, lonely.n_items, 8, gen)
        up = fesog.local_gradients(state, lonely, users, fesog.FeSoGConfig(8, 2), rng)
        assert not up.model["W_u"].any() and up.model["W_i"].any()
    else:
        state = fedgnn.init_fedgnn(lonely.n_users, lonely.n_items, 8, gen)
        up = fedgnn.local_gradients(state, lonely, users, fedgnn.FedGNNConfig(8, 2), None, rng)[0]
    assert all(torch.isfinite(g).all() for g in up.model.values())


def test_the_time_budget_is_checked_every_round(views: ClientViews) -> None:
    """A budget far below one evaluation period still stops the run: it is checked after
    every round, not only when the run evaluates."""
    cfg = RecConfig(method="fesog", rounds=400, eval_every=400, users_per_round=32,
                    time_budget_s=0.2)  # fmt: skip
    with FedRecTrainer(views, cfg) as trainer:
        res = trainer.run()
    assert res.stopped == "time budget" and res.rounds < 400
    assert np.isfinite(res.test_rmse)  # evaluated once at the end


def test_recommendation_privacy_claims_only_a_guarantee(views: ClientViews) -> None:
    for mode, claims in (("laplace", 1), ("heuristic", 0), ("none", 0)):
        cfg = RecConfig(method="fedgnn", rounds=2, eval_every=2, users_per_round=16,
                        ldp=LDPConfig(mode, 0.3, 0.1))  # fmt: skip
        with FedRecTrainer(views, cfg) as trainer:
            privacy = trainer.run().privacy
        assert len(privacy["guarantees"]) == claims and "private" not in privacy
        if claims:
            assert privacy["guarantees"][0]["epsilon"] == privacy["epsilon_max_user"] > 0
            assert "given the item rows" in privacy["guarantees"][0]["unit"]


def test_fesogs_claim_names_the_social_links_its_user_rows_show(views: ClientViews) -> None:
    cfg = RecConfig(method="fesog", rounds=2, eval_every=2, users_per_round=16,
                    ldp=LDPConfig("laplace", 0.3, 0.1))  # fmt: skip
    with FedRecTrainer(views, cfg) as trainer:
        (claim,) = trainer.run().privacy["guarantees"]
    assert "given the item and user rows" in claim["unit"]
    assert "nor whom it is linked to" in claim["unit"]


def test_a_secure_run_reports_its_quantisation(views: ClientViews) -> None:
    """secagg+ rounds each of a sum's 16 summands to 2^-25 (24 fractional bits): the run's
    max abs error against the float64 sums is non-zero and within 16 · 2^-25; plain is exact
    and reports none."""
    errors = {}
    for transport in ("plain", "secagg+"):
        cfg = RecConfig(method="fesog", rounds=2, eval_every=2, users_per_round=16,
                        transport=transport)  # fmt: skip
        with FedRecTrainer(views, cfg) as trainer:
            errors[transport] = trainer.run().aggregate_max_abs_error
    assert errors["plain"] is None
    assert errors["secagg+"] is not None and 0 < errors["secagg+"] <= 16 * 2.0**-25 + 1e-12
