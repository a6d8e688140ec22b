"""The FedVN grid writes each budget's runs to that budget's file, never another's."""

from __future__ import annotations

import sys

import pytest

from benchmarks.reproduce_fedvn import __main__ as grid_cli


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
