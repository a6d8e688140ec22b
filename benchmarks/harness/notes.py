"""Prose and reference data kept out of the code.

``benchmarks/notes/<name>.md`` holds the long notes and the generated prose of a report.
A notes file is split into sections by marker lines ``<!-- section: KEY -->`` (text before
the first marker is a comment for the reader). In a section, the lines of a paragraph are
joined with single spaces (so the file can be wrapped freely) and paragraphs are separated
by a blank line; a line starting with ``- `` opens a list item, and the rows of a Markdown
table (lines starting with ``| `` or ``|-``) are kept as they are; ``{field}`` placeholders
are filled with ``str.format`` by :func:`section`. A notes file without markers is included
whole (:func:`note_path`).
``benchmarks/data/<name>.json`` holds reference numbers (papers' tables).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[1]
NOTES = BENCHMARKS / "notes"
DATA = BENCHMARKS / "data"
_MARKER = re.compile(r"^<!-- section: (\S+) -->\s*$")


def note_path(name: str) -> Path:
    return NOTES / f"{name}.md"


@cache
def sections(name: str) -> dict[str, str]:
    """The sections of ``notes/<name>.md``, key -> text (paragraphs unwrapped)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in note_path(name).read_text().splitlines():
        match = _MARKER.match(line)
        if match:
            current = out.setdefault(match.group(1), [])
        elif current is not None:
            current.append(line.strip())
    return {key: _unwrap(lines) for key, lines in out.items()}


def _table_row(line: str) -> bool:
    return line.startswith(("| ", "|-"))


def _unwrap(lines: list[str]) -> str:
    """Blocks separated by blank lines: paragraphs and list items (a line starting with
    ``- `` opens one) joined into one line each, tables kept line by line."""
    blocks: list[str] = []
    words: list[str] = []
    table = False

    def close() -> None:
        if words:
            blocks.append(("\n" if table else " ").join(words))
            words.clear()

    for line in lines:
        if not line or _table_row(line) != table or line.startswith("- "):
            close()
        if line:
            table = _table_row(line)
            words.append(line)
    close()
    return "\n\n".join(blocks)


def section(name: str, key: str, /, **fields: Any) -> str:
    """Section ``key`` of ``notes/<name>.md``, with ``fields`` filled in when given."""
    text = sections(name)[key]
    return text.format(**fields) if fields else text


def load_data(name: str) -> Any:
    """``benchmarks/data/<name>.json``."""
    return json.loads((DATA / f"{name}.json").read_text())
