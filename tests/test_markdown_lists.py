"""Nested lists in the site's Markdown pages: Python-Markdown (the site's renderer) nests a
list item only when it is indented by four spaces; one to three spaces flatten it into the
parent list."""

from __future__ import annotations

import re

import pytest

from tests.test_site_links import PAGES, ROOT

_SHALLOW_ITEM = re.compile(r"^ {1,3}(?:[-*+]|\d+\.) ")


def shallow_items(text: str) -> list[int]:
    """1-based numbers of the lines outside code fences that start a list item indented by
    one to three spaces."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and _SHALLOW_ITEM.match(line):
            lines.append(number)
    return lines


def test_shallow_items_are_found_outside_code():
    text = "- a\n  - b\n    - c\n   1. d\n```\n  - e\n```\n-  f\n"
    assert shallow_items(text) == [2, 4]


@pytest.mark.parametrize("page", PAGES)
def test_nested_lists_are_indented_four_spaces(page):
    assert shallow_items((ROOT / page).read_text()) == []
