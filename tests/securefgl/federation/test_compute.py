"""Parties' processes flush subnormal floats to zero: after :func:`configure_torch`, and
after a run has started."""

import pytest
import torch

from securefgl.config import ExperimentConfig
from securefgl.data.synthetic import csbm
from securefgl.experiment.runner import run_single
from securefgl.federation.compute import configure_torch

SMALLEST_NORMAL = torch.finfo(torch.float32).tiny


def _underflows() -> bool:
    """Whether a product below float32's smallest normal number comes out as zero."""
    return float(torch.tensor([SMALLEST_NORMAL]) * torch.tensor([1e-3])) == 0.0


@pytest.fixture
def subnormals_kept():
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormal numbers")
    assert not _underflows()
    yield
    torch.set_flush_denormal(True)


def test_configure_torch_flushes_subnormals_and_sets_threads(subnormals_kept):
    before = torch.get_num_threads()
    configure_torch(threads=1)
    assert _underflows() and torch.get_num_threads() == 1
    torch.set_num_threads(before)


def test_a_run_flushes_subnormals(subnormals_kept):
    cfg = ExperimentConfig(dataset="csbm", csbm={"num_nodes": 60, "num_features": 4},
                           clients=2, rounds=1, hidden=4, name="flush")  # fmt: skip
    run_single(cfg, "fedavg", 0, csbm(**cfg.csbm), progress=False)
    assert _underflows()
