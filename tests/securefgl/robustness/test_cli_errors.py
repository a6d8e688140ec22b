"""Every bad input of the case table: one line on stderr naming what is wrong, the
documented exit status, no traceback, nothing written outside the output folder."""

from __future__ import annotations

import pytest

from benchmarks.robustness.cases import (
    CASES,
    SUBPROCESS_CASES,
    by_name,
    run_case,
    run_subprocesses,
)


def _check(case, row) -> None:
    assert row["exit_code"] == case.exit_code, row
    assert row["stderr_lines"] == 1, row
    assert row["message"].startswith("securefgl: "), row
    assert case.expect in row["message"], row
    assert not row["traceback"], row
    assert not row["data_written_outside"], row
    assert not row["written_inside"], row  # a failed command leaves no results behind


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line_and_an_exit_status(case, tmp_path):
    _check(case, run_case(case, tmp_path))


def test_the_table_covers_every_category():
    categories = {c.category for c in CASES}
    assert categories == {
        "usage", "config type (TOML)", "config value", "output", "data", "run"
    }  # fmt: skip
    assert len({c.name for c in CASES}) == len(CASES)


def test_verbose_shows_the_traceback(tmp_path):
    case = by_name("string for int")
    row = run_case(case, tmp_path / "a", extra=["-v"])
    assert row["traceback"] and case.expect in row["message"]
    assert row["exit_code"] == case.exit_code
    row = run_case(by_name("int for list"), tmp_path / "b")  # -v after the command works too
    assert not row["traceback"]


def test_verbose_after_a_plugin_command(tmp_path):
    case = by_name("plug-in config (audit)")
    case = type(case)(**{**case.__dict__, "argv": (*case.argv, "-v")})
    row = run_case(case, tmp_path)
    assert row["traceback"] and case.expect in row["message"]


def test_as_a_subprocess(tmp_path):
    """``python -m securefgl.cli``: the real stderr and exit status (all at once)."""
    cases = [by_name(n) for n in SUBPROCESS_CASES]
    rows = run_subprocesses(cases, tmp_path, jobs=len(cases))
    for case, row in zip(cases, rows, strict=True):
        _check(case, row)
