"""The runner's world: clients that cannot train are named, not silently kept."""

from __future__ import annotations

import logging

from securefgl.config import ExperimentConfig
from securefgl.experiment.runner import draw_world, load_graph


def test_clients_without_a_training_node_are_warned_about(caplog) -> None:
    cfg = ExperimentConfig(csbm={"num_nodes": 200}, clients=100, partition="random")
    with caplog.at_level(logging.WARNING, logger="securefgl.experiment.runner"):
        _, _, views, _ = draw_world(cfg, 0, load_graph(cfg))
    idle = sum(not bool(v.train_mask.any()) for v in views)
    assert idle > 0 and f"{idle} of 100 clients hold no training node" in caplog.text
