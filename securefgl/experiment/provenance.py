"""Where a result comes from, written into every result.json (``securefgl run``,
``recommend``, ``audit``) under ``provenance``: the versions of the packages that shape the
numbers, the git commit of the source tree (when securefgl runs from a git checkout), the
machine, the command line, the time, and the configuration as the run resolved it (every
default filled in: σ, clip, the transport's secure-sum mode, FedStruct's dataset preset).
``units`` says once in which unit each kind of number is stored."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from securefgl.config import ExperimentConfig

#: packages whose versions are recorded (``ray`` only when it is installed)
PACKAGES = ("securefgl", "torch", "torch_geometric", "numpy", "tenseal", "opacus",
            "cryptography", "ray")  # fmt: skip
OPTIONAL = ("ray",)

#: the units of a node / graph task's result.json
UNITS = {
    "accuracy": "fraction in [0, 1] (test_acc, val_acc, best_last_test_acc; tables show %)",
    "f1": "macro-F1, fraction in [0, 1] (test_f1; tables show %)",
    "bytes": "bytes on the channel, set-up included",
    "seconds": "wall-clock seconds, set-up included",
    "epsilon": "(ε, δ)-DP of each claim in guarantees, in the claim's unit",
}
#: the units of ``securefgl recommend``'s result.json
RECOMMENDATION_UNITS = {
    "rmse": "the dataset's rating scale (test_rmse, val_rmse)",
    "mae": "the dataset's rating scale (test_mae)",
    "seconds": "wall-clock seconds of training",
    "epsilon": "(ε, δ)-DP of each claim in privacy.guarantees, in the claim's unit",
}


def package_versions() -> dict[str, str | None]:
    """Each package of :data:`PACKAGES` with its installed version (None: not installed;
    optional packages that are not installed are left out)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            if name not in OPTIONAL:
                out[name] = None
    return out


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=10, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def git_state(source: Path | None = None) -> dict[str, Any] | None:
    """``{"commit": short hash, "dirty": bool}`` of the git checkout holding the securefgl
    package (None when it is not one: an installed wheel, no git)."""
    package = Path(source or Path(__file__).resolve().parents[1])
    tree = package.parent
    top = _git(["rev-parse", "--show-toplevel"], tree)
    if top is None or Path(top).resolve() != tree.resolve():
        return None  # not a checkout of this repository (e.g. site-packages inside one)
    commit = _git(["rev-parse", "--short", "HEAD"], tree)
    status = _git(["status", "--porcelain", "--untracked-files=no"], tree)
    if commit is None:
        return None
    return {"commit": commit, "dirty": bool(status)}


def machine() -> dict[str, Any]:
    """The platform, Python and CPU count the run had."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def _command() -> list[str]:
    """The command line (``securefgl ...`` whether run as the script or ``-m``)."""
    if not sys.argv or not sys.argv[0]:
        return []
    name = Path(sys.argv[0]).name
    return ["securefgl" if name in ("securefgl", "cli.py") else name, *sys.argv[1:]]


def provenance(config: ExperimentConfig | None = None) -> dict[str, Any]:
    """The ``provenance`` entry of a result.json (``config``: the run's configuration)."""
    out: dict[str, Any] = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": _command(),
        "packages": package_versions(),
        "git": git_state(),
        "machine": machine(),
    }
    if config is not None:
        out["config"] = config.resolved()
    return out
