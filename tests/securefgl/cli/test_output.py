"""What `securefgl run` prints and writes: a table that reads at 80 columns, result.md with
no std for one seed, provenance and units in result.json, progress lines when stderr is
not a terminal (none with --quiet), --log-file."""

from __future__ import annotations

import json
import time

import pytest

from securefgl.algorithms.fedavg.algorithm import FedAvg
from securefgl.cli import main
from securefgl.experiment import runner

TINY = '{"num_nodes": 300, "num_features": 8}'


def _run(tmp_path, name, *extra):
    argv = ["run", "--csbm", TINY, "--clients", "3", "--rounds", "2", "--eval-every", "2",
            "--output-dir", str(tmp_path), "--name", name, "--no-progress", *extra]  # fmt: skip
    assert main(argv) == 0
    folder = tmp_path / name
    return json.loads((folder / "result.json").read_text()), (folder / "result.md").read_text()


def test_the_printed_table_fits_80_columns_and_one_seed_has_no_std(tmp_path, capsys):
    algorithms = "fedavg,local,central,fedstruct,fed-gnnmlp,fedsage+,spreadfgl"
    result, md = _run(tmp_path, "wide", "--algorithms", algorithms, "--protocol", "secagg",
                      "--clients", "4")  # fed-gnnmlp: 2 graph and 2 graphless clients
    out = capsys.readouterr().out
    table = out.split("results: ")[0].rstrip().splitlines()
    assert len(table) > 8 and max(len(line) for line in table) <= 80, table
    assert "fedsage+    GraphSAGE " in out and "±" not in out and " ± " not in md
    # the long descriptions are in result.md
    assert "GraphSAGE (2 layers) on the mended subgraph" in md
    assert "GCN on graph clients, MLP on graphless clients" in md
    # each algorithm's local work per round, not "1 local epoch" for all
    assert "fedsage+ 10 local Adam steps" in md and "fedavg 1 local epoch" in md
    two, md2 = _run(tmp_path, "two", "--algorithms", "fedavg", "--seeds", "0,1")
    assert " ± " in md2 and "4 rounds" not in md2 and "2 rounds × 1 local epoch" in md2


def test_result_json_has_provenance_and_one_unit(tmp_path):
    result, _ = _run(tmp_path, "prov", "--algorithms", "fedavg", "--protocol",
                     "clip_noise", "--dp-noise", "0.7", "--dp-clip", "2")  # fmt: skip
    assert result["units"]["accuracy"].startswith("fraction")
    row = result["summary"][0]
    assert 0 <= row["test_acc"] <= 1 and 0 <= result["runs"][0]["final"]["test_acc"] <= 1
    prov = result["provenance"]
    packages = prov["packages"]
    for name in ("securefgl", "torch", "torch_geometric", "numpy", "tenseal", "opacus",
                 "cryptography"):  # fmt: skip
        assert packages[name], name
    assert set(prov["machine"]) >= {"platform", "python", "cpus"}
    assert prov["git"] is None or (len(prov["git"]["commit"]) >= 7
                                   and isinstance(prov["git"]["dirty"], bool))  # fmt: skip
    protocol = prov["config"]["protocol"]
    assert protocol["dp_noise"] == 0.7 and protocol["dp_clip"] == 2.0
    assert protocol["mechanism"] == "clip_noise" and protocol["transport"] == "plain"
    assert prov["command"][:2] == ["securefgl", "run"] or prov["command"]
    assert row["noise"] == "secret" and "private" not in row and row["epsilon"] > 0


@pytest.fixture
def slow_rounds(monkeypatch):
    """Rounds slow enough, and progress lines often enough, for a few lines per run."""
    monkeypatch.setattr(runner, "PROGRESS_LOG_SECONDS", 0.05)
    train_round = FedAvg.train_round

    def slow(self, r):
        time.sleep(0.15)
        return train_round(self, r)

    monkeypatch.setattr(FedAvg, "train_round", slow)


def test_progress_lines_without_a_terminal_and_none_when_quiet(tmp_path, capsys, slow_rounds):
    _run(tmp_path, "loud", "--algorithms", "fedavg")
    err = capsys.readouterr().err
    assert "fedavg seed=0: round 1/2" in err or "fedavg seed=0: round 2/2" in err
    _run(tmp_path, "quiet", "--algorithms", "fedavg", "--quiet")
    captured = capsys.readouterr()
    assert captured.err == "" and "fedavg" in captured.out  # the table is still printed


def test_log_file_gets_progress_and_detail(tmp_path, capsys, slow_rounds):
    log = tmp_path / "run.log"
    _run(tmp_path, "logged", "--algorithms", "fedavg", "--quiet", "--log-file", str(log))
    text = log.read_text()
    assert "securefgl.progress" in text and "fedavg seed=0: round" in text
    assert "test acc" in text and capsys.readouterr().err == ""
    assert main(["run", "--clients", "0", "--log-file", str(log)]) == 2
    assert "configuration error: clients must be" in log.read_text()
