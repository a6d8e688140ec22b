"""FedGLS's Algorithm 1 on the runtime: graphless views, the gradient / schedule rules, θ
and φ through the protocol stack, FedAvg weights under secure aggregation, DP accounting."""

import dataclasses
import types

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from protocols.wire import Payload
from securefgl.algorithms.fedgls.clients import FedGLSClient, Layout
from securefgl.algorithms.fedgls.graphless import graphless_ids
from securefgl.algorithms.fedgls.settings import FedGLSSettings
from securefgl.config import ConfigError
from securefgl.experiment.runner import run_single
from securefgl.models import get_flat
from tests.securefgl.algorithms.fedgls.world import build, tiny_config, tiny_graph


@pytest.fixture(scope="module")
def graph():
    return tiny_graph()


def reachable(obj, seen=None):
    """Every object reachable through attributes, containers, tensor bases and grads."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, type | types.ModuleType | types.FunctionType):
        return
    seen.add(id(obj))
    yield obj
    if isinstance(obj, torch.Tensor):
        for attr in (obj._base, obj.grad):
            if attr is not None:
                yield from reachable(attr, seen)
        return
    if isinstance(obj, np.ndarray):
        return
    if isinstance(obj, dict):
        children = list(obj.keys()) + list(obj.values())
    elif isinstance(obj, list | tuple | set | frozenset):
        children = list(obj)
    elif dataclasses.is_dataclass(obj):
        children = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    else:
        children = list(getattr(obj, "__dict__", {}).values())
        if isinstance(obj, torch.optim.Optimizer):
            children += [obj.state, obj.param_groups]
    for child in children:
        yield from reachable(child, seen)


def integer_array(obj) -> np.ndarray | None:
    if (
        isinstance(obj, torch.Tensor)
        and not obj.dtype.is_floating_point
        and obj.dtype != torch.bool
    ):
        return obj.numpy()
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "iu":
        return obj
    return None


def pair_set(a: np.ndarray) -> set[tuple[int, int]]:
    return set(map(tuple, a.T.tolist())) if a.ndim == 2 and a.shape[0] == 2 else set()


def test_graphless_clients_hold_no_edge_of_their_graph(graph):
    cfg = tiny_config(rounds=3)
    algo, views, _ = build("fedgls", cfg, graph)
    for r in range(cfg.rounds):
        algo.train_round(r)
    graphless = [c for c in algo.clients.values() if c.graphless]
    assert len(graphless) == 2 and len(algo.clients) == 4
    for client in graphless:
        true = pair_set(views[client.view.client_id].edge_index.numpy())
        assert true and client.view.num_edges == 0
        learned = client.prop  # what the learner made from X and ω: recompute it
        with torch.no_grad():
            again = client.learner(client.view.x)
        assert torch.equal(again.rows, learned.rows) and torch.allclose(
            again.weights, learned.weights
        )
        n = client.view.num_nodes
        for obj in reachable(client):
            if obj is learned.rows or obj is learned.cols:
                continue  # the learned graph itself, just shown to be g(X; ω)
            arr = integer_array(obj)
            if arr is not None and arr.ndim == 2:
                assert not (pair_set(arr) | pair_set(arr.T)) & true, client.party_id
            if isinstance(obj, torch.Tensor) and obj.dtype.is_floating_point:
                assert tuple(obj.shape) != (n, n), f"{client.party_id} holds a dense n×n matrix"
    for client in (c for c in algo.clients.values() if not c.graphless):
        assert client.view.num_edges == views[client.view.client_id].num_edges


def test_graphless_draw_is_seeded_and_shared_by_the_family(graph):
    ids = list(range(8))
    s = FedGLSSettings(graphless_fraction=0.5)
    assert graphless_ids(ids, s, 3) == graphless_ids(ids, s, 3)
    assert len(graphless_ids(ids, s, 3)) == 4
    assert {frozenset(graphless_ids(ids, s, seed)) for seed in range(20)} != {
        frozenset(graphless_ids(ids, s, 0))
    }
    assert graphless_ids(ids, s.replace(graphless_clients=[1, 6]), 0) == {1, 6}
    with pytest.raises(ConfigError, match="not clients"):
        graphless_ids(ids, s.replace(graphless_clients=[9]), 0)
    cfg = tiny_config()
    drawn = {
        name: build(name, cfg, graph, store=False)[0].graphless
        for name in ("fedgls", "fed-gnnk", "fed-mlp", "fedproto", "local-gnnk")
    }
    assert len({frozenset(v) for v in drawn.values()}) == 1
    oracle, views, _ = build("fed-gnn-oracle", cfg, graph, store=False)
    assert all(
        c.view.num_edges == views[c.view.client_id].num_edges for c in oracle.clients.values()
    )


def test_one_learner_step_per_round_before_the_epochs(graph, monkeypatch):
    cfg = tiny_config(rounds=3, local_epochs=3)
    algo, _, _ = build("fedgls", cfg, graph, store=False)
    events: list[tuple[str, str]] = []
    for name in ("learn_graph", "ce_step", "kd_step"):
        original = getattr(FedGLSClient, name)

        def spy(self, *a, _name=name, _original=original, **k):
            events.append((self.party_id, _name))
            return _original(self, *a, **k)

        monkeypatch.setattr(FedGLSClient, name, spy)
    for r in range(cfg.rounds):
        algo.train_round(r)
    for cid, client in algo.clients.items():
        mine = [e for p, e in events if p == cid]
        per_round = (["learn_graph"] if client.graphless else []) + ["ce_step", "kd_step"] * 3
        assert mine == per_round * cfg.rounds


def test_learner_step_moves_only_omega_and_kd_only_phi(graph):
    algo, _, _ = build("fedgls", tiny_config(), graph, store=False)
    client = next(c for c in algo.clients.values() if c.graphless)
    client.load()
    theta, phi = get_flat(client.gcn), get_flat(client.mlp)
    omega = [w.detach().clone() for w in client.learner.weights]
    client.learn_graph()
    assert np.array_equal(get_flat(client.gcn), theta) and np.array_equal(get_flat(client.mlp), phi)
    assert any(not torch.equal(w, o) for w, o in zip(client.learner.weights, omega, strict=True))
    head = [p.detach().clone() for p in client.gcn.head.parameters()]
    client.kd_step(client.optimizer("phi", client.mlp))
    assert np.array_equal(get_flat(client.gcn), theta)  # θ_c (and θ_z) untouched by KD
    assert all(torch.equal(p, q) for p, q in zip(client.gcn.head.parameters(), head, strict=True))
    assert not np.array_equal(get_flat(client.mlp), phi)


def test_theta_and_phi_are_averaged_with_node_weights(graph):
    cfg = tiny_config(rounds=1)
    algo, _, transcript = build("fedgls", cfg, graph)
    start = algo.server.params.astype(np.float64)
    algo.train_round(0)
    ups = [e for e in transcript.entries if e.tag == "plain/update"]
    assert len(ups) == 4
    total, weights = 0.0, 0.0
    theta_dim = algo.layout.sizes[0]
    for e in ups:
        p = e.payload()
        w = p.meta["weight"]
        assert w == algo.clients[e.sender].view.num_nodes  # n_k: all nodes (Eq. 12)
        delta = p.array("weighted") / w
        assert np.abs(delta[:theta_dim]).sum() > 0 and np.abs(delta[theta_dim:]).sum() > 0
        total, weights = total + p.array("weighted").astype(np.float64), weights + w
    assert np.allclose(algo.server.params, start + total / weights, atol=1e-5)


def test_secure_aggregation_hides_each_weight_and_matches_plain(graph):
    cfg = tiny_config(rounds=2)
    runs = {}
    for proto in ([], ["secagg"], ["ckks"]):
        algo, _, transcript = build("fedgls", cfg.replace(protocol=proto), graph)
        for r in range(cfg.rounds):
            algo.train_round(r)
        runs[tuple(proto)] = (algo, transcript)
    secagg, transcript = runs[("secagg",)]
    to_server = [e for e in transcript.entries if e.receiver == "server" and e.round >= 0]
    assert to_server and not any(e.tag == "plain/update" for e in to_server)
    for e in to_server:
        assert "weight" not in e.payload().meta
    assert "learns only Σ n_k" in secagg.protection()["FedAvg weights n_k"]
    assert secagg.server.agg.result().total_weight == pytest.approx(
        sum(c.view.num_nodes for c in secagg.clients.values())
    )
    plain = runs[()][0]
    ckks = runs[("ckks",)][0]
    client = next(iter(ckks.clients))
    assert np.allclose(secagg.server.params, plain.server.params, atol=1e-4)
    assert np.allclose(ckks.clients[client].params, plain.server.params, atol=1e-4)
    assert ckks.server.params is None  # the server never holds the model under CKKS


def test_dp_accounting_charges_one_release_of_theta_and_phi_per_round(graph):
    cfg = tiny_config(rounds=3, protocol={"stack": ["clip_noise"], "dp_clip": 0.5, "dp_noise": 1.0})
    algo, _, transcript = build("fedgls", cfg, graph)
    for r in range(cfg.rounds):
        algo.train_round(r)
    stack = algo.federation.stack
    assert stack.rounds == cfg.rounds
    assert algo.dim == sum(algo.layout.sizes)  # θ ‖ φ: both in the one clipped release
    for e in transcript.entries:
        if e.tag == "plain/update":
            v = e.payload().array("weighted").astype(np.float64)
            assert np.linalg.norm(v) <= 0.5 + 1e-4  # the clip covers θ and φ together
            assert np.abs(v[algo.layout.sizes[0] :]).sum() > 0
    dp = {"stack": ["clip_noise"], "dp_clip": 0.5, "dp_noise": 1.0}
    fedavg_like = tiny_config(rounds=3, protocol=dp)
    ref, _, _ = build("fed-gnnk", fedavg_like, graph, store=False)
    for r in range(3):
        ref.train_round(r)
    assert stack.privacy()["epsilon"] == pytest.approx(ref.federation.stack.privacy()["epsilon"])


@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    trained=st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=5),
    weights=st.lists(st.floats(0.1, 10), min_size=5, max_size=5),
    seed=st.integers(0, 999),
)
def test_layout_averages_each_block_over_its_own_clients(sizes, trained, weights, seed):
    layout = Layout(tuple(sizes), indicators=True)
    rng = np.random.default_rng(seed)
    blocks = len(sizes)
    vectors, expected = [], [np.zeros(s) for s in sizes]
    totals = np.zeros(blocks)
    for row, w in zip(trained, weights, strict=False):
        mine = {b: rng.normal(size=sizes[b]) for b in range(blocks) if row[b]}
        vectors.append((layout.encode(mine), w))
        for b, d in mine.items():
            expected[b] += w * d
            totals[b] += w
    mean = sum(w * v for v, w in vectors) / sum(w for _, w in vectors)
    got = layout.decode(mean)
    for b in range(blocks):
        want = expected[b] / totals[b] if totals[b] else np.zeros(sizes[b])
        assert np.allclose(got[layout.block(b)], want)


def test_prototypes_cross_the_channel_and_average_by_count(graph):
    cfg = tiny_config(rounds=1)
    algo, _, transcript = build("fedproto", cfg, graph)
    algo.train_round(0)
    ups = [e.payload() for e in transcript.entries if e.tag == "plain/update"]
    classes, dim = 3, cfg.hidden
    assert len(ups) == 4 and all(p.array("weighted").size == classes * (dim + 1) for p in ups)
    stacked = np.stack([p.array("weighted").astype(np.float64) for p in ups]).sum(0)
    sums, counts = stacked[: classes * dim].reshape(classes, dim), stacked[classes * dim :]
    got = np.concatenate([c.params for c in algo.clients.values()]).reshape(4, -1)
    assert np.allclose(got[0], got[1])  # every client received the same prototypes
    assert np.allclose(
        got[0][: classes * dim].reshape(classes, dim), sums / counts[:, None], atol=1e-4
    )
    down = [e for e in transcript.entries if e.tag == "fedproto/prototypes" and e.round == 0]
    assert len(down) == 4
    assert isinstance(down[0].payload(), Payload)


@pytest.mark.parametrize(
    "name",
    ["fedgls", "fed-gnnk", "fed-mlp", "fed-gnnmlp", "fedproto", "local-gnnk", "fed-gnn-oracle"],
)
def test_every_method_runs_under_secagg_as_in_the_clear(graph, name):
    cfg = tiny_config(algorithms=[name], protocol=["secagg"], fedgls={"split": "C"})
    result = run_single(cfg, name, 0, graph, progress=False)
    plain = run_single(cfg.replace(protocol=["plain"]), name, 0, graph, progress=False)
    # fixed-point rounding (2^-24) may flip at most a near-tied node of the 31 tested
    assert abs(result.final["test_acc"] - plain.final["test_acc"]) <= 1 / 31 + 1e-9
    assert result.federated == (name != "local-gnnk")  # the local baseline trains alone
    assert result.model


@pytest.mark.parametrize(("clients", "fedgls", "fraction"), [
    (4, {"graphless_fraction": 0.25}, 1.0),  # one graphless client: its φ update alone
    (4, {}, 0.5),  # a sampled round may hold one client of a federation
])  # fmt: skip
def test_gnnmlp_refuses_a_federation_a_round_could_hold_alone(graph, clients, fedgls, fraction):
    cfg = tiny_config(algorithms=["fed-gnnmlp"], protocol=["secagg"], clients=clients,
                      client_fraction=fraction, fedgls={"split": "C", **fedgls})  # fmt: skip
    with pytest.raises(ConfigError, match="at least 2 every round"):
        run_single(cfg, "fed-gnnmlp", 0, graph, progress=False)
