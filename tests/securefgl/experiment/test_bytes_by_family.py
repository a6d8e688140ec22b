"""A run's bytes by message family: they sum to the channel's total, the set-up families to
``setup_bytes``, the rounds' to the history's, and result.json carries them."""

import json

import pytest

from securefgl.config import ExperimentConfig
from securefgl.data.synthetic import csbm
from securefgl.experiment.results import save_result
from securefgl.experiment.runner import ExperimentResult, run_single
from securefgl.federation.transcript import FAMILIES

SMALL = {"num_nodes": 300, "num_features": 8, "feature_signal": 0.3, "homophily": 0.85}


def _history_bytes(run):
    return sum(h["bytes_up"] + h["bytes_down"] + h["bytes_p2p"] for h in run.history)


@pytest.mark.parametrize(
    ("algorithm", "extra"),
    [
        ("fedgcn", {"protocol": ["secagg"], "fedgcn": {"sum_mode": "masked"}}),
        ("fedstruct", {"protocol": ["secagg"]}),
        ("fedavg", {}),
    ],
)
def test_families_sum_to_the_total(tmp_path, algorithm, extra):
    cfg = ExperimentConfig(
        dataset="csbm", csbm=SMALL, clients=4, partition="random", cross_edges="known",
        rounds=3, eval_every=2, hidden=8, name=f"families-{algorithm}", **extra,
    )  # fmt: skip
    data = csbm(**cfg.csbm)
    run = run_single(cfg, algorithm, 0, data, progress=False)
    families = run.bytes_by_family
    assert set(families) == set(FAMILIES)
    assert sum(families.values()) == run.bytes
    assert families["setup"] + families["structure"] == run.setup_bytes
    assert families["rounds"] == _history_bytes(run) > 0
    assert run.aggregate_error is not None and run.aggregate_error < 1e-5  # no DP noise
    if algorithm == "fedavg":
        assert families["structure"] == 0
    else:  # the neighbour sums / Ā and NSFs are the structure family, not the set-up
        assert families["structure"] > 0 and families["setup"] > 0
    folder = save_result(ExperimentResult(cfg, [run]), tmp_path)
    saved = json.loads((folder / "result.json").read_text())
    assert saved["runs"][0]["bytes_by_family"] == families
    assert saved["runs"][0]["bytes"] == saved["summary"][0]["bytes"] == run.bytes
    assert saved["summary"][0]["bytes_by_family"] == {k: float(v) for k, v in families.items()}
