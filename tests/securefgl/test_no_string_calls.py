"""No method or role (sub-party) name travels as a string literal in ``securefgl/``: calls
are built from the method itself (``Call.to(party, Class.method, ...)``, ``executor.map(ids,
Class.method, ...)``), roles are objects a party returns from ``roles()``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "securefgl"
#: calls whose method and role are references, never strings: the argument positions
#: where the role or method goes (a party id, or an argument of the method, may be a string)
CALLS = {"Call": (1, 2), "to": (1,), "map": (1, 2), "invoke": (1, 2), "phases": (0,),
         "_deliver": (1,), "deliver": (3,), "_call": (1,), "_each_group": (0,), "of": (0,),
         "Target": (1,)}  # fmt: skip


def _strings_in_calls(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        for i in CALLS.get(name, ()):
            arg = node.args[i] if i < len(node.args) else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((node.lineno, f"{name}(... {arg.value!r} ...)"))
    return found


def _role_tables(tree: ast.AST) -> list[tuple[int, str]]:
    """Tables of role names or attribute paths (the old ``SUBPARTIES``)."""
    return [
        (node.lineno, target.id)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id in {"SUBPARTIES", "SUB_PARTIES"}
    ]


def test_no_method_or_role_name_is_a_string_literal_in_securefgl() -> None:
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, what in _strings_in_calls(tree) + _role_tables(tree):
            offenders.append(f"{path.relative_to(ROOT.parent)}:{line}: {what}")
    assert offenders == []


def test_the_check_finds_string_calls_and_role_tables() -> None:
    code = (
        'ex.map(ids, "train", "predict")\nCall(c, "train", "local_update", (1,))\n'
        'SUBPARTIES = {"train": ""}\nex.map(ids, Client.predict)\n'
        'ex.call([Call.to("client-1", Client.predict)])\n'
    )
    tree = ast.parse(code)
    assert [line for line, _ in _strings_in_calls(tree)] == [1, 1, 2, 2]
    assert _role_tables(tree) == [(3, "SUBPARTIES")]
