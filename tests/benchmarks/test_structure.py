"""The layer rule and the absence of import cycles, checked on the repository itself."""

import json
from pathlib import Path

import pytest

from benchmarks import structure

ROOT = Path(__file__).resolve().parents[2]


def test_no_import_cycles_and_no_upward_imports_in_the_repository():
    graph = structure.import_graph(ROOT)
    # it saw the code
    assert "securefgl.algorithms.registry" in graph and "protocols.registry" in graph
    assert structure.import_cycles(graph) == []
    assert structure.upward_imports(graph) == []


def test_the_floors_inside_securefgl_hold_type_only_imports_included():
    typed = structure.import_graph(ROOT, type_only=True)
    assert "securefgl.config.experiment" in typed and "securefgl.algorithms.fedstruct" in typed
    assert structure.subpackage_upward_imports(typed) == []
    assert structure.subpackage_cycles(typed) == []


def test_the_floor_check_finds_upward_sibling_and_type_only_imports(tmp_path):
    root = _tree(
        tmp_path,
        {
            "securefgl/__init__.py": "",
            "securefgl/data/__init__.py": "",
            "securefgl/data/views.py": "from securefgl.config import x\n",  # up a floor
            "securefgl/config/__init__.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from securefgl.cli import main\n"  # type-only, still up
            ),
            "securefgl/cli.py": "from securefgl.config import x\n",
            "securefgl/algorithms/__init__.py": "",
            "securefgl/algorithms/fedsage/__init__.py": "",
            "securefgl/algorithms/fedsage/a.py": "from securefgl.algorithms.spreadfgl import b\n",
            "securefgl/algorithms/spreadfgl/__init__.py": "",
            "securefgl/algorithms/spreadfgl/b.py": "from securefgl.algorithms.common import c\n",
            "securefgl/algorithms/common/__init__.py": "",
            "securefgl/algorithms/common/c.py": "",
        },
    )
    typed = structure.import_graph(root, type_only=True)
    siblings = "securefgl.algorithms.fedsage.a -> securefgl.algorithms.spreadfgl.b"
    assert structure.subpackage_upward_imports(typed) == [
        "securefgl.config -> securefgl.cli",  # type-only, still up a floor
        "securefgl.data.views -> securefgl.config",
        siblings,
    ]
    assert structure.subpackage_cycles(typed) == [["securefgl.cli", "securefgl.config"]]
    assert structure.subpackage_upward_imports(structure.import_graph(root)) == [
        "securefgl.data.views -> securefgl.config",
        siblings,
    ]


def test_benchmarks_import_their_helpers_by_absolute_name_and_nothing_from_tests():
    """No bare sibling names (``import harness``), nothing from ``tests``, and a script's
    folder imports no other script's helpers: what two scripts share is in the harness."""
    graph = structure.import_graph(ROOT)
    assert "benchmarks.harness.results" in graph and "benchmarks.robustness.cases" in graph
    ours = {m.split(".")[1] for m in graph if m.startswith("benchmarks.")}  # harness, ...
    for module, targets in graph.items():
        if not module.startswith("benchmarks."):
            continue
        bare = {t for t in targets if t.split(".")[0] in ours | {"tests"}}
        assert not bare, f"{module} imports {sorted(bare)}"
        mine = module.split(".")[1]
        other = {
            t for t in targets
            if t.startswith("benchmarks.") and t.split(".")[1] not in (mine, "harness")
        }  # fmt: skip
        assert not other, f"{module} imports {sorted(other)}"


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
            # a benchmark script is a folder's __main__ beside its helpers, imported by
            # absolute name (python -m benchmarks.run)
            "benchmarks/__init__.py": "",
            "benchmarks/run/__init__.py": "",
            "benchmarks/run/__main__.py": "from benchmarks.run import io\n",
            "benchmarks/run/io.py": "from benchmarks.run.__main__ import main\n",
            # a bare name is an outside package, never a sibling of benchmarks/
            "benchmarks/harness/__init__.py": "",
            "benchmarks/old.py": "import harness\n",
        },
    )
    graph = structure.import_graph(root)
    assert graph["securefgl.z"] == {"typing", "securefgl.x"}  # relative; TYPE_CHECKING left out
    assert graph["benchmarks.run.__main__"] == {"benchmarks.run.io"}
    assert graph["benchmarks.old"] == {"harness"}
    assert structure.import_cycles(graph) == [
        ["benchmarks.run.__main__", "benchmarks.run.io"],
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
