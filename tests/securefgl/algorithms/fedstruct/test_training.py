"""FedStruct training: it learns, protocols agree, and the transcript holds only θ / S."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from protocols.bundles import unbundle
from protocols.secure_sum.parties import TAG_CONTRIBUTION
from securefgl.algorithms import registry
from securefgl.algorithms.fedstruct.abar_central import central_abar
from securefgl.algorithms.fedstruct.algorithm import FedStruct, oracle_abar_rows
from securefgl.algorithms.fedstruct.parties import MODEL_TAG, NSF_ALL_TAG, NSF_TAG
from securefgl.algorithms.fedstruct.settings import FedStructSettings
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data import build_client_views, csbm, partition_graph, random_split
from securefgl.experiment.runner import run_single
from securefgl.federation import Channel, Transcript
from securefgl.federation.federation import Federation
from securefgl.federation.stack import build_stack

SMALL = {"num_nodes": 600, "num_features": 16, "feature_signal": 0.3, "homophily": 0.8}
TINY = dict(nsf_dim=16, structure_hidden=(16,), feature_hidden=(16,), lr=0.01, dropout=0.5)


def _config(**kw):
    base = dict(
        csbm=SMALL, clients=4, partition="random", cross_edges="known", rounds=30,
        eval_every=10, hidden=16, lr=0.01,
    )  # fmt: skip
    return ExperimentConfig(**{**base, **kw})


def _settings(**kw):
    return FedStructSettings(**{**TINY, "structure_hops": 2, "prune": "none", **kw})


@pytest.fixture(scope="module")
def graph():
    return csbm(**SMALL)


@pytest.fixture(scope="module")
def small_views():
    g = csbm(num_nodes=240, num_classes=3, num_features=8, avg_degree=6, seed=4)
    g.train_mask, g.val_mask, g.test_mask = random_split(g.num_nodes, 0.2, 0.2, 0.6, seed=1)
    part = partition_graph(g, 3, "random", seed=2)
    return g, build_client_views(g, part.assignment, "known", seed=3)


def _setup(views, settings, protocol=(), store=True, seed=0, **cfg):
    config = _config(protocol=list(protocol), clients=len(views), **cfg)
    channel = Channel(Transcript(store_payloads=store))
    algo = FedStruct(config, settings)
    algo.setup(Federation(views, channel, build_stack(config, len(views)), seed))
    return algo, channel.transcript


def test_fedstruct_beats_local_and_fedavg(graph, monkeypatch):
    """H2V, unpruned Ā with L_s = 2, random partition K = 4 (through the runner)."""
    real = registry.algorithm_class
    class Fixed(FedStruct):  # the runner builds it from the config alone
        def __init__(self, config):
            super().__init__(config, settings=_settings())

    fixed = Fixed
    monkeypatch.setattr(
        "securefgl.experiment.runner.algorithm_class",
        lambda name, task="node": fixed if name == "fedstruct" else real(name, task),
    )
    cfg = _config()
    algos = ("fedstruct", "local", "fedavg")
    acc = {a: run_single(cfg, a, 0, graph, progress=False) for a in algos}
    fs = acc["fedstruct"]
    assert fs.federated and fs.setup_bytes > 0
    test = {a: r.final["test_acc"] for a, r in acc.items()}
    assert test["fedstruct"] > max(test["local"], test["fedavg"]) + 0.15, test
    assert fs.history[-1]["loss"] < fs.history[0]["loss"]


def _built_abar_matches_the_oracle(views, settings, atol, store=False):
    """Set up FedStruct (which builds Ā through the channel); every Ā^[i] equals the
    simulator's rows to ``atol``. Returns the set-up algorithm and transcript."""
    algo, transcript = _setup(views, settings, store=store)
    oracle = oracle_abar_rows(views, settings)
    for v in views:
        got = algo.clients[f"client-{v.client_id}"].abar
        np.testing.assert_allclose(got.toarray(), oracle[v.client_id].toarray(), atol=atol)
    return algo, transcript


def test_federated_abar_matches_the_oracle_unpruned(small_views):
    _, views = small_views
    _, transcript = _built_abar_matches_the_oracle(views, _settings(structure_hops=3), 1e-12)
    assert any(t.startswith("fedstruct/abar") for t in {e.tag for e in transcript.entries})


@pytest.mark.parametrize("sum_mode", ["masked", "ckks"])
def test_secure_abar_build_equals_the_plain_one(small_views, sum_mode):
    """Alg. 3 with a secure per-hop sum (through the server) gives the same Ā^[i]."""
    _, views = small_views
    settings = _settings(structure_hops=2, sum_mode=sum_mode)
    algo, transcript = _built_abar_matches_the_oracle(views, settings, 1e-6)
    assert not any(e.tag == "fedstruct/abar/B" for e in transcript.entries)  # no plain blocks
    assert np.isfinite(algo.train_round(0))


@pytest.mark.parametrize(
    ("option", "atol", "bad"),
    [
        # the circulant mask graph: the same Ā
        ({"abar_collusion_threshold": 1}, 1e-6, [{"abar_collusion_threshold": 0}]),
        # receiver masks only: the same Ā; no threshold without pair masks
        (
            {"abar_pair_masks": False},
            1e-6,
            [{"abar_pair_masks": False, "abar_collusion_threshold": 1}],
        ),
        # Z_2^32: within the ring's bound (2^-21 per exchanged hop)
        (
            {"abar_ring_bits": 32},
            2.0**-21,
            [{"abar_ring_bits": 16}, {"abar_ring_bits": 32, "abar_degree_bound": 1}],
        ),
    ],
)
def test_masked_abar_options_reach_the_hop_sums(small_views, option, atol, bad):
    """``abar_collusion_threshold`` / ``abar_pair_masks`` / ``abar_ring_bits`` reach the
    masked hop sums (settings from the config too); bad values and other sums refuse."""
    _, views = small_views
    settings = _settings(structure_hops=2, sum_mode="masked", **option)
    _, transcript = _built_abar_matches_the_oracle(views, settings, atol, store=True)
    words = [
        part.fields["y"]
        for e in transcript.entries
        if e.tag == TAG_CONTRIBUTION
        for part in unbundle(e.payload(), "test").values()
    ]
    assert words and all(
        w.dtype == (np.uint32 if "abar_ring_bits" in option else np.uint64) for w in words
    )
    from_config = FedStructSettings.of(_config(fedstruct={"sum_mode": "masked", **option}))
    assert all(getattr(from_config, k) == v for k, v in option.items())
    with pytest.raises(ConfigError, match="apply to sum_mode='masked'"):
        _config(fedstruct={"sum_mode": "ckks", **option})
    for wrong in [{"sum_mode": "ckks", **option}] + [{"sum_mode": "masked", **b} for b in bad]:
        expected = "abar|degree|fixed-point bound|sum_mode"
        with pytest.raises((ValueError, OverflowError), match=expected):
            _setup(views, _settings(structure_hops=2, **wrong), store=False)


def test_plain_and_secagg_give_the_same_losses(small_views):
    _, views = small_views
    losses = {}
    for proto in ((), ("secagg",)):
        torch.manual_seed(0)
        algo, _ = _setup(views, _settings(), proto, store=False)
        losses[proto] = [algo.train_round(r) for r in range(4)]
    np.testing.assert_allclose(losses[()], losses[("secagg",)], rtol=1e-4)
    assert losses[()][-1] < losses[()][0]


def test_ckks_clients_hold_the_model(small_views):
    _, views = small_views
    torch.manual_seed(0)
    plain, _ = _setup(views, _settings(), store=False)
    ref = [plain.train_round(r) for r in range(2)]
    torch.manual_seed(0)
    algo, transcript = _setup(views, _settings(), ("ckks",), store=False)
    got = [algo.train_round(r) for r in range(2)]
    assert algo.server.params is None  # sent once; the server never holds the trained model
    np.testing.assert_allclose(got, ref, rtol=1e-3)
    first = [c.params for c in algo.clients.values()]
    assert all(np.array_equal(first[0], p) for p in first)


def _feature_rows(x: torch.Tensor) -> set:
    return {tuple(r) for r in x.numpy().round(5).tolist()}


def test_clients_receive_only_theta_and_s(small_views):
    g, views = small_views
    for settings in (_settings(), _settings(nsf="degree")):
        algo, transcript = _setup(views, settings)
        for r in range(2):
            algo.train_round(r)
        for v in views:
            cid = f"client-{v.client_id}"
            view = transcript.view(cid)
            fedstruct_tags = {t for t in view.tags() if t.startswith("fedstruct/")}
            allowed = {MODEL_TAG, NSF_ALL_TAG, "fedstruct/abar/B", "fedstruct/abar/size"}
            assert fedstruct_tags <= allowed, fedstruct_tags
            assert MODEL_TAG in fedstruct_tags
            assert (NSF_ALL_TAG in fedstruct_tags) == (settings.nsf != "hop2vec")
            others = _feature_rows(g.x) - _feature_rows(v.x)
            for env in view.messages():
                for arr in env.payload.fields.values():
                    if isinstance(arr, np.ndarray) and arr.size % g.num_features == 0:
                        rows = arr.astype(np.float64).reshape(-1, g.num_features).round(5)
                        assert not ({tuple(r) for r in rows.tolist()} & others), env.tag
            # what the client object holds: its own features only
            client = algo.clients[cid]
            assert client.view.x.shape[0] == v.num_nodes
            assert torch.equal(client.view.x, v.x)
        server_tags = transcript.view("server").tags()
        assert NSF_TAG in server_tags


@pytest.mark.parametrize("structure_mlp", [False, True])
def test_s_gradient_is_supported_on_the_clients_abar_rows(small_views, structure_mlp):
    """The documented leak: over plain aggregation the server reads each client's
    S-gradient, whose non-zero rows are the nodes within L_s (pruned) hops of the
    client's labelled nodes, i.e. the support of Ā^[i]'s labelled rows (Prop. 2).

    With pure Hop2Vec (Eq. 15) row u of the gradient is Σ_v Ā_vu (ŷ_v − y_v): non-zero
    on exactly that support. Through the structure MLP a row can also vanish when
    dropout and dead ReLUs zero every hidden unit for that node, so there the leak is a
    subset of the support (and still most of it)."""
    g, views = small_views
    settings = _settings(structure_hops=2, prune="receiver", prune_p=2, structure_mlp=structure_mlp)
    algo, transcript = _setup(views, settings)
    algo.train_round(0)
    theta_dim = next(iter(algo.clients.values())).theta_dim
    n = g.num_nodes
    updates = [e for e in transcript.view("server").entries if e.tag == "plain/update"]
    assert len(updates) == len(views)
    for entry in updates:
        client = algo.clients[entry.sender]
        upload = entry.payload().array("weighted")
        s_grad = upload[theta_dim:].reshape(n, -1)
        leaked = np.flatnonzero(np.abs(s_grad).sum(1))
        support = np.unique(client.abar[client.train_rows].indices)
        if structure_mlp:
            assert set(leaked) <= set(support)
            assert leaked.size >= 0.8 * support.size
        else:
            np.testing.assert_array_equal(leaked, support)
        assert 0 < leaked.size < n
        assert np.any(upload[:theta_dim] != 0)


@pytest.mark.parametrize("nsf", ["degree", "fedstar", "random"])
def test_task_agnostic_nsfs_train_theta_only(small_views, nsf):
    _, views = small_views
    algo, transcript = _setup(views, _settings(nsf=nsf))
    client = next(iter(algo.clients.values()))
    assert algo.dim == client.theta_dim  # S is fixed: only θ is aggregated
    s_ref = client.s.detach().clone()
    losses = [algo.train_round(r) for r in range(3)]
    assert np.isfinite(losses).all()
    assert torch.equal(client.s, s_ref)
    for c in algo.clients.values():  # every client holds the same full S
        assert torch.equal(c.s, s_ref)
    preds = algo.predict()
    assert sum(p["test"][0].size for p in preds) == int(sum(v.test_mask.sum() for v in views))


def test_pure_hop2vec_without_structure_mlp(small_views):
    g, views = small_views
    settings = _settings(structure_mlp=False)
    algo, _ = _setup(views, settings)
    client = next(iter(algo.clients.values()))
    assert client.s.shape == (g.num_nodes, 3) and client.model.structure_mlp is None
    assert algo.dim == client.theta_dim + g.num_nodes * 3
    losses = [algo.train_round(r) for r in range(5)]
    assert losses[-1] < losses[0]


def test_given_abar_rows_skip_the_build(small_views):
    g, views = small_views
    abar = central_abar(g.edge_index, g.num_nodes, 2)
    perm = np.random.default_rng([3, 0x5EC0FD]).permutation(g.num_nodes)  # view seed 3
    inv = np.argsort(perm)
    rows = {v.client_id: sp.csr_matrix(abar[inv[v.node_ids.numpy()]][:, inv]) for v in views}
    config = _config(clients=3)
    algo = FedStruct(config, _settings(), abar_rows=rows)
    channel = Channel(Transcript())
    algo.setup(Federation(views, channel, build_stack(config, 3), 0))
    assert not any(e.tag.startswith("fedstruct/abar") for e in channel.transcript.entries)
    oracle = oracle_abar_rows(views, _settings())
    for v in views:
        got = algo.clients[f"client-{v.client_id}"].abar
        np.testing.assert_allclose(got.toarray(), oracle[v.client_id].toarray(), atol=1e-12)


def test_hidden_cross_edges_are_rejected(small_views):
    g, _ = small_views
    part = partition_graph(g, 3, "random", seed=2)
    hidden = build_client_views(g, part.assignment, "hidden", seed=3)
    with pytest.raises(ConfigError, match="known"):
        _setup(hidden, _settings())


def test_abar_hops_over_the_round_limit_are_refused_with_advice(small_views):
    """``abar_max_round_gib``: dense rows supports (|R_i|·n values per sender) over the
    relay's limit stop the build with a ConfigError naming the cheaper union support; the
    union build fits the same limit and gives the same Ā."""
    _, views = small_views
    limit = 0.25e6 / 2**30  # 0.25 MB per hop
    rows = _settings(sum_mode="masked", abar_max_round_gib=limit)
    with pytest.raises(ConfigError, match="abar_support = 'union'.*abar_max_round_gib"):
        _setup(views, rows, store=False)
    union = _settings(sum_mode="masked", abar_support="union", abar_max_round_gib=limit)
    _built_abar_matches_the_oracle(views, union, 1e-6)
    _built_abar_matches_the_oracle(views, rows.replace(abar_max_round_gib=math.inf), 1e-6)
    for bad in (0.0, -1.0, "4"):
        with pytest.raises(ValueError, match="abar_max_round_gib"):
            rows.replace(abar_max_round_gib=bad)
        with pytest.raises(ConfigError, match="abar_max_round_gib"):
            _config(fedstruct={"abar_max_round_gib": bad})
