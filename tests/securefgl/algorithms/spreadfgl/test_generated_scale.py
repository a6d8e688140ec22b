import numpy as np
import pytest
import scipy.sparse as sp

from securefgl.algorithms.common.edge.model import Factored
from securefgl.algorithms.spreadfgl.client import scale_to_own_norm
from securefgl.algorithms.spreadfgl.settings import SpreadFGLSettings


def test_generated_rows_take_the_mean_norm_of_the_client_s_own_rows():
    own = sp.csr_matrix(np.array([[3.0, 4.0], [0.0, 0.0], [0.0, 1.0]]))  # norms 5, -, 1
    block = Factored(np.array([[1.0], [2.0]]), np.array([[10.0, 0.0]]), np.array([0.0, 5.0]))
    out = scale_to_own_norm(block, own)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [3.0, 3.0], rtol=1e-6)
    dense = block.dense()
    np.testing.assert_allclose(
        out / np.linalg.norm(out, axis=1, keepdims=True),
        dense / np.linalg.norm(dense, axis=1, keepdims=True),
        rtol=1e-6,
    )


def test_unknown_scale_is_refused():
    with pytest.raises(ValueError, match="generated_scale"):
        SpreadFGLSettings(generated_scale="bigger")
