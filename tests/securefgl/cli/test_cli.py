"""CLI smoke tests on the generated graph (no download)."""

import json

from securefgl.cli import main

TINY = '{"num_nodes": 300, "num_features": 8}'


def test_run_writes_json_and_markdown(tmp_path, capsys):
    code = main(
        [
            "run",
            "--csbm",
            TINY,
            "--clients",
            "3",
            "--rounds",
            "4",
            "--eval-every",
            "2",
            "--seeds",
            "0,1",
            "--output-dir",
            str(tmp_path),
            "--name",
            "smoke",
            "--no-progress",
        ]
    )
    assert code == 0
    result = json.loads((tmp_path / "smoke" / "result.json").read_text())
    assert [r["algorithm"] for r in result["summary"]] == ["fedavg", "local", "central"]
    assert len(result["runs"]) == 6 and result["config"]["seeds"] == [0, 1]
    central = next(r for r in result["summary"] if r["algorithm"] == "central")
    assert central["federated"] is False
    local = next(r for r in result["summary"] if r["algorithm"] == "local")
    assert local["federated"] is False and local["setting"] == "local"
    md = (tmp_path / "smoke" / "result.md").read_text()
    assert "| fedavg | GCN | yes |" in md and "| local | GCN | no (each client alone) |" in md
    assert "| central | GCN | no (upper bound: one model on the whole graph) |" in md
    assert " ± " in md  # two seeds: mean ± std
    assert "fedavg" in capsys.readouterr().out


def test_run_from_toml_with_flag_override(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[experiment]\nclients = 2\nrounds = 2\nalgorithms = ["local"]\n'
        "csbm = { num_nodes = 300, num_features = 8 }\n"
    )
    code = main(
        [
            "run",
            "--config",
            str(cfg),
            "--rounds",
            "3",
            "--output-dir",
            str(tmp_path),
            "--name",
            "t",
            "--no-progress",
            "--store-payloads",
        ]
    )
    assert code == 0
    result = json.loads((tmp_path / "t" / "result.json").read_text())
    assert result["config"]["rounds"] == 3 and result["config"]["clients"] == 2


def test_config_error_exit_code(tmp_path, capsys):
    assert main(["run", "--partition", "spectral", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--partition" in err and "'spectral'" in err and "louvain" in err  # names the choices
    assert main(["run", "--clients", "0", "--output-dir", str(tmp_path)]) == 2
    assert "configuration error: clients must be" in capsys.readouterr().err


def test_flags_are_grouped_with_help_and_choices(capsys):
    assert main(["run", "--help-all"]) == 0
    out = capsys.readouterr().out
    for heading in ("data:", "federation:", "protocol stack:", "training:", "FedStruct", "FedGCN"):
        assert heading in out
    assert "{degree,fedstar,random,hop2vec}" in out and "--sum-mode {plain,masked,ckks}" in out
    assert "--fedgcn-sum-mode {plain,masked,ckks}" in out


def test_audit_comes_from_the_attacks_plugin(capsys):
    assert main(["audit", "--list-attacks"]) == 0
    assert "link_stealing" in capsys.readouterr().out


def test_datasets_command_lists_every_task(tmp_path, capsys):
    assert main(["datasets", "--data-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Cora" in out and "missing" in out
    for task, name in (("graph classification", "PROTEINS"), ("recommendation", "FilmTrust")):
        assert task in out and name in out
    assert "synthetic-graphs" in out and "generated" in out


def test_a_dataset_only_in_the_cache_is_listed_as_cached(tmp_path, capsys, monkeypatch):
    from securefgl.data.catalog import DATASETS

    cache, root = tmp_path / "cache", tmp_path / "root"
    root.mkdir()
    spec = DATASETS["cora"]
    raw = spec.raw_dir(cache)
    raw.mkdir(parents=True)
    for name in spec.raw_files:
        (raw / name).write_bytes(b"")
    monkeypatch.setenv("SECUREFGL_CACHE", str(cache))
    assert main(["datasets", "--data-root", str(root)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("Cora "))
    assert "cached" in line
