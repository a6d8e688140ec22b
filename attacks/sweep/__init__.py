"""Privacy–utility sweeps (``securefgl sweep``): a grid of algorithms × protections ×
privacy levels × seeds, each cell trained once and attacked on its own transcript and
models, resumable; the frontier as JSON, Markdown and plots.

:mod:`~attacks.sweep.grid` (the grid and each cell's configuration),
:mod:`~attacks.sweep.engine` (running it, resumably), :mod:`~attacks.sweep.frontier`
(averaging over seeds) and :mod:`~attacks.sweep.plots` (the figures).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def save_frontier(
    records: list[dict[str, Any]], folder: str | Path, name: str = "frontier"
) -> dict[str, Path]:
    """Write ``<name>.json`` (the frontier rows), ``<name>.md`` and the figures into
    ``folder``; returns the paths."""
    from attacks.sweep.frontier import frontier_rows, markdown  # here: ``--help`` stays light
    from attacks.sweep.plots import plot_frontier
    from securefgl.experiment.results import write_atomic

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = frontier_rows(records)
    out = {"json": folder / f"{name}.json", "md": folder / f"{name}.md"}
    write_atomic(out["json"], json.dumps(rows, indent=1) + "\n")
    write_atomic(out["md"], markdown(rows))
    for path in plot_frontier(rows, folder, name):
        out[path.stem] = path
    return out
