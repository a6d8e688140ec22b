"""A target ε becomes the σ at which a run reports that ε."""

from __future__ import annotations

import pytest

from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment.calibration import noise_for_epsilon, planned_privacy
from securefgl.experiment.runner import load_graph, run_single


def _config(**protocol: object) -> ExperimentConfig:
    return ExperimentConfig(
        csbm={"num_nodes": 200, "num_features": 8}, clients=4, rounds=3, eval_every=3,
        algorithms=["fedavg"], protocol={"stack": ["secagg", "clip_noise"], **protocol},
    )  # fmt: skip


@pytest.mark.parametrize("epsilon", [0.5, 4.0])
def test_the_run_reports_the_target_epsilon(epsilon: float) -> None:
    cfg = _config()
    sigma = noise_for_epsilon(cfg, epsilon)
    tuned = cfg.replace(protocol=cfg.protocol.replace(dp_noise=sigma))
    run = run_single(tuned, "fedavg", 0, load_graph(tuned), progress=False)
    assert run.privacy["epsilon"] == pytest.approx(planned_privacy(tuned)["epsilon"])
    assert epsilon * (1 - 1e-3) <= run.privacy["epsilon"] <= epsilon


def test_more_privacy_needs_more_noise_and_refusals() -> None:
    cfg = _config()
    assert noise_for_epsilon(cfg, 1.0) > noise_for_epsilon(cfg, 8.0)
    with pytest.raises(ConfigError, match="no clip_noise"):
        noise_for_epsilon(cfg.replace(protocol=["secagg"]), 1.0)
    with pytest.raises(ConfigError, match="finite and > 0"):
        noise_for_epsilon(cfg, 0.0)


@pytest.mark.parametrize(("changes", "match"), [
    ({"client_sampling": "poisson", "client_fraction": 0.5}, "Poisson sampling"),
    ({"algorithms": ["spreadfgl"], "edge_servers": 2}, "2 edge servers"),
])  # fmt: skip
def test_a_ledger_known_only_as_the_run_goes_is_not_calibrated(changes, match) -> None:
    """Planning charges clients_per_round every round; under Poisson the run charges the
    clients that joined (a target 4.0 reported 4.13 in the median), and several edge servers
    each charge their own stack."""
    with pytest.raises(ConfigError, match=match):
        noise_for_epsilon(_config().replace(**changes), 4.0)
