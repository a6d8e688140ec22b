"""Every relative link in the built documentation site leads somewhere.

    python -m tests.site_links site      # after `mkdocs build`; `make docs` runs both

Reads every HTML page under the site folder and checks each ``href`` and ``src`` that is not
an external address: the file it names exists in the site (a folder: its ``index.html``),
and its ``#fragment``, if any, is an ``id`` (or ``name``) on the page it leads to. Links
starting with ``/`` are taken from the site's root (the 404 page uses them). mkdocs' own
``--strict`` checks the links written in the Markdown; this checks the HTML as built,
the API reference, the theme and the pages the hooks add included. Exit status 1 and one
line per broken link when any is found.

:func:`markdown_links` lists the relative links of a Markdown file (the README), for the
test that they exist in the repository.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key in ("href", "src"):
                self.links.append(value)
            elif key == "id" or (key == "name" and tag == "a"):
                self.ids.add(value)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    page.close()
    return page


def _external(link: str) -> bool:
    parts = urlsplit(link)
    return bool(parts.scheme or parts.netloc)  # http:, mailto:, data:, //host/...


def broken_links(site: Path) -> list[str]:
    """``page: link (why)`` for every relative link of the site that leads nowhere."""
    site = site.resolve()
    pages = {p: _parse(p) for p in sorted(site.rglob("*.html"))}
    broken = []
    for page, parsed in pages.items():
        for link in parsed.links:
            if _external(link):
                continue
            parts = urlsplit(link)
            path = unquote(parts.path)
            if not path:
                target = page
            elif path.startswith("/"):
                target = (site / path.lstrip("/")).resolve()
            else:
                target = (page.parent / path).resolve()
            where = f"{page.relative_to(site)}: {link}"
            if not target.is_relative_to(site):
                broken.append(f"{where} (outside the site)")
                continue
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{where} (no such file)")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html":
                ids = (pages.get(target) or _parse(target)).ids
                if fragment not in ids:
                    broken.append(f"{where} (no #{fragment} on that page)")
    return broken


MARKDOWN_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def markdown_links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file (fragments dropped, code spans and
    fenced blocks skipped) that name no existing file or folder beside it."""
    text = re.sub(r"(?s)```.*?```", "", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    missing = []
    for link in MARKDOWN_LINK.findall(text):
        if _external(link) or link.startswith("#"):
            continue
        target = path.parent / unquote(urlsplit(link).path)
        if not target.exists():
            missing.append(link)
    return missing


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m tests.site_links SITE_FOLDER (a built site)", file=sys.stderr)
        return 2
    site = Path(argv[0])
    broken = broken_links(site)
    for line in broken:
        print(f"broken link: {line}", file=sys.stderr)
    pages = sum(1 for _ in site.rglob("*.html"))
    print(f"site links: {pages} pages, {len(broken)} broken relative links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
