"""A toy algorithm family, as a third party would add one: one folder (its ``__init__.py``
declaring the family, its settings and its algorithm, and its ``README.md`` page) and one
registration line (an entry point). ``tests/securefgl/algorithms/test_plugin.py`` installs it
in a temporary site and runs it through ``securefgl run``; the structure report counts the
files it touches (``files_touched_to_add_an_algorithm``)."""

from __future__ import annotations

import sys
import tempfile
import textwrap
from pathlib import Path

TOY = {
    "__init__.py": '''
        """A toy family: FedAvg that scales every client's learning rate."""

        from dataclasses import dataclass, field

        from securefgl.config.families import Family, Section


        @dataclass(frozen=True)
        class ToySettings:
            """The [experiment.toy] section."""

            boost: float = field(default=1.0, metadata={"help": "client lr factor"})

            def __post_init__(self) -> None:
                if not self.boost > 0:
                    raise ValueError(f"boost must be > 0, got {self.boost}")


        def _classes():
            from securefgl.algorithms.fedavg.algorithm import FedAvg

            class ToyAvg(FedAvg):
                name = "toy-avg"

                def __init__(self, config):
                    boost = config.section(ToySettings).boost
                    super().__init__(config.replace(client_lr=config.client_lr * boost))

            return (ToyAvg,)


        FAMILY = Family(
            name="toy", algorithms=("toy-avg",), load=_classes,
            section=Section("toy", ToySettings, "Toy family (a test plug-in)", "toy-"),
        )
    ''',
    "README.md": "# Toy\n\nA test plug-in: FedAvg with a boosted client learning rate.\n",
}
#: the one line a family adds outside its folder (here in its distribution's metadata;
#: in this repository, a line of pyproject.toml's securefgl.algorithms entry points)
ENTRY_POINT = "toy = toyfamily:FAMILY"


def install(site: Path) -> list[Path]:
    """The plug-in's folder and its one registration line; the files touched."""
    package = site / "toyfamily"
    package.mkdir(parents=True)
    for name, text in TOY.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    info = site / "toyfamily-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyfamily\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[securefgl.algorithms]\n{ENTRY_POINT}\n")
    return [package / name for name in TOY] + [info / "entry_points.txt"]




def ensure_family(name: str, target: str) -> bool:
    """Make the family ``name`` (entry point ``target``, e.g. ``"securefgl.algorithms.fedvn:
    FAMILY"``) visible in this process when the installed metadata does not list it yet (a
    family added in a working copy before the package is re-installed): its entry point
    goes into a temporary site on ``sys.path`` and the family caches are cleared. True when
    it had to be added."""
    import importlib

    registry = importlib.import_module("securefgl.algorithms.registry")
    families = importlib.import_module("securefgl.config.families")  # the module
    if name in families.families():
        return False
    site = Path(tempfile.mkdtemp(prefix=f"securefgl-{name}-"))
    info = site / f"securefgl_{name}_family-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: securefgl-{name}-family\nVersion: 0.0\n"
    )
    (info / "entry_points.txt").write_text(f"[securefgl.algorithms]\n{name} = {target}\n")
    sys.path.append(str(site))
    for cached in (families.families, families.sections, registry._classes):
        cached.cache_clear()
    return True
