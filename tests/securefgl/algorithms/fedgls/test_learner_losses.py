"""The graph learner (App. B, Eq. 15-18) and the losses (Eq. 8-11) against direct
transcriptions of the paper's formulas."""

import math

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.nn import functional as F

from securefgl.algorithms.fedgls.learner import AttentiveLearner, feature_knn, knn_propagation
from securefgl.algorithms.fedgls.losses import contrastive_loss, kd_loss
from securefgl.algorithms.fedgls.models import Net, gcn_propagation


def dense(prop) -> np.ndarray:
    out = np.zeros((prop.num_nodes, prop.num_nodes))
    np.add.at(out, (prop.rows.numpy(), prop.cols.numpy()), prop.weights.detach().numpy())
    return out


def reference_graph(r: np.ndarray, k: int) -> np.ndarray:
    """Eq. 16-18 written out densely: top-(k+1) per row, ReLU, (S + Sᵀ)/2, D^-1/2 S D^-1/2."""
    sim = r @ r.T
    sp = np.zeros_like(sim)
    for i, row in enumerate(sim):
        keep = np.argsort(-row, kind="stable")[: k + 1]
        sp[i, keep] = row[keep]
    sym = (np.maximum(sp, 0) + np.maximum(sp, 0).T) / 2
    inv = 1 / (np.sqrt(sym.sum(1)) + 1e-10)
    return inv[:, None] * sym * inv[None, :]


@given(
    n=st.integers(3, 25),
    d=st.integers(2, 8),
    k=st.integers(1, 6),
    seed=st.integers(0, 10_000),
)
def test_knn_graph_is_eq_16_to_18(n, d, k, seed):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    r = F.normalize(x, dim=1)
    got = dense(knn_propagation(r, k))
    assert np.allclose(got, got.T)
    assert np.allclose(got, reference_graph(r.numpy(), min(k, n - 1)), atol=1e-10)


def test_learner_starts_at_the_feature_knn_and_trains_through_the_kept_values():
    x = (torch.rand(30, 12, generator=torch.Generator().manual_seed(1)) < 0.4).float()
    learner = AttentiveLearner(12, layers=2, k=4)
    assert np.allclose(dense(learner(x)), dense(feature_knn(x, 4)), atol=1e-6)
    target = torch.randn(30, 5, generator=torch.Generator().manual_seed(2))
    (learner(x)(target) ** 2).sum().backward()
    assert all(float(w.grad.abs().sum()) > 0 for w in learner.weights)


def test_gcn_normalisation():
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    a = np.eye(3) + np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]])
    inv = 1 / np.sqrt(a.sum(1))
    assert np.allclose(dense(gcn_propagation(ei, 3)), inv[:, None] * a * inv[None, :])


def eq8(z: np.ndarray, h: np.ndarray, tau: float) -> float:
    """Eq. 8-9 written out with loops (cosine similarity)."""

    def cos(a, b):
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    n, total = len(z), 0.0
    for i in range(n):
        den = sum(
            math.exp(cos(z[i], h[j]) / tau) + math.exp(cos(z[i], z[j]) / tau)
            for j in range(n)
            if j != i
        )
        total += -math.log(math.exp(cos(z[i], h[i]) / tau) / den)
    return total / n


@given(n=st.integers(2, 9), d=st.integers(2, 5), tau=st.floats(0.1, 2.0), seed=st.integers(0, 999))
def test_contrastive_loss_is_eq_8_9(n, d, tau, seed):
    gen = torch.Generator().manual_seed(seed)
    z, h = (
        torch.randn(n, d, generator=gen, dtype=torch.float64),
        torch.randn(n, d, generator=gen, dtype=torch.float64),
    )
    assert math.isclose(
        float(contrastive_loss(z, h, tau)),
        eq8(z.numpy(), h.numpy(), tau),
        rel_tol=1e-9,
        abs_tol=1e-9,
    )


def test_contrastive_loss_is_not_nt_xent():
    """The positive is not in the denominator: perfectly aligned pairs can go below 0."""
    z = torch.eye(3, dtype=torch.float64)
    assert float(contrastive_loss(z, z.clone(), 0.2)) < 0


@given(n=st.integers(1, 12), c=st.integers(2, 5), seed=st.integers(0, 999))
def test_kd_loss_sums_kl_teacher_to_student_over_nodes(n, c, seed):
    gen = torch.Generator().manual_seed(seed)
    student = torch.randn(n, c, generator=gen, dtype=torch.float64)
    teacher = torch.softmax(torch.randn(n, c, generator=gen, dtype=torch.float64), -1)
    s = torch.softmax(student, -1)
    kl = (teacher * (teacher.log() - s.log())).sum()
    assert math.isclose(float(kd_loss(student, teacher, "sum")), float(kl), rel_tol=1e-9)
    assert math.isclose(float(kd_loss(student, teacher, "batchmean")), float(kl) / n, rel_tol=1e-9)


def test_split_a_and_c_shapes():
    x, prop = torch.rand(6, 5), gcn_propagation(torch.tensor([[0, 1], [1, 0]]), 6)
    a, c = Net("gcn", 5, 4, 3, "A", 0.0), Net("gcn", 5, 4, 3, "C", 0.0)
    assert a.encode(x, prop).shape == (6, 4) and a(x, prop).shape == (6, 3)
    assert c.encode(x, prop).shape == (6, 3) and c.head is None
    h = Net("mlp", 5, 4, 3, "A", 0.0, head=False)
    assert h.head is None and h(x).shape == (6, 4)


@given(n=st.integers(3, 20), k=st.integers(1, 5), seed=st.integers(0, 999))
def test_binary_knn_baseline_graph(n, k, seed):
    x = torch.rand(n, 6, generator=torch.Generator().manual_seed(seed))
    got = dense(feature_knn(x, k, weighted=False))
    adj = (got > 0) & ~np.eye(n, dtype=bool)
    assert np.array_equal(adj, adj.T) and (adj.sum(1) >= min(k, n - 1)).all()
    a = adj + np.eye(n)
    inv = 1 / np.sqrt(a.sum(1))
    assert np.allclose(got, inv[:, None] * a * inv[None, :], atol=1e-6)
