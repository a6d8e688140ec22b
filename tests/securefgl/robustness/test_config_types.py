"""Field types, CSBM options, run names and refused combinations, checked when an
ExperimentConfig is built (Python, TOML or flags)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from securefgl.config import ConfigError, ExperimentConfig, check_run_name
from securefgl.data.synthetic import csbm


def test_ints_for_floats_and_tuples_for_lists_are_converted():
    config = ExperimentConfig(
        protocol={"dp_clip": 2}, lr=1, seeds=(0, np.int64(1)), clients=np.int32(4)
    )
    assert config.protocol.dp_clip == 2.0 and isinstance(config.protocol.dp_clip, float)
    assert isinstance(config.lr, float) and config.seeds == [0, 1]
    assert type(config.clients) is int and type(config.seeds[1]) is int
    assert config.replace(rounds=3).protocol.dp_clip == 2.0  # replace() checks the same


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"clients": "ten"}, "clients must be an integer, got 'ten' (a string)"),
        ({"clients": 2.5}, "clients must be an integer, got 2.5"),
        ({"clients": True}, "clients must be an integer, got True (a boolean)"),
        ({"seeds": 3}, "seeds must be a list of integers"),
        ({"protocol": "secagg"}, 'a list of protocol names (e.g. ["secagg"])'),
        ({"algorithms": ["fedavg", None]}, "algorithms[1] must be a string"),
        ({"protocol": {"dp_noise": "1"}}, "protocol.dp_noise must be a number"),
        ({"protocol": {"dp_clip": float("nan")}}, "protocol.dp_clip must be a number (not NaN)"),
        ({"label_rate": [0.1]}, "label_rate must be a number (or unset)"),
        ({"store_payloads": "yes"}, "store_payloads must be a boolean"),
        ({"csbm": [1, 2]}, "csbm must be a table"),
        ({"name": 7}, "name must be a string (or unset)"),
        ({"fedstruct": 3}, "fedstruct must be a table ([experiment.fedstruct])"),
        ({"fedstruct": {"prune_p": "many"}}, "fedstruct.prune_p must be a number"),
        ({"fedgcn": {"hops": "two"}}, "fedgcn.hops must be an integer"),
        ({"fedstruct": {"feature_hidden": 64}}, "fedstruct.feature_hidden must be a list of"),
    ],
)
def test_wrong_types_name_the_field_and_the_value(changes, fragment):
    with pytest.raises(ConfigError) as info:
        ExperimentConfig(**changes)
    assert fragment in str(info.value)


def test_toml_types_name_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[experiment]\nrounds = "many"\n')
    with pytest.raises(ConfigError, match=r"bad.toml: rounds must be an integer, got 'many'"):
        ExperimentConfig.from_toml(path)
    path.write_bytes(b"clients = \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        ExperimentConfig.from_toml(path)
    with pytest.raises(ConfigError, match="cannot be read"):
        ExperimentConfig.from_toml(tmp_path)  # a folder


def test_every_csbm_argument_is_accepted_and_checked():
    names = [p for p in inspect.signature(csbm).parameters]
    defaults = {p: v.default for p, v in inspect.signature(csbm).parameters.items()}
    assert ExperimentConfig(csbm=defaults).csbm == defaults
    assert set(names) >= {"num_nodes", "homophily", "seed"}
    for options, fragment in [
        ({"num_nodes": -5}, "num_nodes must be an integer >= 2, got -5"),
        ({"num_nodes": 10, "num_classes": 20}, "num_classes (20) must not exceed num_nodes"),
        ({"homophily": 1.5}, "homophily must be in [0, 1]"),
        ({"avg_degree": 0}, "avg_degree must be in (0, num_nodes - 1]"),
        ({"num_features": 2.5}, "num_features must be an integer"),
        ({"seed": -1}, "seed must be >= 0"),
        ({"nodes": 5}, "unknown csbm option(s) ['nodes']; known: ['num_nodes'"),
    ]:
        with pytest.raises(ConfigError, match="^csbm: ") as info:
            ExperimentConfig(csbm=options)
        assert fragment in str(info.value)


@pytest.mark.parametrize("name", ["a/b", "..", ".", "/tmp/x", "a\\b", "", " ", "x\0y"])
def test_run_names_must_be_one_plain_folder(name):
    with pytest.raises(ConfigError, match="must be a plain folder name"):
        ExperimentConfig(name=name)


@pytest.mark.parametrize("name", [None, "run-1", "cora_K10", "a.b", "..x"])
def test_plain_run_names_are_accepted(name):
    check_run_name(name)
    assert ExperimentConfig(name=name).name == name


def test_central_noise_needs_a_server_that_sees_the_aggregate():
    with pytest.raises(ConfigError, match="'ckks' delivers the aggregate to the clients"):
        ExperimentConfig(protocol={"stack": ["ckks", "clip_noise"], "dp_mode": "central"})
    for stack in (["secagg", "clip_noise"], ["clip_noise"]):
        ExperimentConfig(protocol={"stack": stack, "dp_mode": "central"})
    ExperimentConfig(protocol={"stack": ["ckks", "clip_noise"], "dp_mode": "distributed"})


def test_download_is_off_unless_asked():
    assert ExperimentConfig().download is False
    assert ExperimentConfig(download=True).download is True
