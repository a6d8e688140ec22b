"""The docs' tables of families, algorithms and settings sections list every installed
family, as the registry finds it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from securefgl.algorithms import registry

DOCS = Path(__file__).resolve().parents[3] / "docs"
FAMILIES = registry.families()


def _row(text: str, first_cell: str) -> str:
    match = re.search(rf"^\| {re.escape(first_cell)} \|.*$", text, flags=re.M)
    assert match, f"no table row for {first_cell}"
    return match.group(0)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_architecture_table_lists_each_family_and_its_algorithms(name: str) -> None:
    row = _row((DOCS / "architecture.md").read_text(), f"`{name}`")
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    listed = set(re.findall(r"`([^`]+)`", cells[2]))
    assert listed == set(FAMILIES[name].algorithms)


@pytest.mark.parametrize(
    "name", sorted(name for name, family in FAMILIES.items() if family.section is not None)
)
def test_the_configuration_page_lists_each_settings_section(name: str) -> None:
    section = FAMILIES[name].section
    _row((DOCS / "configuration.md").read_text(), f"`[experiment.{section.name}]`")
