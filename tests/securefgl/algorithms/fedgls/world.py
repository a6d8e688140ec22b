"""A tiny world for the FedGLS tests: a CSBM graph with bag-of-words-like features, four
clients, two of them graphless."""

from __future__ import annotations

import torch

from securefgl.algorithms.registry import algorithm_class
from securefgl.config import ExperimentConfig
from securefgl.data import csbm
from securefgl.experiment.runner import draw_world
from securefgl.federation import Channel, Transcript
from securefgl.federation.federation import Federation
from securefgl.federation.stack import build_stack


def tiny_graph(n: int = 160, features: int = 24, seed: int = 0, avg_degree: float = 5.0):
    g = csbm(n, num_classes=3, num_features=features, avg_degree=avg_degree, homophily=0.8,
             feature_signal=1.0, seed=seed)  # fmt: skip
    gen = torch.Generator().manual_seed(seed)
    g.x = (torch.rand(n, features, generator=gen) < 0.25).float() * (g.x > 0).float()
    return g


def tiny_config(**changes) -> ExperimentConfig:
    base = ExperimentConfig(
        dataset="csbm", clients=4, partition="louvain", rounds=2, hidden=8,
        local_epochs=2, weight_decay=0.0, train_fraction=0.6, val_fraction=0.2,
        test_fraction=0.2, split_scope="client", eval_every=10**6, algorithms=["fedgls"],
        fedgls={"knn_k": 3, "graphless_fraction": 0.5},
    )  # fmt: skip
    return base.replace(**changes)


def build(algorithm: str, config: ExperimentConfig, graph, seed: int = 0, store=True):
    """The algorithm set up on the seed's views; returns (algorithm, views, transcript)."""
    torch.manual_seed(seed)  # as run_single: the initial models and dropout masks
    _, _, views, _ = draw_world(config, seed, graph)
    transcript = Transcript(store_payloads=store)
    stack = build_stack(config, config.clients, experiment_id="test", seed=seed)
    algo = algorithm_class(algorithm)(config)
    algo.setup(Federation(views, Channel(transcript), stack, seed, noise_seed=seed))
    return algo, views, transcript
