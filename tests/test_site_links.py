"""The documentation's link checker (``tests/site_links.py``, run on the built site by
``make docs``), and the relative links of the Markdown pages as they lie in the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.site_links import broken_links, main, markdown_links

ROOT = Path(__file__).resolve().parents[1]


def _site(tmp_path: Path, pages: dict[str, str]) -> Path:
    for name, body in pages.items():
        path = tmp_path / "site" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return tmp_path / "site"


def test_broken_links_are_found_and_good_ones_pass(tmp_path, capsys):
    site = _site(
        tmp_path,
        {
            "index.html": (
                '<a href="guide/start.html#install">ok</a> <a href="guide/">folder</a>'
                '<a href="#top" id="top">self</a> <img src="img/logo.png">'
                '<a href="https://example.org/x">external</a> <a href="mailto:a@b.c">mail</a>'
                '<a href="/guide/start.html">from the root</a>'
                '<a href="missing.html">gone</a> <a href="guide/start.html#nowhere">anchor</a>'
                '<a href="../outside.html">out</a>'
            ),
            "guide/index.html": '<a href="../index.html#top">up</a>',
            "guide/start.html": '<h2 id="install">Install</h2><a name="old">x</a>'
            '<a href="start.html#old">named anchor</a>',
            "img/logo.png": "",
        },
    )
    (tmp_path / "outside.html").write_text("")
    assert broken_links(site) == [
        "index.html: missing.html (no such file)",
        "index.html: guide/start.html#nowhere (no #nowhere on that page)",
        "index.html: ../outside.html (outside the site)",
    ]
    assert main([str(site)]) == 1
    err = capsys.readouterr().err
    assert err.count("broken link: ") == 3
    (site / "index.html").write_text('<a href="guide/start.html#install" id="top">ok</a>')
    assert main([str(site)]) == 0


def test_markdown_links_outside_code(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("")
    page = tmp_path / "README.md"
    page.write_text(
        "[a](docs/a.md#x) [b](docs/b.md) [web](https://example.org) [top](#top)\n"
        "`[c](docs/c.md)`\n```\n[d](docs/d.md)\n```\n"
    )
    assert markdown_links(page) == ["docs/b.md"]


#: the Markdown pages of the repository that the site renders
PAGES = [
    "README.md",
    *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")),
    *sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "securefgl" / "algorithms").glob("*/README.md")
    ),
]


@pytest.mark.parametrize("page", PAGES)
def test_repository_pages_link_to_files_that_exist(page):
    """Relative links work when browsing the repository (the site rewrites them)."""
    assert markdown_links(ROOT / page) == []
