"""A tiny world for the SpreadFGL / FedSage+ tests: a CSBM graph with sparse binary
features, six Louvain clients."""

from __future__ import annotations

import torch

from securefgl.algorithms.registry import algorithm_class
from securefgl.config import ExperimentConfig
from securefgl.data import csbm
from securefgl.experiment.runner import draw_world
from securefgl.federation import Channel, Transcript
from securefgl.federation.federation import Federation
from securefgl.federation.stack import build_stack


def tiny_graph(n: int = 180, features: int = 41, seed: int = 0):
    g = csbm(n, num_classes=3, num_features=features, avg_degree=5.0, homophily=0.8,
             feature_signal=1.0, seed=seed)  # fmt: skip
    gen = torch.Generator().manual_seed(seed)
    g.x = (torch.rand(n, features, generator=gen) < 0.3).float() * (g.x > 0).float()
    return g


def tiny_config(**changes) -> ExperimentConfig:
    base = ExperimentConfig(
        dataset="csbm", clients=6, partition="louvain", rounds=2, hidden=8, weight_decay=0.0,
        train_fraction=0.3, val_fraction=0.1, test_fraction=0.2, eval_every=10**6,
        edge_servers=3, algorithms=["spreadfgl"],
        spreadfgl={"interval": 1, "local_steps": 2, "top_k": 3, "ae_iterations": 2},
        fedsage={"gen_epochs": 2, "fed_gen_epochs": 2, "gen_hidden": [16, 32],
                 "cross_queries": 4, "local_steps": 2, "latent": 8, "encoder_hidden": 8},
    )  # fmt: skip
    return base.replace(**changes)


def build(algorithm: str, config: ExperimentConfig, graph, seed: int = 0, store=True):
    """The algorithm set up on the seed's views; returns (algorithm, views, transcript)."""
    torch.manual_seed(seed)
    _, _, views, _ = draw_world(config, seed, graph)
    transcript = Transcript(store_payloads=store)
    stack = build_stack(config, config.clients, experiment_id="test", seed=seed)
    algo = algorithm_class(algorithm)(config)
    algo.setup(Federation(views, Channel(transcript), stack, seed, noise_seed=seed))
    return algo, views, transcript


def reachable_arrays(obj, seen=None, depth=0):
    """Every tensor / ndarray reachable through attributes and containers."""
    import numpy as np
    import scipy.sparse as sp

    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 14:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield (
            obj.detach().to_dense().numpy() if obj.layout != torch.strided else obj.detach().numpy()
        )
        return
    if isinstance(obj, np.ndarray):
        yield obj
        return
    if sp.issparse(obj):
        yield obj.toarray()
        return
    if isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, list | tuple | set):
        children = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        children = list(vars(obj).values())
    else:
        return
    for child in children:
        yield from reachable_arrays(child, seen, depth + 1)
