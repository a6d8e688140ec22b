"""The scripts' graph cache reloads only when what load_graph reads changes."""

from benchmarks.harness.graphs import OneGraphCache
from securefgl.config import ExperimentConfig


def test_the_same_data_is_kept_and_other_data_replaces_it():
    cache, cfg = OneGraphCache(), ExperimentConfig(dataset="csbm", clients=2)
    first = cache.get(cfg)
    assert cache.get(cfg.replace(clients=3)) is first  # the partition is not the data
    other = cache.get(cfg.replace(csbm={"num_nodes": 50}))
    assert other is not first and other.num_nodes == 50
    assert cache.get(cfg) is not first  # one graph in memory: the first was dropped
