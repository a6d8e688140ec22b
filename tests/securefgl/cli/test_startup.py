"""``securefgl --help`` answers fast: building the parser (every command, plug-ins included)
imports neither torch nor PyG nor the crypto libraries; they load when a command runs."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("torch", "torch_geometric", "tenseal", "opacus", "ray", "scipy", "rich", "tqdm",
         "cryptography")  # fmt: skip

PROBE = """
import contextlib, io, json, sys
from securefgl.cli import build_parser, load_plugins, main
parser, handlers = build_parser(load_plugins())
with contextlib.redirect_stdout(io.StringIO()):
    for argv in (["--help"], ["run", "--help"], ["recommend", "--help"], ["audit", "--help"],
                 ["sweep", "--help"], ["--version"]):
        assert main(argv) == 0, argv
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _imported(code: str) -> set[str]:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_building_the_parser_and_every_help_page_imports_no_heavy_library():
    loaded = _imported(PROBE)
    assert "securefgl" in loaded and "attacks" in loaded  # the plug-in was loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_probe_sees_torch_when_a_module_needs_it():
    """The check would fail if the CLI imported the data loaders (as it used to)."""
    code = "import json, sys\nimport securefgl.data.datasets\n" + PROBE.split("\n", 1)[1]
    assert "torch" in _imported(code)


def test_help_answers_within_the_budget():
    """``securefgl --help`` under ~1.5 s: measured as the child's CPU time (user + system),
    which a busy machine stretches far less than wall time."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for argv in (["--help"], ["run", "--help"]):
        subprocess.run([sys.executable, "-m", "securefgl.cli", *argv], env=env, check=True,
                       capture_output=True)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu / 2 < 1.5, f"{cpu / 2:.2f} s of CPU per help page"
