"""The FedVN grid's command line: each budget writes its own runs file; shards are stable;
a variant runs its method with its sections changed."""

from __future__ import annotations

import sys

import pytest

from benchmarks.reproduce_fedvn import __main__ as grid_cli
from benchmarks.reproduce_fedvn.grid import Cell, make_config


@pytest.mark.parametrize("argv", [
    ["--rounds", "1", "--dry-run"],  # a budget the report does not read, no --runs
    ["--rounds", "3", "--runs", str(grid_cli.RUNS_PATH), "--dry-run"],  # 100-round file
    ["--rounds", "100", "--runs", str(grid_cli.LONG_PATH), "--dry-run"],  # 200-round file
])  # fmt: skip
def test_a_budget_cannot_write_into_another_budgets_runs(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["reproduce_fedvn", *argv])
    with pytest.raises(SystemExit) as exit_info:
        grid_cli.main()
    assert exit_info.value.code == 2
    assert "round" in capsys.readouterr().err


def test_every_budget_has_its_own_file() -> None:
    assert len(set(grid_cli.BUDGET_RUNS.values())) == len(grid_cli.BUDGET_RUNS)
    assert grid_cli.BUDGET_RUNS[grid_cli.ROUNDS] == grid_cli.RUNS_PATH


def test_shards_cover_the_plan_once_whatever_is_done() -> None:
    from benchmarks.reproduce_fedvn.grid import Cell

    plan = [(Cell(d, m), s) for s in range(3) for d in ("motif-basis", "motif-size")
            for m in ("fedavg", "fedprox")]  # fmt: skip
    done = {Cell("motif-size", "fedavg").key: {0, 1}}  # finished while a shard was running
    left = [(c, s) for c, s in plan if s not in done.get(c.key, set())]
    shards = [grid_cli.shard_todo(plan, done, i, 2) for i in range(2)]
    assert sorted(map(str, shards[0] + shards[1])) == sorted(map(str, left))
    assert not set(map(str, shards[0])) & set(map(str, shards[1]))
    # the same shard before anything was done holds these runs and more
    assert set(map(str, shards[0])) <= set(map(str, grid_cli.shard_todo(plan, {}, 0, 2)))


@pytest.mark.parametrize(
    ("method", "algorithm", "rw", "s_local"),
    [("fedstar", "fedstar", 16, "batch"), ("fedstar[rw2]", "fedstar", 2, "batch"),
     ("fedvn[all-s_local]", "fedvn", 16, "all")],
)  # fmt: skip
def test_a_variant_runs_its_method_with_its_sections_changed(
    method: str, algorithm: str, rw: int, s_local: str
) -> None:
    config, algo = make_config(Cell("motif-basis", method), 100)
    assert algo == algorithm and config.algorithms == [algorithm]
    assert config.sections["graph"].fedstar_rw == rw
    assert config.sections["fedvn"].s_local == s_local


@pytest.mark.parametrize("text", ["2/2", "-1/2", "1", "a/b", "0/0"])
def test_a_shard_outside_the_plan_is_refused(
    text: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["reproduce_fedvn", "--shard", text, "--dry-run"])
    with pytest.raises(SystemExit):
        grid_cli.main()
    assert "--shard" in capsys.readouterr().err
