"""Results are written atomically: a failure mid-write leaves the old result.json (or none)
and no temporary file; a bad run name or output folder is refused before anything runs."""

from __future__ import annotations

import json
import os

import pytest

from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment import results
from securefgl.experiment.results import check_output_dir, save_result
from securefgl.experiment.runner import ExperimentResult


def _result(tmp_path, name="run") -> ExperimentResult:
    return ExperimentResult(ExperimentConfig(output_dir=str(tmp_path), name=name), [])


def _fail_mid_write(monkeypatch, after: str = "fsync") -> None:
    """The process dies (KeyboardInterrupt) after the bytes are written, before the rename."""

    def die(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(results.os, after, die)


def test_a_failure_mid_write_leaves_no_result_and_no_temp_file(tmp_path, monkeypatch):
    _fail_mid_write(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        save_result(_result(tmp_path))
    assert os.listdir(tmp_path / "run") == []


def test_a_failed_overwrite_keeps_the_previous_result(tmp_path, monkeypatch):
    folder = save_result(_result(tmp_path))
    before = (folder / "result.json").read_text()
    assert json.loads(before)["config"]["name"] == "run"
    _fail_mid_write(monkeypatch, after="replace")
    with pytest.raises(KeyboardInterrupt):
        save_result(_result(tmp_path))
    assert (folder / "result.json").read_text() == before
    assert sorted(os.listdir(folder)) == ["result.json", "result.md"]


def test_save_result_refuses_a_name_that_leaves_the_output_folder(tmp_path):
    result = _result(tmp_path)
    object.__setattr__(result.config, "name", "../outside")  # bypassing validation
    with pytest.raises(ConfigError, match="plain folder name"):
        save_result(result)
    assert not (tmp_path.parent / "outside").exists()


def test_output_folder_checks(tmp_path):
    check_output_dir(tmp_path / "new" / "deeper")  # may be created
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="exists and is not a folder"):
        check_output_dir(tmp_path / "file" / "results")
    assert not (tmp_path / "new").exists()  # checking creates nothing
