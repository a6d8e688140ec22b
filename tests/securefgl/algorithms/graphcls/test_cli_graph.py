"""``securefgl run --task graph ...`` and the same experiment from TOML."""

import json

from securefgl.cli import build_parser, config_from_args, main
from securefgl.config import ExperimentConfig

ARGS = ["--task", "graph", "--dataset", "NCI1", "--clients", "20", "--dirichlet", "1.0",
        "--algorithms", "gpfl,fedavg,self-train,gcfl"]  # fmt: skip


def test_issue_command_line_parses_like_its_toml(tmp_path):
    parser, _ = build_parser()
    from_flags = config_from_args(parser.parse_args(["run", *ARGS, "--gpfl-sums", "masked"]))
    toml = tmp_path / "gpfl.toml"
    toml.write_text(
        '[experiment]\ntask = "graph"\ndataset = "NCI1"\nclients = 20\n'
        'algorithms = ["gpfl", "fedavg", "self-train", "gcfl"]\n'
        "[experiment.graph]\ndirichlet = 1.0\n[experiment.gpfl]\nsums = \"masked\"\n"
    )
    from_toml = ExperimentConfig.from_toml(toml)
    assert from_flags.to_dict() == from_toml.to_dict()
    assert from_flags.graph.dirichlet == 1.0 and from_flags.gpfl.sums == "masked"


def test_run_graph_task_end_to_end(tmp_path, capsys):
    code = main([
        "run", "--task", "graph", "--dataset", "synthetic-graphs", "--graph-synthetic",
        '{"num_graphs": 60, "max_nodes": 9}', "--clients", "3", "--dirichlet", "1.0",
        "--algorithms", "gpfl,fedavg,self-train,gcfl", "--rounds", "2", "--gpfl-gae-epochs",
        "3", "--output-dir", str(tmp_path), "--name", "g", "--no-progress",
    ])  # fmt: skip
    assert code == 0
    result = json.loads((tmp_path / "g" / "result.json").read_text())
    assert [r["algorithm"] for r in result["summary"]] == ["gpfl", "fedavg", "self-train", "gcfl"]
    assert all("best_last_test_acc" in r for r in result["summary"])
    md = (tmp_path / "g" / "result.md").read_text()
    assert "Dirichlet α = 1 label skew" in md and "best of last 10" in md
    assert "gpfl" in capsys.readouterr().out
