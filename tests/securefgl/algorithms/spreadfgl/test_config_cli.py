"""SpreadFGL / FedSage+ settings from TOML and the command line."""

import pytest

from securefgl.cli import build_parser, config_from_args
from securefgl.config import ConfigError, ExperimentConfig


def test_flags_reach_the_sections_and_the_edge_topology():
    parser, _ = build_parser()
    args = parser.parse_args([
        "run", "--algorithms", "spreadfgl,fedgl,fedsage+,fedavg", "--dataset", "Cora",
        "--clients", "9", "--edge-servers", "3", "--server-topology", "ring",
        "--spreadfgl-top-k", "7", "--spreadfgl-h-mechanism", "rr", "--fedsage-num-pred", "3",
    ])  # fmt: skip
    cfg = config_from_args(args)
    assert cfg.edge_servers == 3 and cfg.server_topology == "ring"
    assert cfg.algorithms == ["spreadfgl", "fedgl", "fedsage+", "fedavg"]
    assert cfg.spreadfgl.top_k == 7 and cfg.spreadfgl.h_mechanism == "rr"
    assert cfg.fedsage.num_pred == 3


def test_toml_sections(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text(
        '[experiment]\nalgorithms = ["spreadfgl"]\nclients = 9\nedge_servers = 3\n'
        'server_topology = "0-1,1-2"\n[experiment.spreadfgl]\ninterval = 2\n'
        'candidates = "cross_client"\n[experiment.fedsage]\ngen_hidden = [64, 64]\n'
    )
    cfg = ExperimentConfig.from_toml(path)
    assert cfg.spreadfgl.interval == 2 and cfg.spreadfgl.candidates == "cross_client"
    assert cfg.fedsage.gen_hidden == [64, 64]


@pytest.mark.parametrize(
    "changes",
    [
        {"edge_servers": 11},
        {"server_topology": "0-7", "edge_servers": 3},
        {"spreadfgl": {"top_k": 0}},
        {"spreadfgl": {"h_rows": 0.0}},
        {"spreadfgl": {"patch_encoding": "factored", "feature_act": "sigmoid"}},
        {"fedsage": {"cross_noise": 1.0}},
    ],
)
def test_bad_values_are_refused(changes):
    with pytest.raises(ConfigError):
        ExperimentConfig(clients=10, **changes)
