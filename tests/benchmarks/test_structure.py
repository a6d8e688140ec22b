"""The layer rule and the absence of import cycles, checked on the repository itself."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("structure", ROOT / "benchmarks" / "structure.py")
structure = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(structure)


def test_no_import_cycles_and_no_upward_imports_in_the_repository():
    graph = structure.import_graph(ROOT)
    assert "securefgl.algorithms.registry" in graph and "protocols.registry" in graph  # it saw the code
    assert structure.import_cycles(graph) == []
    assert structure.upward_imports(graph) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_check_finds_cycles_upward_imports_and_graph_libraries_in_protocols(tmp_path):
    root = _tree(
        tmp_path,
        {
            "protocols/__init__.py": "",
            "protocols/a.py": "import torch_geometric\n",
            "securefgl/__init__.py": "",
            "securefgl/x.py": "from securefgl import y\n",
            # a function-local import still closes the cycle
            "securefgl/y.py": "def f():\n    from securefgl.x import g\n",
            "securefgl/z.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import attacks.b\n"
                "from . import x\n"
            ),
            "securefgl/cli.py": "def main():\n    from attacks.b import run\n",
            "attacks/__init__.py": "",
            "attacks/b.py": "from securefgl.x import g\n",
            # benchmark scripts import their siblings by bare name
            "benchmarks/run.py": "import helpers.io\n",
            "benchmarks/helpers/__init__.py": "",
            "benchmarks/helpers/io.py": "from run import main\n",
        },
    )
    graph = structure.import_graph(root)
    assert graph["securefgl.z"] == {"typing", "securefgl.x"}  # relative; TYPE_CHECKING left out
    assert structure.import_cycles(graph) == [
        ["benchmarks.helpers.io", "benchmarks.run"],
        ["securefgl.x", "securefgl.y"],
    ]
    assert structure.upward_imports(graph) == [
        "protocols.a -> torch_geometric",
        "securefgl.cli -> attacks.b",
    ]


@pytest.mark.parametrize("lines", [600, 601])
def test_long_files_and_the_report(tmp_path, lines):
    root = _tree(tmp_path, {"securefgl/big.py": "x = 1\n" * lines, "README.md": "a\nb\n"})
    report = structure.structure(root)
    expected = [] if lines == 600 else ["securefgl/big.py (601 lines)"]
    assert report["files_over_600_lines"] == expected
    assert report["readme_lines"] == 2
    json.dumps(report)
