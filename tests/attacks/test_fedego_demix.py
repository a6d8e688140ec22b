"""The FedEgo de-mixing attack through the audit path: registered for fedego, reading the
server's transcript of a run_single run."""

import numpy as np

from attacks.fedego_demix import assign_labels, histogram, pursue
from attacks.registry import attacks_for
from attacks.simulation import simulate
from securefgl.config import ExperimentConfig
from securefgl.data import csbm

SMALL = {"hidden": 16, "local_epochs": 1, "server_epochs": 1, "lr": 0.01}


def test_demix_pieces():
    assert list(histogram(np.array([0.26, 0.49, 0.25]), 4)) == [1, 2, 1]
    assert list(histogram(np.array([0.3, -0.1, 0.9]), 4)) == [1, 0, 3]  # noisy: clipped
    rng = np.random.default_rng(3)
    cands = np.abs(rng.normal(size=(50, 64)))
    members = np.array([4, 17, 30])
    assert set(pursue(cands[members].sum(0), cands, 3)) == set(members)
    logp = np.log(np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]]))
    assert list(assign_labels(logp, np.array([2, 1]))) == [0, 0, 1]


def _audit(**fedego):
    graph = csbm(300, num_classes=3, num_features=16, avg_degree=6.0, seed=0)
    cfg = ExperimentConfig(dataset="csbm", clients=3, rounds=1, protocol={"stack": ["secagg"]},
                           fedego={**SMALL, **fedego})  # fmt: skip
    spec = {s.name: s for s in attacks_for("fedego")}["fedego_demix"]
    run = simulate(cfg, "fedego", 0, graph, keep_tags=frozenset(spec.keep_tags))
    return spec.call(type("Cell", (), {"run": run})())


def test_without_mixing_the_server_reads_every_label_and_identifies_every_centre():
    res = _audit(mixup=False)
    assert res.value == 1.0 and res.leaks()
    assert res.metrics["member_recall"] > 0.9  # the public features find each centre
    assert res.details["batch_size"] == 1 and res.details["prior"] == "features"


def test_mixing_32_hides_most_centres_but_not_all():
    res = _audit(batch_size=32)
    assert res.details["batch_size"] == 32
    assert res.metrics["member_recall"] < 0.9
    assert res.metrics["member_recall"] > res.baselines["member_recall"]
