"""Adding an algorithm: one new folder and one registration line (an entry point), nothing
else edited. The toy family of :mod:`benchmarks.harness.plugin_family`, with its own settings, is
installed in a temporary site (its ``.dist-info`` carries the one entry-point line) and
run through ``securefgl run`` with its own flags and TOML section."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.harness.plugin_family import ENTRY_POINT, install


def _securefgl(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    return subprocess.run(
        [sys.executable, "-m", "securefgl.cli", *args], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_a_toy_family_runs_with_its_own_flags_and_toml_section(tmp_path: Path) -> None:
    site = tmp_path / "site"
    touched = install(site)
    helped = _securefgl(site, "run", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "Toy family (a test plug-in)" in helped.stdout and "--toy-boost" in helped.stdout
    toml = tmp_path / "toy.toml"
    toml.write_text('[experiment]\nalgorithms = ["toy-avg"]\n[experiment.toy]\nboost = 2.0\n')
    tiny = ["--csbm", '{"num_nodes": 200, "num_features": 8}', "--clients", "3", "--rounds",
            "2", "--no-progress", "--output-dir", str(tmp_path / "out")]  # fmt: skip
    ran = _securefgl(site, "run", "--config", str(toml), "--toy-boost", "3", *tiny, "--name",
                     "toy")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    result = json.loads((tmp_path / "out" / "toy" / "result.json").read_text())
    assert [r["algorithm"] for r in result["runs"]] == ["toy-avg"]
    assert result["config"]["toy"] == {"boost": 3.0}  # the flag over the TOML section
    bad = _securefgl(site, "run", "--config", str(toml), "--toy-boost", "0", *tiny)
    assert bad.returncode == 2 and "boost must be > 0" in bad.stderr
    outside = [p for p in touched if p.parent.name != "toyfamily"]
    assert len(outside) == 1 and ENTRY_POINT in outside[0].read_text()  # one line outside
    record = Path(__file__).parents[3] / "benchmarks" / "results" / "structure.json"
    reported = json.loads(record.read_text())["files_touched_to_add_an_algorithm"]
    assert reported == len(touched)  # the figure the structure report states is this count
