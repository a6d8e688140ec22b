"""Ray (extra ``ray``) and matplotlib (extra ``plots``) are optional: nothing imports them
when it is imported, and a feature that needs one missing says, in one line, what to
install. ``sys.modules[name] = None`` makes ``import name`` fail as if it were not there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from securefgl import extras
from securefgl.cli import main

ROOT = Path(__file__).resolve().parents[1]
RAY_HINT = "pip install 'securefgl[ray]'"
PLOTS_HINT = "pip install 'securefgl[plots]'"


@pytest.fixture
def no_ray(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)


@pytest.fixture
def no_matplotlib(monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_ray_executor_without_ray_names_the_extra(no_ray):
    from securefgl.federation.ray_executor import RayExecutor, ray_module

    with pytest.raises(extras.MissingExtraError, match=r"securefgl\[ray\]") as err:
        ray_module()
    assert isinstance(err.value, ImportError) and "\n" not in str(err.value)
    with pytest.raises(ImportError, match=r"--executor ray needs Ray.*securefgl\[ray\]"):
        RayExecutor({}, workers=1)


@pytest.mark.parametrize("command", ["run", "recommend"])
def test_cli_executor_ray_without_ray_is_one_line(no_ray, capsys, command):
    """Refused before any data is loaded, as a configuration error (exit status 2)."""
    assert main([command, "--executor", "ray", "--rounds", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and RAY_HINT in err, err
    assert err.startswith("securefgl: configuration error: --executor ray needs Ray")


def test_check_does_not_import(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(extras.MissingExtraError, match=r"securefgl\[ray\]"):
        extras.check("ray", "x")
    extras.check("plots", "x")  # installed by `make install`, and not imported here


def test_require_passes_on_other_import_errors(monkeypatch, tmp_path):
    """A missing package that the extra itself needs is not reported as the extra."""
    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text("import not_a_real_dependency_xyz\n")
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="not_a_real_dependency_xyz"):
        extras.require("plots", "x")


def test_audit_plot_without_matplotlib_names_the_extra(no_matplotlib, tmp_path):
    from attacks.audit import plot_audit

    with pytest.raises(extras.MissingExtraError, match=r"the audit plot needs matplotlib") as e:
        plot_audit([{"attack": "a", "value": 0.5, "dataset": "d"}], tmp_path / "a.png")
    assert PLOTS_HINT in str(e.value) and "\n" not in str(e.value)


def test_benchmark_figure_without_matplotlib_ends_with_one_line(no_matplotlib):
    from benchmarks.harness.results import pyplot

    with pytest.raises(SystemExit) as done:
        pyplot()
    message = str(done.value.code)
    assert message.startswith("securefgl: a benchmark figure needs matplotlib")
    assert PLOTS_HINT in message and "\n" not in message


def test_nothing_imports_the_extras_when_imported():
    """Every module of securefgl, protocols and attacks imports (and the command line
    builds, plug-ins included) with Ray and matplotlib absent."""
    code = """
import importlib, pkgutil, sys
for name in ("ray", "matplotlib"):
    sys.modules[name] = None
names = []
for top in ("securefgl", "protocols", "attacks"):
    package = importlib.import_module(top)
    names += [i.name for i in pkgutil.walk_packages(package.__path__, top + ".")]
for name in names:
    importlib.import_module(name)
from securefgl.cli import build_parser, load_plugins
plugins = load_plugins()
assert [p.__name__ for p in plugins] == ["attacks.cli"], plugins
build_parser(plugins)
print(len(names))
"""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) > 100  # every module was imported
