"""mkdocs hooks: pages that live beside what they describe join the site.

Each algorithm family's page (``securefgl/algorithms/<family>/README.md``) becomes
``algorithms/<family>.md``, listed under "Algorithms" in the navigation, and each benchmark
report (``benchmarks/results/*.md`` with its figures) becomes ``results/<name>.md``. Links
between repository files are written relative to the files as they lie in the repository
(so they work when browsing it); here they are rewritten to the site's pages.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")
_SOURCES: dict[str, Path] = {}  # site uri -> the repository file it is made from


def _site_uri(repo_path: Path) -> str | None:
    """The site page of a repository file, if the site has one."""
    rel = repo_path.relative_to(ROOT).as_posix() if repo_path.is_relative_to(ROOT) else ""
    if rel.startswith("docs/"):
        return rel[len("docs/") :]
    parts = rel.split("/")
    if len(parts) == 4 and parts[:2] == ["securefgl", "algorithms"] and parts[3] == "README.md":
        return f"algorithms/{parts[2]}.md"
    if len(parts) == 3 and parts[:2] == ["benchmarks", "results"]:
        return f"results/{parts[2]}"
    return None


def on_files(files: Files, config: Any) -> Files:
    pages = sorted((ROOT / "securefgl" / "algorithms").glob("*/README.md"))
    results = sorted((ROOT / "benchmarks" / "results").glob("*.md"))
    figures = sorted((ROOT / "benchmarks" / "results").glob("*.png"))
    for path in [*pages, *results]:
        uri = _site_uri(path)
        _SOURCES[uri] = path
        files.append(File.generated(config, uri, content=path.read_text(encoding="utf-8")))
    for path in figures:
        files.append(File.generated(config, _site_uri(path), abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    uri = page.file.src_uri
    source = _SOURCES.get(uri, ROOT / "docs" / uri)

    def fix(m: re.Match[str]) -> str:
        target = m.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith("/"):
            return m.group(0)
        site = _site_uri(Path(os.path.normpath(source.parent / target)))
        if site is None:  # a code or data file: link to it in the repository
            return m.group(0)
        new = os.path.relpath(site, os.path.dirname(uri) or ".")
        return f"{m.group(1)}{new}{m.group(3) or ''}{m.group(4)}"

    return LINK.sub(fix, markdown)


def on_nav(nav: Navigation, config: Any, files: Files) -> Navigation:
    section = next((i for i in nav.items if isinstance(i, Section) and i.title == "Algorithms"),
                   None)  # fmt: skip
    if section is None:
        return nav
    listed = {p.file.src_uri for p in section.children if isinstance(p, Page)}
    for f in sorted(files.documentation_pages(), key=lambda f: f.src_uri):
        if f.src_uri.startswith("algorithms/") and f.src_uri not in listed:
            page = f.page if f.page is not None else Page(None, f, config)
            page.parent = section
            section.children.append(page)
    return nav
