import numpy as np
import pytest

from securefgl.experiment.metrics import pooled_metrics


def test_client_mean_weights_clients_equally_and_pooled_weights_nodes() -> None:
    big = {"val": (np.zeros(8, int), np.zeros(8, int)), "test": (np.zeros(8, int), np.ones(8, int))}
    small = {"val": (np.ones(2, int), np.zeros(2, int)), "test": (np.ones(2, int), np.ones(2, int))}
    out = pooled_metrics([big, small], num_classes=2)
    assert out["test_acc"] == pytest.approx(2 / 10)
    assert out["client_mean_test"] == pytest.approx((0 + 1) / 2)
    assert out["val_acc"] == pytest.approx(8 / 10)
    assert out["client_mean_val"] == pytest.approx((1 + 0) / 2)


def test_clients_without_nodes_in_a_split_are_left_out_of_the_client_mean() -> None:
    empty = (np.zeros(0, int), np.zeros(0, int))
    full = {"val": empty, "test": (np.array([0, 1]), np.array([0, 0]))}
    none = {"val": empty, "test": empty}
    out = pooled_metrics([full, none], num_classes=2)
    assert out["client_mean_test"] == pytest.approx(0.5)
    assert "client_mean_val" not in out


def test_client_mean_f1_scores_each_client_on_its_own_classes() -> None:
    """A client whose true labels are all 0 but which predicts a 1 scores F1 0 on class 1:
    its own macro-F1 is (F1_0 + 0) / 2, while pooled with a client that holds class 1 the
    mistake weighs less."""
    skewed = {"test": (np.array([0, 0, 0, 0]), np.array([0, 0, 0, 1]))}
    other = {"test": (np.array([1, 1, 1, 1]), np.array([1, 1, 1, 1]))}
    out = pooled_metrics([skewed, other], num_classes=2)
    f1_zero = 2 * 3 / (4 + 3)
    assert out["client_mean_test_f1"] == pytest.approx(((f1_zero + 0) / 2 + 1) / 2)
    pooled_f1 = (2 * 3 / (4 + 3) + 2 * 4 / (4 + 5)) / 2
    assert out["test_f1"] == pytest.approx(pooled_f1)
    assert out["client_mean_test_f1"] < out["test_f1"]
    # over the true classes only, the skewed client is scored on class 0 alone
    assert out["client_mean_test_true_f1"] == pytest.approx((f1_zero + 1) / 2)
