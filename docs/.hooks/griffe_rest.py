"""Griffe extension for the API reference (mkdocs.yml): the docstrings' reST markup as
Markdown.

Docstrings here are prose in the Sphinx dialect: roles such as ``:class:`~a.b.C``` and
``:mod:`a.b``` become code (`C`, `a.b`; a leading ``~`` keeps the last name, as Sphinx
does), and a paragraph ending in ``::`` (a literal block follows, indented) ends in ``:``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:attr|class|data|exc|func|meth|mod|obj|const):`([^`]+)`")
LITERAL = re.compile(r"(?m)(\S)::$|^(\s*)::$")


def _role(m: re.Match[str]) -> str:
    text = m.group(1).strip()
    explicit = re.match(r"^(.*?)\s*<[^>]+>$", text)  # :class:`title <target>`
    if explicit:
        text = explicit.group(1)
    elif text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    return f"`{text}`"


def to_markdown(docstring: str) -> str:
    """``docstring`` with its reST roles and literal-block markers as Markdown."""
    text = ROLE.sub(_role, docstring)
    return LITERAL.sub(lambda m: f"{m.group(1)}:" if m.group(1) else "", text)


class RestRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
