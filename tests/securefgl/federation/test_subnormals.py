"""Party work flushes subnormal floats to zero, and the thread's mode is restored after."""

import pytest
import torch

from securefgl.config import ExperimentConfig
from securefgl.data.synthetic import csbm
from securefgl.experiment.runner import run_single
from securefgl.federation.subnormals import subnormals_flushed, subnormals_flushed_now


@pytest.fixture
def subnormals_kept():
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormal numbers")
    assert not subnormals_flushed_now()


def test_flushed_inside_and_restored_after(subnormals_kept):
    with subnormals_flushed():
        assert subnormals_flushed_now()
        with subnormals_flushed():  # nested: the outer block's mode survives the inner
            pass
        assert subnormals_flushed_now()
    assert not subnormals_flushed_now()


def test_an_already_flushing_thread_keeps_flushing(subnormals_kept):
    torch.set_flush_denormal(True)
    try:
        with subnormals_flushed():
            pass
        assert subnormals_flushed_now()
    finally:
        torch.set_flush_denormal(False)


def test_a_run_flushes_while_it_trains_and_not_after(subnormals_kept):
    seen = []

    def hook(views):
        seen.append(subnormals_flushed_now())
        return views

    cfg = ExperimentConfig(dataset="csbm", csbm={"num_nodes": 60, "num_features": 4},
                           clients=2, rounds=1, hidden=4, name="flush")  # fmt: skip
    run_single(cfg, "fedavg", 0, csbm(**cfg.csbm), progress=False, views_hook=hook)
    assert seen == [True] and not subnormals_flushed_now()
