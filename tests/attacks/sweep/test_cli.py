"""``securefgl sweep`` from flags or one TOML file."""

from __future__ import annotations

import json

import pytest

from securefgl.cli import main

TOML = """
[experiment]
csbm = {num_nodes = 200, num_features = 8}
clients = 3
rounds = 2
algorithms = ["fedavg"]

[experiment.protocol]
seeded_noise = true

[sweep]
protections = ["plain", "secagg,clip_noise"]
epsilons = [2.0]
attacks = ["membership_inference"]
"""


def test_sweep_from_a_toml_file_and_flags(tmp_path, capsys) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text(TOML)
    argv = ["sweep", "--config", str(path), "--output-dir", str(tmp_path), "--name", "s",
            "--no-progress", "--seeds", "0,1"]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads((tmp_path / "s" / "frontier.json").read_text())
    assert {(r["protection"], r["epsilon"] is None) for r in rows} == {
        ("plain", True), ("secagg,clip_noise", False)
    }
    assert all(r["seeds"] == [0, 1] and r["attack"] == "membership_inference" for r in rows)
    assert "Privacy–utility frontier" in capsys.readouterr().out
    path.write_text(TOML + "epsilon = [1.0]\n")
    assert main(argv) == 2  # an unknown [sweep] key, with its suggestion
    assert "did you mean 'epsilons'" in capsys.readouterr().err


@pytest.mark.parametrize(("line", "message"), [
    ('protections = "plain;ckks"', "protections must be a list of strs"),
    ('epsilons = "1,2"', "epsilons must be a list of floats"),
    ('fedstruct_preset = "no"', "fedstruct_preset must be true or false"),
    ("seeds = [0.5]", "seeds must be a list of ints"),
])  # fmt: skip
def test_sweep_table_values_are_type_checked(tmp_path, capsys, line: str, message: str) -> None:
    path = tmp_path / "sweep.toml"
    body = TOML.replace('protections = ["plain", "secagg,clip_noise"]\n', "")
    body = body.replace("epsilons = [2.0]\n", "")
    path.write_text(body.replace("[sweep]\n", f"[sweep]\n{line}\n"))
    argv = ["sweep", "--config", str(path), "--output-dir", str(tmp_path), "--no-progress"]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_bad_protection_is_a_configuration_error(tmp_path, capsys) -> None:
    argv = ["sweep", "--protections", "plain;secagg,ckks", "--output-dir", str(tmp_path),
            "--no-progress"]  # fmt: skip
    assert main(argv) == 2
    assert "at most one transport" in capsys.readouterr().err
