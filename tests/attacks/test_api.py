"""Attacking a run you trained (``attacks.run``) gives what the audit gives, without a
second training."""

from __future__ import annotations

import pytest

import attacks
from attacks.registry import ATTACKS, Cell
from attacks.simulation import make_world, simulate
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment import run_experiment
from securefgl.experiment.runner import load_graph

CONFIG = ExperimentConfig(csbm={"num_nodes": 240, "num_features": 8}, clients=3, rounds=4,
                          algorithms=["fedavg", "central"], seeds=[0])  # fmt: skip


@pytest.fixture(scope="module")
def result():
    return run_experiment(CONFIG, progress=False, keep_state=True)


@pytest.mark.parametrize("name", ["link_stealing", "membership_inference"])
def test_attacking_a_kept_run_equals_the_audit(result, name: str) -> None:
    got = attacks.run(result, name)
    assert [r.details["algorithm"] for r in got] == ["fedavg", "central"]
    data = load_graph(CONFIG)
    for r in got:
        cfg = CONFIG.replace(algorithms=[r.details["algorithm"]])
        audited = simulate(cfg, r.details["algorithm"], 0, data)
        cell = Cell(audited, make_world(cfg, 0, data), (), None)
        assert r.value == pytest.approx(ATTACKS[name].call(cell).value)


def test_refusals_say_what_to_do(result) -> None:
    with pytest.raises(ConfigError, match="did you mean 'link_stealing'"):
        attacks.run(result, "link_stealling")
    plain = run_experiment(CONFIG.replace(algorithms=["fedavg"]), progress=False)
    with pytest.raises(ValueError, match="keep_state=True"):
        attacks.run(plain, "link_stealing")
    assert attacks.keep_tags(["link_stealing"]) == frozenset()
    with pytest.raises(ConfigError, match="structure_reconstruction targets .*not"):
        attacks.run(result, "structure_reconstruction")
    with pytest.raises(ConfigError, match="named by a string"):
        attacks.run(result, ["link_stealing"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("algorithm", "section", "expect"),
    [
        ("fedstruct", {"structure_hops": 1}, "no hop-2 exchange"),
        ("fedstruct", {"abar": "oracle"}, "no block was exchanged"),
        ("fedstruct", {"sum_mode": "masked"}, "masked"),
        ("fedgcn", {"sum_mode": "masked", "norm": "rw"}, "masked"),
    ],
)
def test_structure_attacks_replay_the_exchange_the_run_made(algorithm, section, expect):
    """They re-run the pre-training exchange: with the run's settings, or not at all when
    the run exchanged nothing they could read."""
    name = {"fedstruct": "structure_reconstruction", "fedgcn": "neighbour_feature_inference"}
    cfg = CONFIG.replace(algorithms=[algorithm], cross_edges="known", rounds=2,
                         **{algorithm: section})  # fmt: skip
    (got,) = attacks.run(run_experiment(cfg, progress=False, keep_state=True), name[algorithm])
    if expect == "masked":
        assert got.details["mode"] == "masked" and got.value is not None
        if algorithm == "fedgcn":
            assert got.details["norm"] == "rw"
    else:
        assert got.value is None and expect in got.reason
