import pytest
import torch
from torch_geometric.data import Data

from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment import runner


def _fake(monkeypatch, x):
    monkeypatch.setattr(runner, "load_dataset", lambda *a, **k: Data(x=x))


def test_normalised_features_sum_to_one_and_empty_rows_stay_zero(monkeypatch):
    x = torch.tensor([[1.0, 3.0, 0.0], [0.0, 0.0, 0.0], [2.0, 0.0, 2.0]])
    _fake(monkeypatch, x)
    cfg = ExperimentConfig(dataset="Cora", normalize_features=True)
    out = runner.load_graph(cfg).x
    assert torch.allclose(out.sum(1), torch.tensor([1.0, 0.0, 1.0]))
    assert torch.equal(out[0], torch.tensor([0.25, 0.75, 0.0]))
    assert torch.equal(runner.load_graph(cfg.replace(normalize_features=False)).x, x)


def test_normalising_signed_features_is_refused(monkeypatch):
    _fake(monkeypatch, torch.tensor([[1.0, -2.0]]))
    with pytest.raises(ConfigError, match="non-negative"):
        runner.load_graph(ExperimentConfig(dataset="Cora", normalize_features=True))


def test_data_identity_separates_what_load_graph_reads():
    base = ExperimentConfig(dataset="Cora")
    assert runner.data_identity(base) == runner.data_identity(base.replace(rounds=7, lr=0.1))
    for other in (
        base.replace(normalize_features=True),
        base.replace(dataset="CiteSeer"),
        base.replace(data_root="/elsewhere"),
    ):
        assert runner.data_identity(other) != runner.data_identity(base)
    sbm = ExperimentConfig(dataset="csbm")
    assert runner.data_identity(sbm) != runner.data_identity(sbm.replace(csbm={"num_nodes": 50}))


@pytest.mark.parametrize("alias", ["csbm", "C-SBM", "c_sbm", "synthetic"])
def test_every_alias_of_the_generator_reads_its_options(alias):
    cfg = ExperimentConfig(dataset=alias, csbm={"num_nodes": 120, "num_features": 4})
    assert runner.load_graph(cfg).num_nodes == 120
    assert runner.data_identity(cfg) != runner.data_identity(cfg.replace(csbm={"num_nodes": 60}))
