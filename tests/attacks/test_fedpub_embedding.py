"""FED-PUB's functional-embedding attack: community and label-distribution inference from
the h̃_i the server receives, against its baselines, plain and under Gaussian noise."""

import numpy as np

from attacks.fedpub_embedding import (
    NAME,
    cosine_matrix,
    fedpub_embedding_inference,
    label_inference,
)
from attacks.registry import ATTACKS
from attacks.simulation import simulate
from securefgl.algorithms.fedpub.parties import TAG_EMBEDDING
from securefgl.config import ExperimentConfig
from securefgl.experiment.runner import load_graph

CSBM = {"num_nodes": 400, "num_features": 16, "avg_degree": 8.0, "num_classes": 4}


def audit(**fedpub):
    cfg = ExperimentConfig(
        dataset="csbm", csbm=CSBM, clients=8, partition="metis", rounds=6, eval_every=6,
        train_fraction=0.2, val_fraction=0.4, test_fraction=0.4,
        fedpub={"hidden": 16, **fedpub},
    )  # fmt: skip
    return simulate(cfg, "fed-pub", 0, load_graph(cfg), keep_tags=frozenset({TAG_EMBEDDING}))


def test_label_inference_uses_the_similarity():
    rng = np.random.default_rng(0)
    truth = rng.dirichlet(np.full(5, 0.3), size=12)
    good, base = label_inference(cosine_matrix(truth), truth)
    assert good < base - 0.05  # S that mirrors the truth beats the colluders' mean
    noise, base2 = label_inference(cosine_matrix(rng.normal(size=(12, 8))), truth)
    assert base2 == base and noise > good


def test_attack_reads_every_kept_round_and_noise_costs_it():
    assert ATTACKS[NAME].keep_tags == (TAG_EMBEDDING,)
    plain = fedpub_embedding_inference(audit())
    assert plain.applicable and plain.details["rounds_averaged"] == 3
    assert 0 <= plain.value <= 1 and plain.baseline() == 0.5
    assert plain.details["embedding_epsilon"] is None
    noisy = fedpub_embedding_inference(
        audit(embedding="gaussian", embedding_noise=5.0, sums="masked"))
    assert np.isfinite(noisy.details["embedding_epsilon"])
    assert noisy.metrics["label_tv"] > plain.metrics["label_tv"] - 0.02
    assert abs(noisy.value - 0.5) < abs(plain.value - 0.5) + 0.15
