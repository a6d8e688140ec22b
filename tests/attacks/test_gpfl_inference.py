"""GPFL's audit rows: the server reads properties and label shares in plain GPFL; LDP and
the private similarity change what it can read."""

import numpy as np

from attacks.gpfl_inference import label_distribution_inference, null_abs_corr, property_inference
from attacks.registry import attacks_for
from attacks.simulation import simulate
from securefgl.config import ExperimentConfig
from securefgl.experiment.runner import load_graph

TAGS = frozenset({"gpfl/properties", "gpfl/features", "gram/matrices", "gpfl/update"})


def config(clients=6, **gpfl):
    return ExperimentConfig(
        task="graph", dataset="synthetic-graphs", clients=clients, rounds=2, algorithms=["gpfl"],
        graph={"synthetic": {"num_graphs": 120, "max_nodes": 10}, "dirichlet": 0.3,
               "batch_size": 32},
        gpfl={"gae_epochs": 3, **gpfl},
    )  # fmt: skip


def test_plain_server_reads_properties_and_label_shares():
    cfg = config(clients=10)  # with few clients even a perfect ranking is within chance
    run = simulate(cfg, "gpfl", 0, load_graph(cfg), keep_tags=TAGS)
    props = property_inference(run)
    assert props.value > 0.99 and props.leaks()  # sent in the clear
    labels = label_distribution_inference(run)
    assert "plaintext updates" in labels.details["source"]
    assert labels.value > 0.6 and labels.leaks()


def test_ldp_properties_and_similarity_only_view():
    cfg = config(sums="masked", similarity="ckks", property_epsilon=0.5)
    run = simulate(cfg, "gpfl", 0, load_graph(cfg), keep_tags=TAGS)
    props = property_inference(run)
    assert props.value < 0.9 and props.details["epsilon"] == 0.5  # noise scale ≫ spread
    labels = label_distribution_inference(run)
    assert labels.details["source"].startswith("k×k embedding cosine matrix only")
    assert 0 <= labels.value <= 1


def test_null_baseline_and_registry():
    mean, q95 = null_abs_corr(20, spearman=True)
    assert 0.1 < mean < 0.25 and q95 > mean
    names = {s.name for s in attacks_for("gpfl")}
    assert {"property_inference", "label_distribution_inference"} <= names
    assert np.isfinite(mean)
