"""Algorithm families this checkout declares but the installed metadata does not know yet.

A family's entry point (``pyproject.toml``) is discovered only once the package is
re-installed; a checkout that adds one (a branch before its merge) registers the missing
lines in-process: a ``.dist-info`` holding them is written to a temporary folder put on
``sys.path`` and the family caches are cleared. Idempotent; a no-op when nothing is missing.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

GROUP = "securefgl.algorithms"
ROOT = Path(__file__).resolve().parents[2]


def missing_families(root: Path = ROOT) -> dict[str, str]:
    """``{name: "module:FAMILY"}`` declared in ``root/pyproject.toml`` but not installed."""
    project = tomllib.loads((root / "pyproject.toml").read_text())
    declared = project["project"]["entry-points"][GROUP]
    installed = {ep.name for ep in entry_points(group=GROUP)}
    return {k: v for k, v in declared.items() if k not in installed}


def register_checkout_families(root: Path = ROOT) -> list[str]:
    """Make the missing families discoverable in this process; returns their names."""
    missing = missing_families(root)
    if not missing:
        return []
    site = Path(tempfile.mkdtemp(prefix="securefgl-families-"))
    info = site / "securefgl_checkout_families-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: securefgl-checkout-families\n"
                                   "Version: 0\n")  # fmt: skip
    lines = "\n".join(f"{k} = {v}" for k, v in missing.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}\n")
    sys.path.append(str(site))
    module = importlib.import_module("securefgl.config.families")
    module.families.cache_clear()
    module.sections.cache_clear()
    return sorted(missing)
