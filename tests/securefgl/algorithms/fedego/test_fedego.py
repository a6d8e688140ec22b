"""FedEgo: ego-graph trees, the mixup (exact averages), the DP option (clip bound, secret
noise), the label-skew split, an end-to-end run through the protocol stack and the
de-mixing attack."""

import numpy as np
import pytest
import torch

from attacks.fedego_demix import demix_attack
from securefgl.algorithms.fedego.mixup import clip_trees, mix_batch
from securefgl.algorithms.fedego.model import SLOTS, sample_trees
from securefgl.algorithms.fedego.parties import TAG_MIXED, EgoClient, csr_of
from securefgl.algorithms.fedego.settings import FedEgoSettings
from securefgl.algorithms.registry import algorithm_class
from securefgl.config import ExperimentConfig
from securefgl.data import csbm
from securefgl.data.label_skew import label_skew_world
from securefgl.federation import Channel, Transcript
from securefgl.federation.federation import Federation
from securefgl.federation.stack import build_stack

SMALL = {"hidden": 16, "local_epochs": 2, "server_epochs": 2, "batch_size": 8, "lr": 0.01}


def tiny_world(seed: int = 0, n: int = 400):
    g = csbm(n, num_classes=4, num_features=20, avg_degree=6.0, homophily=0.8, seed=seed)
    return label_skew_world(g, clients=3, sample_rate=0.5, test_num=20, seed=seed)


def build(world, protocol: str = "plain", seed: int = 0, noise_seed=None, **fedego):
    cfg = ExperimentConfig(dataset="csbm", clients=3, rounds=2, protocol={"stack": [protocol]},
                           fedego={**SMALL, **fedego})  # fmt: skip
    channel = Channel(Transcript(store_payloads=True))
    stack = build_stack(cfg, 3, experiment_id="fedego-test", seed=seed)
    fed = Federation(world.views, channel, stack, seed, noise_seed=noise_seed)
    algo = algorithm_class("fedego")(cfg)
    algo.setup(fed)
    return algo, channel.transcript


def test_trees_follow_edges_and_mark_missing_children():
    # path 0-1-2 plus the isolated node 3
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    indptr, indices = csr_of(ei, 4)
    nodes, valid = sample_trees(indptr, indices, np.array([0, 3]), np.random.default_rng(0))
    assert nodes.shape == valid.shape == (2, SLOTS)
    assert (nodes[0, 1:7] == 1).all() and valid[0, 1:7].all()  # 0's only neighbour
    hop2 = nodes[0, 7:].reshape(6, 6)
    assert set(hop2.ravel()) <= {0, 2} and valid[0, 7:].all()
    assert valid[1, 0] and not valid[1, 1:].any()  # an isolated centre has no children


def test_mixup_is_the_exact_slot_mean_of_r_and_one_hot_y():
    rng = np.random.default_rng(1)
    r, y = rng.normal(size=(10, 5)), rng.integers(0, 3, 10)
    onehot = np.eye(3)[y]
    trees = rng.integers(0, 10, (4, SLOTS))
    valid = rng.random((4, SLOTS)) < 0.8
    valid[:, 0] = True
    mr, my = mix_batch(r, onehot, trees, valid)
    assert mr.shape == (SLOTS, 5) and my.shape == (SLOTS, 3)
    for s in (0, 1, 7, 42):
        assert np.allclose(mr[s], (r[trees[:, s]] * valid[:, s, None]).sum(0) / 4)
        assert np.allclose(my[s], (onehot[trees[:, s]] * valid[:, s, None]).sum(0) / 4)
    assert np.allclose(4 * my[0], np.bincount(y[trees[:, 0]], minlength=3))  # histogram


def test_dp_clip_bounds_each_tree_and_leaves_small_trees_alone():
    rng = np.random.default_rng(2)
    tr, ty = rng.normal(size=(6, SLOTS, 8)), rng.random((6, SLOTS, 3))
    tr[0] *= 1e-3
    ty[0] *= 1e-3
    cr, cy = clip_trees(tr, ty, 1.5)
    norms = np.sqrt((cr**2).sum((1, 2)) + (cy**2).sum((1, 2)))
    assert (norms <= 1.5 + 1e-9).all() and np.isclose(norms[1:], 1.5).all()
    assert np.allclose(cr[0], tr[0]) and np.allclose(cy[0], ty[0])
    # the sensitivity of the noised sum: one tree more or less moves it by ≤ clip
    r, onehot = rng.normal(size=(20, 8)) * 10, np.eye(3)[rng.integers(0, 3, 20)]
    trees, valid = rng.integers(0, 20, (5, SLOTS)), np.ones((5, SLOTS), dtype=bool)
    zero = np.random.default_rng(0)
    a = mix_batch(r, onehot, trees, valid, 1.5, 1e-12, zero)
    b = mix_batch(r, onehot, trees[:4], valid[:4], 1.5, 1e-12, zero)
    gap = np.sqrt(((5 * a[0] - 4 * b[0]) ** 2).sum() + ((5 * a[1] - 4 * b[1]) ** 2).sum())
    assert gap <= 1.5 + 1e-6
    with pytest.raises(ValueError, match="secret noise"):
        mix_batch(r, onehot, trees, valid, 1.5, 1.0, None)


def _client(view, settings, noise_seed):
    return EgoClient(view, ExperimentConfig(), settings, "fedego", None, seed=7,
                     noise_seed=noise_seed)  # type: ignore[arg-type]


def test_dp_noise_is_secret_not_drawn_from_the_experiment_seed():
    view = tiny_world().views[0]
    dp, plain = FedEgoSettings(**SMALL, dp_noise=1.0), FedEgoSettings(**SMALL)
    ups = []
    for settings, noise_seed in ((plain, None), (plain, None), (dp, None), (dp, None),
                                 (dp, 3), (dp, 3)):  # fmt: skip
        c = _client(view, settings, noise_seed)
        c._mixup(0)
        ups.append(c.upload["r"])
    assert np.array_equal(ups[0], ups[1])  # same experiment seed: same batches, same r
    assert not np.allclose(ups[2], ups[3])  # secret noise differs although the seed is equal
    assert np.array_equal(ups[4], ups[5])  # a test's explicit noise seed reproduces


def test_label_skew_split_keeps_test_sets_apart():
    world = tiny_world()
    members = world.members
    test_global = set()
    for v, m in zip(world.views, members, strict=True):
        tm = v.test_mask.numpy()
        assert tm.sum() == 20 and not (tm & v.train_mask.numpy()).any()
        assert test_global.isdisjoint(m[tm])  # a local test node never reappears later
        test_global |= set(m[tm])
        assert len(set(m)) == m.size
    kept = 400 - 1  # csbm(seed 0) has one isolated node, which the split drops
    assert world.global_test.num_nodes == int(kept * 0.3)


@pytest.mark.parametrize("protocol", ["plain", "secagg"])
def test_end_to_end_through_the_protocol_stack(protocol):
    world = tiny_world()
    algo, transcript = build(world, protocol)
    losses = [algo.train_round(t) for t in range(3)]
    assert np.isfinite(losses).all()
    preds = algo.predict()
    acc = np.mean([(p["test"][0] == p["test"][1]).mean() for p in preds])
    assert acc > 0.4  # 4 classes: chance 0.25
    assert len(algo.predict_global(world.global_test)) == 3
    mixed = [e for e in transcript.view("server").entries if e.tag == TAG_MIXED]
    assert {e.sender for e in mixed} == set(algo.ids)
    r = mixed[0].payload().array("r")
    assert r.shape[1:] == (SLOTS, 16)
    # the shared layer is the same everywhere after a round (the protocol's mean)
    lows = [c.model.low.weight.detach().numpy() for c in algo.clients.values()]
    algo.train_round(3)
    starts = [c.start for c in algo.clients.values()]
    assert all(np.allclose(starts[0], s, atol=1e-5) for s in starts)
    assert not np.allclose(lows[0], lows[1])  # before the mean: the clients' own layers
    assert algo.privacy().get("mixup_epsilon") is None


def test_dp_run_states_epsilon_against_the_server():
    algo, _ = build(tiny_world(), "secagg", dp_noise=2.0)
    algo.train_round(0)
    algo.train_round(1)
    privacy = algo.privacy()
    assert 0 < privacy["mixup_epsilon"] < 10 and privacy["mixup_unit"].startswith("one ego")
    assert privacy["epsilon"] == privacy["mixup_epsilon"] and privacy["adversary"] == "server"


@pytest.mark.parametrize("baseline", ["fedego-fedavg", "fedego-local"])
def test_a_baseline_claims_no_mixup_epsilon_it_does_not_spend(baseline, caplog):
    """The baselines send no mixed ego-graphs: dp_noise does nothing there, and ε = 0 'vs
    server' would be a claim about a release that never happens."""
    from securefgl.experiment.runner import load_graph, run_single

    config = ExperimentConfig(dataset="csbm", csbm={"num_nodes": 200}, clients=3, rounds=1,
                              algorithms=[baseline], fedego={**SMALL, "dp_noise": 1.0})
    run = run_single(config, baseline, 0, load_graph(config), progress=False)
    assert not run.privacy.get("guarantees") and "mixup_epsilon" not in run.privacy
    assert "sends no mixed ego-graphs" in caplog.text


def test_a_run_states_each_claim_once():
    from securefgl.experiment.runner import load_graph, run_single

    config = ExperimentConfig(dataset="csbm", csbm={"num_nodes": 200}, clients=3, rounds=1,
                              algorithms=["fedego"], protocol=["secagg", "clip_noise"])
    run = run_single(config, "fedego", 0, load_graph(config), progress=False)
    claims = [(g["adversary"], g["epsilon"]) for g in run.privacy["guarantees"]]
    assert len(claims) == len(set(claims)) == 2  # the stack's: vs server, vs model observers


def test_demix_attack_reads_labels_exactly_without_mixing():
    world = tiny_world()
    algo, transcript = build(world, "secagg", mixup=False)
    algo.train_round(0)
    seen = {e.sender: e.payload().fields for e in transcript.view("server").entries
            if e.tag == TAG_MIXED}  # fmt: skip
    res = demix_attack(algo, seen, 0, None, world.members, {}, "none")
    assert res.value == 1.0 and res.leaks()  # B = 1: every label read off ȳ₀
    assert res.metrics["r_cosine"] > 0.999  # and every r is the upload itself


def test_secagg_gives_the_plaintext_mean_of_the_shared_layer():
    world = tiny_world()
    runs = []
    for protocol in ("plain", "secagg"):
        algo, _ = build(world, protocol)
        for t in range(2):
            algo.train_round(t)
        algo.train_round(2)  # loads round 1's mean first
        runs.append(np.stack([c.start for c in algo.clients.values()]))
    assert np.abs(runs[0] - runs[1]).max() < 1e-4  # fixed-point encoding only


def test_the_reduction_of_a_batchs_rows_equals_the_full_reduction_sliced() -> None:
    """``EgoNet.reduce_rows`` (embedding_bag over a sparse batch's non-zeros) is
    ``reduce(x)[rows]``, values and gradients, a row without non-zeros included."""
    import numpy as np
    import torch

    from securefgl.algorithms.fedego.model import EgoNet

    torch.manual_seed(0)
    x = (torch.rand(50, 30) < 0.1).float() * torch.rand(50, 30)
    x[7] = 0.0
    rows = np.array([0, 7, 3, 49, 7])
    grads = []
    for compute in (lambda m: m.reduce_rows(x.to_sparse_csr(), rows),
                    lambda m: m.reduce_rows(x, rows),
                    lambda m: m.reduce(x)[torch.from_numpy(rows)]):  # fmt: skip
        torch.manual_seed(1)
        model = EgoNet(30, 16, 3)
        out = compute(model)
        (out * torch.arange(out.numel()).view_as(out)).sum().backward()
        grads.append((out.detach(), model.low.weight.grad.clone(), model.low.bias.grad.clone()))
    for got in grads[:2]:
        for a, b in zip(got, grads[2], strict=True):
            assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("authors", [False, True])
def test_authors_server_edges_leave_trees_past_the_largest_upload_edgeless(authors) -> None:
    """The authors' server concatenates the clients' trees without offsetting their edges:
    with ``authors_server_edges`` the server trains on lone centres past the largest
    client's tree count, by default every tree keeps its children."""
    algo, transcript = build(tiny_world(), authors_server_edges=authors)
    server = algo.server
    seen: list[torch.Tensor] = []
    personal = server.net.personal

    def spy(h0: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        seen.append(valid.clone())
        return personal(h0, valid)

    server.net.personal = spy
    algo.train_round(0)
    counts = [e.payload().array("r").shape[0] for e in transcript.view("server").entries
              if e.tag == TAG_MIXED]  # fmt: skip
    valid = torch.cat(seen)
    assert valid[:, 0].all()
    lone = int((~valid[:, 1:].any(1)).sum())
    drawn = valid.shape[0]  # each server epoch draws the same number of trees
    if not authors:
        assert lone == 0
    else:  # the share of lone centres drawn ≈ the share past the largest count
        share = 1 - max(counts) / sum(counts)
        assert share > 0.5 and abs(lone / drawn - share) < 0.15


def test_evaluation_draws_repeat_per_draw_and_leave_training_alone() -> None:
    """Draw 0 is the fixed default; another draw samples other trees (the authors' fresh
    evaluation) and is itself repeatable; evaluating never moves the training streams."""
    world = tiny_world()
    algo, _ = build(world)
    algo.train_round(0)
    def test_preds(draw: int | None = None) -> list[np.ndarray]:
        preds = algo.predict() if draw is None else algo.predict(draw)
        return [p["test"][1] for p in preds]

    default = test_preds()
    assert all(np.array_equal(a, b) for a, b in zip(default, test_preds(0), strict=True))
    fresh = test_preds(7)
    assert all(np.array_equal(a, b) for a, b in zip(fresh, test_preds(7), strict=True))
    glob = algo.predict_global(world.global_test, 7)
    assert glob == algo.predict_global(world.global_test, 7)
    assert not all(np.array_equal(a, b) for a, b in zip(default, fresh, strict=True))
    with pytest.raises(ValueError, match="draw"):
        algo.predict(-1)
    algo.train_round(1)
    twin, _ = build(world)
    twin.train_round(0)
    twin.train_round(1)  # no evaluation in between: the same model
    for a, b in zip(algo.clients.values(), twin.clients.values(), strict=True):
        assert torch.equal(a.model.low.weight, b.model.low.weight)


def test_the_mixup_ledger_uses_the_runs_accountant():
    from securefgl.experiment.runner import load_graph, run_single

    config = ExperimentConfig(dataset="csbm", csbm={"num_nodes": 200}, clients=3, rounds=1,
                              algorithms=["fedego"], fedego={"dp_noise": 2.0},
                              protocol={"dp_accountant": "prv"})  # fmt: skip
    run = run_single(config, "fedego", 0, load_graph(config), progress=False)
    assert run.privacy["mixup_accountant"] == "prv"
    assert [g["accountant"] for g in run.privacy["guarantees"]] == ["prv"]
