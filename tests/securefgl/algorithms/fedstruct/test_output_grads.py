"""Output gradients (``structure_grads="output"``): the aggregate of ``∂L_i/∂g(S)``,
expanded after aggregation, is the paper's aggregate of ``∇_θs`` and ``∇_S``."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch.nn import functional as F
from torch.nn.utils import parameters_to_vector

from securefgl.algorithms.fedstruct.model import FedStructModel, torch_sparse
from securefgl.algorithms.fedstruct.output_grads import expand_update, round_masks, upload_dim
from securefgl.algorithms.fedstruct.parties import MODEL_TAG, UPDATE_TAG
from securefgl.algorithms.fedstruct.settings import FedStructSettings
from tests.securefgl.algorithms.fedstruct.test_training import _settings, _setup, small_views

__all__ = ["small_views"]  # the module fixture, shared


def _client_gradients(model, s, abar, labels, masks):
    """One client's paper upload ``-(∇_θs ‖ ∇_S)`` and its output upload ``-E``."""
    model.zero_grad(set_to_none=True)
    s_leaf = s.detach().clone().requires_grad_(True)
    g = model.structure_output(s_leaf, masks)
    ce = F.cross_entropy(torch.sparse.mm(abar, g), labels)
    ce.backward()
    paper = -torch.cat([parameters_to_vector([p.grad for p in model.structure_mlp.parameters()]),
                        s_leaf.grad.reshape(-1)])  # fmt: skip
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        g = model.structure_output(s, masks)
    g.requires_grad_(True)
    F.cross_entropy(torch.sparse.mm(abar, g), labels).backward()
    return paper.double().numpy(), -g.grad.double().numpy()


@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_expanding_the_summed_output_gradients_gives_the_summed_paper_gradients(dropout):
    torch.manual_seed(0)
    n, d, c = 50, 12, 4
    model = FedStructModel(6, c, d, (8,), (10,), 1, dropout)
    model.train()
    s = torch.randn(n, d) * 0.1
    masks = round_masks(model, seed=3, round_idx=7, num_nodes=n)
    assert [m.shape for m in masks] == [(n, 10)]
    rng = np.random.default_rng(1)
    paper_sum, e_sum = 0.0, 0.0
    for _ in range(3):  # three clients, each with its own Ā rows and labels
        abar = sp.random(8, n, density=0.15, random_state=rng, format="csr")
        a = torch_sparse(abar)
        labels = torch.from_numpy(rng.integers(0, c, 8))
        paper, e = _client_gradients(model, s, a, labels, masks)
        paper_sum, e_sum = paper_sum + paper, e_sum + e
    f_dim = sum(p.numel() for p in model.feature_mlp.parameters())
    assert upload_dim(model, n, c) == f_dim + n * c
    u_f = rng.normal(size=f_dim)
    s_var = s.clone().requires_grad_(True)  # Hop2Vec: S is learnable
    full = expand_update(model, s_var, np.concatenate([u_f, e_sum.reshape(-1)]), masks)
    np.testing.assert_array_equal(full[:f_dim], u_f.astype(np.float32))
    np.testing.assert_allclose(full[f_dim:], paper_sum, rtol=1e-4, atol=1e-6)
    fixed = expand_update(model, s, np.concatenate([u_f, e_sum.reshape(-1)]), masks)
    np.testing.assert_allclose(fixed, full[: fixed.size])  # fixed NSFs: no S part


def test_masks_are_shared_per_round_and_fresh_across_rounds():
    model = FedStructModel(6, 3, 8, (8,), (16,), 1, 0.5)
    a, b = round_masks(model, 0, 1, 30), round_masks(model, 0, 1, 30)
    assert torch.equal(a[0], b[0])
    assert not torch.equal(a[0], round_masks(model, 0, 2, 30)[0])
    assert 0.3 < float(a[0].mean()) < 0.7
    pure = FedStructModel(6, 3, 3, (8,), (16,), 1, 0.5, structure_mlp=False)
    assert round_masks(pure, 0, 1, 30) == []


@pytest.mark.parametrize("protocol", [(), ("secagg",), ("ckks",)])
def test_without_dropout_output_gradients_train_exactly_like_the_paper(small_views, protocol):
    g, views = small_views
    params, losses, dims = {}, {}, {}
    for mode in ("nsf", "output"):
        algo, _ = _setup(views, _settings(dropout=0.0, structure_grads=mode), protocol,
                         store=False)  # fmt: skip
        losses[mode] = [algo.train_round(r) for r in range(3)]
        params[mode] = [c.params for c in algo.clients.values()]
        dims[mode] = algo.dim
        if mode == "output":
            assert all(np.array_equal(params[mode][0], p) for p in params[mode])
            if protocol != ("ckks",):
                assert algo.server.params is None  # it forwards the aggregate only
    assert dims["output"] < dims["nsf"] / 4
    np.testing.assert_allclose(losses["output"], losses["nsf"], rtol=1e-4)
    np.testing.assert_allclose(params["output"][0], params["nsf"][0], atol=2e-5)


def test_output_gradients_learn_with_dropout_and_clients_get_only_the_aggregate(small_views):
    _, views = small_views
    algo, transcript = _setup(views, _settings(structure_grads="output"), ("secagg",))
    losses = [algo.train_round(r) for r in range(8)]
    assert losses[-1] < losses[0]
    first = [c.params for c in algo.clients.values()]
    assert all(np.array_equal(first[0], p) for p in first)
    for cid in algo.clients:
        tags = transcript.view(cid).tags()
        assert UPDATE_TAG in tags and MODEL_TAG in tags  # the initial model, then aggregates


def test_output_gradients_need_the_structure_mlp():
    with pytest.raises(ValueError, match="structure MLP"):
        FedStructSettings(structure_grads="output", structure_mlp=False)
    with pytest.raises(ValueError, match="structure_grads"):
        FedStructSettings(structure_grads="theta")
