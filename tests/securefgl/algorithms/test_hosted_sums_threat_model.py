"""The run's threat model reaches the hosted secure sums that carry an algorithm's model
traffic: under a malicious server they are signed, like the stack's own transport."""

from __future__ import annotations

import pytest

from securefgl.config import ExperimentConfig
from securefgl.experiment.runner import load_graph, run_single

TINY_GRAPHS = {"synthetic": {"num_graphs": 60, "max_nodes": 8}, "batch_size": 16}
CASES = {
    "fed-pub": {"dataset": "csbm", "csbm": {"num_nodes": 200}},
    "gpfl": {"task": "graph", "dataset": "synthetic-graphs", "graph": TINY_GRAPHS,
             "gpfl": {"gae_epochs": 2, "similarity": "plain"}},  # ckks: refused if malicious
    "fedvn": {"task": "graph", "dataset": "synthetic-graphs", "graph": TINY_GRAPHS},
}  # fmt: skip


@pytest.mark.parametrize("algorithm", sorted(CASES))
@pytest.mark.parametrize("threat_model", ["honest-but-curious", "malicious"])
def test_the_threat_model_reaches_the_hosted_sums(algorithm: str, threat_model: str) -> None:
    config = ExperimentConfig(
        clients=3, rounds=1, algorithms=[algorithm],
        protocol={"stack": ["secagg"], "threat_model": threat_model}, **CASES[algorithm],
    )  # fmt: skip
    result = run_single(config, algorithm, 0, load_graph(config), progress=False,
                        keep_state=True)  # fmt: skip
    driver = result.state.algorithm.driver
    assert driver is not None and driver.spec.sum_mode != "plain"
    assert driver.spec.options.get("threat_model", "honest-but-curious") == threat_model
