"""The README's attack-and-plot example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_frontier_example_runs(tmp_path, monkeypatch) -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    example = next(b for b in blocks if "attacks.run(" in b)
    assert len(example.strip().splitlines()) <= 16
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    assert (tmp_path / "frontier.png").stat().st_size > 5_000
