"""The repository's shape: files over 600 lines, import cycles, upward imports, README length.

Layers, lowest first: ``protocols`` ← ``securefgl`` ← ``attacks`` ← ``benchmarks``; a
module may import only from its own layer or a lower one, ``protocols`` imports no graph
library, and no set of modules imports itself round a cycle. Every ``import`` statement
counts, function-local ones included (a local import that dodges a cycle is still a cycle);
imports under ``if TYPE_CHECKING:`` do not run and are left out there. ``from pkg import
name`` depends on the submodule ``pkg.name`` when there is one, else on ``pkg``.

Inside a package the same rule holds between its sub-packages, on the floors of
:data:`FLOORS` (written down here only), type-only imports included: no import from a lower
floor to a higher one, no loop between sub-packages, and the sub-packages of a ``"*"`` floor
(the algorithm families) never import one another: what they share lives a floor lower.

    python -m benchmarks.structure        # writes benchmarks/results/structure.json

``tests/benchmarks/test_structure.py`` runs the same analysis and fails on any cycle or
upward import.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("protocols", "securefgl", "attacks", "benchmarks")
GRAPH_LIBRARIES = ("torch_geometric", "networkx", "community")  # protocols knows no graphs
MAX_LINES = 600

#: Floors inside a package, lowest first; "*": every sub-package not named on another floor.
FLOORS: dict[str, list[tuple[str, ...]]] = {
    "securefgl": [
        ("data", "models"), ("config", "extras"), ("federation",), ("algorithms",),
        ("experiment",), ("deploy",), ("cli",),
    ],
    "securefgl.algorithms": [("base",), ("common",), ("fedavg",), ("*",), ("registry",)],
}  # fmt: skip


def python_files(root: Path = ROOT) -> list[Path]:
    """The Python files git tracks or would track (every ``*.py`` outside hidden and
    virtual-env folders when git is not available)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return sorted(root / line for line in out.splitlines() if (root / line).exists())
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "site"}
        return sorted(
            p for p in root.rglob("*.py") if not skip & set(p.relative_to(root).parts[:1])
        )


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, type_only: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth; those under ``if TYPE_CHECKING:`` only with
    ``type_only``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child) and not type_only:
                stack.extend(child.orelse)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            stack.append(child)


def imports_of(path: Path, name: str, modules: set[str], type_only: bool = False) -> set[str]:
    """The names this module imports: our modules, resolved as precisely as possible, and
    the top-level names of external packages (``type_only``: type-checking imports too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _imports(tree, type_only):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            anchor = ".".join(parts[: len(parts) - node.level + 1])
            base = f"{anchor}.{base}" if base else anchor
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            found.add(sub if sub in modules else base)
    return {_resolve(target, modules) for target in found}


def _resolve(target: str, modules: set[str]) -> str:
    """A name inside a module stands for the module."""
    while target and target not in modules and "." in target:
        target = target.rpartition(".")[0]
    return target


def import_graph(root: Path = ROOT, type_only: bool = False) -> dict[str, set[str]]:
    """module -> the modules (ours) and external top-level packages it imports."""
    files = {module_name(p, root): p for p in python_files(root)}
    modules = set(files)
    return {m: imports_of(p, m, modules, type_only) - {m} for m, p in files.items()}


def layer_of(module: str) -> int | None:
    top = module.split(".", 1)[0]
    return LAYERS.index(top) if top in LAYERS else None


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(cycles)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"a.b -> c.d"`` for every import from a lower layer into a higher one, and every
    graph library imported by ``protocols``."""
    found = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module)
        if mine is None:
            continue
        for target in sorted(targets):
            theirs = layer_of(target)
            forbidden = mine == 0 and target.split(".")[0] in GRAPH_LIBRARIES
            if (theirs is not None and theirs > mine) or forbidden:
                found.append(f"{module} -> {target}")
    return found


def _member(module: str, package: str) -> str | None:
    """The sub-package (or module) of ``package`` that ``module`` lives in."""
    if not module.startswith(package + "."):
        return None
    return module[len(package) + 1 :].split(".", 1)[0]


def _floor(member: str, floors: list[tuple[str, ...]]) -> int | None:
    named = {m: i for i, names in enumerate(floors) for m in names if m != "*"}
    if member in named:
        return named[member]
    return next((i for i, names in enumerate(floors) if "*" in names), None)


def subpackage_graph(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """sub-package -> the sibling sub-packages it imports (``package``'s own imports out)."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        mine = _member(module, package)
        if mine is None:
            continue
        out.setdefault(mine, set())
        out[mine] |= {t for t in (_member(x, package) for x in targets) if t not in (None, mine)}
    return {f"{package}.{k}": {f"{package}.{x}" for x in v} for k, v in out.items()}


def subpackage_upward_imports(
    graph: dict[str, set[str]], floors: dict[str, list[tuple[str, ...]]] = FLOORS
) -> list[str]:
    """``"a.b.c -> a.d.e"`` for every import between sub-packages of a package of
    ``floors`` that runs up a floor, or between two members of its ``"*"`` floor."""
    found = []
    for package, levels in floors.items():
        for module, targets in sorted(graph.items()):
            mine = _member(module, package)
            if mine is None:
                continue
            for target in sorted(targets):
                theirs = _member(target, package)
                if theirs is None or theirs == mine:
                    continue
                a, b = _floor(mine, levels), _floor(theirs, levels)
                siblings = a == b and a is not None and "*" in levels[a]
                if a is None or b is None or b > a or siblings:
                    found.append(f"{module} -> {target}")
    return found


def subpackage_cycles(
    graph: dict[str, set[str]], floors: dict[str, list[tuple[str, ...]]] = FLOORS
) -> list[list[str]]:
    """Loops between the sub-packages of every package of ``floors``."""
    return sorted(c for p in floors for c in import_cycles(subpackage_graph(graph, p)))


def long_files(root: Path = ROOT, limit: int = MAX_LINES) -> list[str]:
    out = []
    for path in python_files(root):
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > limit:
            out.append(f"{path.relative_to(root)} ({lines} lines)")
    return out


def structure(root: Path = ROOT) -> dict[str, object]:
    graph, typed = import_graph(root), import_graph(root, type_only=True)
    readme = root / "README.md"
    return {
        "files_over_600_lines": long_files(root),
        "import_cycles": import_cycles(graph),
        "upward_imports": upward_imports(graph),
        "subpackage_upward_imports": subpackage_upward_imports(typed),
        "subpackage_cycles": subpackage_cycles(typed),
        "files_touched_to_add_an_algorithm": files_touched_to_add_an_algorithm(),
        "readme_lines": readme.read_text(encoding="utf-8").count("\n") if readme.exists() else 0,
    }


def files_touched_to_add_an_algorithm() -> int:
    """The files the plug-in test's toy family writes or edits (:mod:`.harness.plugin_family`): its
    folder's files and the one registration line's file."""
    from benchmarks.harness.plugin_family import install

    with tempfile.TemporaryDirectory() as site:
        return len(install(Path(site)))


def main() -> None:
    argparse.ArgumentParser(
        prog="python -m benchmarks.structure",
        description="Measure the code's layout (modules, sizes, imports) and write "
        "benchmarks/results/structure.json.",
    ).parse_args()
    report = structure()
    out = ROOT / "benchmarks" / "results" / "structure.json"
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=1))
    print(f"written: {out}")


if __name__ == "__main__":
    main()
