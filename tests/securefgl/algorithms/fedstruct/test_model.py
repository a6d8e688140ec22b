"""FedStruct's predictor (Eq. 10), its gradients (Props. 2-3), NSFs and presets."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch import nn
from torch.nn import functional as F

from securefgl.algorithms.fedstruct.abar_central import central_abar
from securefgl.algorithms.fedstruct.model import AbarRows, FedStructModel, local_propagation, mlp
from securefgl.algorithms.fedstruct.nsf import (
    full_degree,
    node_structure_features,
    return_probabilities,
)
from securefgl.algorithms.fedstruct.settings import (
    GENERIC,
    FedStructSettings,
    apply_preset,
    preset_for,
)
from securefgl.config import ExperimentConfig
from securefgl.data import build_client_views, csbm, partition_graph, random_split


@pytest.fixture(scope="module")
def graph():
    g = csbm(num_nodes=200, num_classes=3, num_features=8, avg_degree=6, seed=3)
    g.train_mask, g.val_mask, g.test_mask = random_split(g.num_nodes, 0.3, 0.2, 0.5, seed=1)
    return g


@pytest.fixture(scope="module")
def views(graph):
    part = partition_graph(graph, 3, "random", seed=2)
    return build_client_views(graph, part.assignment, "known", seed=5)


def _abar_rows(graph, view, hops=2, prune=None):
    """Ā^[i] of ``view`` from the central Ā: own rows, columns moved to opaque ids."""
    abar = central_abar(graph.edge_index, graph.num_nodes, hops, prune=prune)
    perm = np.random.default_rng([5, 0x5EC0FD]).permutation(graph.num_nodes)  # view seed 5
    glob = np.argsort(perm)[view.node_ids.numpy()]  # global node of each local row
    rows = abar[glob]
    return sp.csr_matrix(rows[:, np.argsort(perm)]), abar, perm, glob


def test_opaque_permutation_matches_the_views(graph, views):
    from securefgl.data import opaque_id_permutation

    perm = opaque_id_permutation(graph.num_nodes, 5)
    view = views[0]
    glob = np.argsort(perm)[view.node_ids.numpy()]
    np.testing.assert_array_equal(graph.x[glob].numpy(), view.x.numpy())


def test_mlp_layout_is_layernorm_linear_relu_dropout_linear():
    m = mlp([10, 7, 5, 3], dropout=0.4)
    kinds = [type(layer) for layer in m]
    assert kinds == [
        nn.LayerNorm,
        nn.Linear,
        nn.ReLU,
        nn.Dropout,
        nn.Linear,
        nn.ReLU,
        nn.Dropout,
        nn.Linear,
    ]
    assert m[3].p == 0.4 and m[-1].out_features == 3


def test_local_propagation_is_row_stochastic_with_local_degrees(views):
    v = views[1]
    a = local_propagation(v.edge_index, v.num_nodes).to_dense().numpy()
    np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-6)
    deg = np.bincount(v.edge_index[0].numpy(), minlength=v.num_nodes)
    np.testing.assert_allclose(np.diag(a), 1.0 / (deg + 1), rtol=1e-6)


def test_forward_equals_dense_eq10(graph, views):
    """Sparse, support-compressed forward = softmax(Â_loc^L MLP_f(X) + Ā g(S)) densely."""
    torch.manual_seed(0)
    view = views[2]
    rows, *_ = _abar_rows(graph, view, hops=3, prune=4)
    model = FedStructModel(8, 3, nsf_dim=6, feature_hidden=(5,), structure_hidden=(4,))
    model.eval()
    s = torch.randn(graph.num_nodes, 6)
    a_loc = local_propagation(view.edge_index, view.num_nodes)
    some = np.array([0, 3, 5, view.num_nodes - 1])
    got = model(view.x, a_loc, AbarRows.of(rows, some), s)
    with torch.no_grad():
        f = model.feature_mlp(view.x)
        a_dense = a_loc.to_dense()
        f = a_dense @ (a_dense @ f)
        z = torch.from_numpy(rows.toarray()).float() @ model.structure_mlp(s)
    torch.testing.assert_close(got, (f + z)[torch.from_numpy(some)], rtol=1e-5, atol=1e-5)
    compressed = AbarRows.of(rows, some)
    assert set(compressed.cols) == set(rows[some].nonzero()[1])  # only the support


def test_prop2_s_gradient_of_pure_hop2vec_is_abar_transpose_residual(graph, views):
    """∇_S L_i = (Ā^[i]_labelled)^T (Ŷ - Y) for sum-CE and g = identity (Eq. 16)."""
    torch.manual_seed(1)
    view = views[0]
    rows, *_ = _abar_rows(graph, view, hops=2, prune=3)
    model = FedStructModel(8, 3, nsf_dim=3, structure_mlp=False, dropout=0.0)
    s = (0.05 * torch.randn(graph.num_nodes, 3)).requires_grad_()
    labelled = np.flatnonzero(view.train_mask.numpy())
    a_loc = local_propagation(view.edge_index, view.num_nodes)
    logits = model(view.x, a_loc, AbarRows.of(rows, labelled), s)
    y = view.y[torch.from_numpy(labelled)]
    F.cross_entropy(logits, y, reduction="sum").backward()
    residual = torch.softmax(logits, -1).detach().numpy() - np.eye(3)[y.numpy()]
    closed = rows[labelled].T @ residual
    np.testing.assert_allclose(s.grad.numpy(), closed, rtol=1e-5, atol=1e-6)
    support = np.unique(rows[labelled].indices)
    nonzero = np.flatnonzero(np.abs(s.grad.numpy()).sum(1))
    assert set(nonzero) <= set(support) and 0 < len(support) < graph.num_nodes


def test_prop3_theta_s_gradient_through_the_structure_mlp(graph, views):
    """∂L_i/∂θ_s = Σ_{v,u} Ā_vu ∂g(s_u)/∂θ_s (ŷ_v - y_v) (Eq. 22): a vector-Jacobian
    product of g with the cotangent Ā^T(Ŷ - Y), checked against autograd of the model."""
    torch.manual_seed(2)
    view = views[1]
    rows, *_ = _abar_rows(graph, view, hops=2)
    model = FedStructModel(8, 3, nsf_dim=5, structure_hidden=(4,), dropout=0.0)
    s = torch.randn(graph.num_nodes, 5)
    labelled = np.flatnonzero(view.train_mask.numpy())
    a_loc = local_propagation(view.edge_index, view.num_nodes)
    logits = model(view.x, a_loc, AbarRows.of(rows, labelled), s)
    y = view.y[torch.from_numpy(labelled)]
    F.cross_entropy(logits, y, reduction="sum").backward()
    auto = [p.grad.clone() for p in model.structure_mlp.parameters()]
    residual = torch.softmax(logits, -1).detach() - F.one_hot(y, 3).float()
    cotangent = torch.from_numpy(rows[labelled].T @ residual.numpy()).float()  # [n, c]
    g = model.structure_mlp(s)
    closed = torch.autograd.grad(g, list(model.structure_mlp.parameters()), cotangent)
    for a, c in zip(auto, closed, strict=True):
        torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-5)


def test_degree_nsf_counts_cross_edges(graph, views):
    perm = np.random.default_rng([5, 0x5EC0FD]).permutation(graph.num_nodes)
    deg = np.bincount(graph.edge_index[0].numpy(), minlength=graph.num_nodes)
    for v in views:
        glob = np.argsort(perm)[v.node_ids.numpy()]
        np.testing.assert_array_equal(full_degree(v), deg[glob])
        s = node_structure_features(v, "degree", 4)
        assert s.shape == (v.num_nodes, 4) and np.all(s.sum(1) == 1)
        np.testing.assert_array_equal(s.argmax(1), np.minimum(deg[glob], 3))  # clipped


def test_fedstar_return_probabilities(graph):
    """One client holding everything: exactly diag(Â^k); otherwise walks stay inside."""
    part = np.zeros(graph.num_nodes, dtype=np.int64)
    (whole,) = build_client_views(graph, part, "known", seed=0)
    s = node_structure_features(whole, "fedstar", 12, rw_steps=4)
    a_hat = central_abar(graph.edge_index, graph.num_nodes, 1).toarray()
    perm = np.random.default_rng([0, 0x5EC0FD]).permutation(graph.num_nodes)
    glob = np.argsort(perm)[whole.node_ids.numpy()]
    powers = [np.linalg.matrix_power(a_hat, k) for k in range(1, 5)]
    exact = np.stack([np.diag(p)[glob] for p in powers], axis=1)
    np.testing.assert_allclose(s[:, :4], exact, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(s[:, 4:].sum(1), 1.0)  # degree one-hot of width 8
    p = sp.random(30, 30, density=0.2, random_state=0, format="csr")
    dense = p.toarray()
    want = np.stack([np.diag(np.linalg.matrix_power(dense, k)) for k in (1, 2, 3)], 1)
    np.testing.assert_allclose(return_probabilities(p, 3, block=7), want, rtol=1e-10)


def test_fedstar_is_a_lower_bound_when_walks_leave_the_client(graph, views):
    a_hat = central_abar(graph.edge_index, graph.num_nodes, 1).toarray()
    perm = np.random.default_rng([5, 0x5EC0FD]).permutation(graph.num_nodes)
    v = views[0]
    glob = np.argsort(perm)[v.node_ids.numpy()]
    s = node_structure_features(v, "fedstar", 10, rw_steps=3)
    np.testing.assert_allclose(s[:, 0], np.diag(a_hat)[glob], rtol=1e-6)  # 1 step is exact
    exact2 = np.diag(a_hat @ a_hat)[glob]
    assert np.all(s[:, 1] <= exact2 + 1e-7) and np.any(s[:, 1] < exact2 - 1e-6)


def test_random_and_hop2vec_nsfs_are_seeded_per_client(views):
    a = node_structure_features(views[0], "hop2vec", 64, seed=1)
    assert a.dtype == np.float32 and abs(a.std() - 0.05) < 0.01
    np.testing.assert_array_equal(a, node_structure_features(views[0], "hop2vec", 64, seed=1))
    assert not np.allclose(a[:5], node_structure_features(views[0], "hop2vec", 64, seed=2)[:5])
    b = node_structure_features(views[1], "random", 64, seed=1)
    assert abs(b.std() - 1.0) < 0.1
    with pytest.raises(ValueError, match="unknown NSF"):
        node_structure_features(views[0], "gdv", 8)


def test_presets_follow_table5():
    cora = preset_for("Cora")
    assert (cora.lr, cora.weight_decay, cora.epochs) == (0.002, 5e-4, 40)
    assert (cora.feature_hops, cora.structure_hops, cora.nsf_dim, cora.prune_p) == (2, 10, 256, 30)
    assert cora.feature_hidden == (64,) and cora.structure_hidden == (256,)
    assert preset_for("citeseer").structure_hidden == (128, 64)
    assert preset_for("PubMed").epochs == 125 and preset_for("pubmed").lr == 0.008
    assert preset_for("chameleon").structure_hops == 1
    assert preset_for("Amazon-Photo").epochs == 150
    assert preset_for("Amazon-ratings").structure_hops == 5
    assert preset_for("csbm") == GENERIC
    assert cora.hop_weights == (0.0,) * 9 + (1.0,)


def test_settings_from_config_and_apply_preset():
    cfg = ExperimentConfig(dataset="cora", lr=0.01)
    st = FedStructSettings.of(cfg)
    assert st.structure_hops == 10 and st.lr == 0.01  # preset architecture, config lr
    faithful = apply_preset(cfg)
    assert (faithful.lr, faithful.rounds, faithful.dropout) == (0.002, 40, 0.75)
    future = ExperimentConfig(
        dataset="cora", lr=0.002, weight_decay=0.0, dropout=0.1,
        fedstruct={"nsf": "degree", "structure_hops": 3, "prune": "none", "feature_hidden": [32]},
    )  # fmt: skip
    st = FedStructSettings.of(future)
    assert (st.lr, st.weight_decay, st.dropout) == (0.002, 0.0, 0.1)
    assert (st.nsf, st.structure_hops, st.prune, st.feature_hidden) == ("degree", 3, "none", (32,))
    assert st.structure_hidden == (256,)
    with pytest.raises(ValueError, match="unknown nsf"):
        FedStructSettings(nsf="node2vec")
    with pytest.raises(ValueError, match="pure Hop2Vec"):
        FedStructSettings(nsf="degree", structure_mlp=False)
    with pytest.raises(ValueError, match="needs nsf_dim >= 2"):  # before Ā is built
        FedStructSettings(nsf="fedstar", nsf_dim=1)
