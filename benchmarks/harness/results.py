"""Saving results: atomic writes, lock files, resumable partial files, Markdown and figures
(and the grids' command-line helpers).

Every write goes to a temporary file in the same folder and is renamed over the target, so
an interrupted run never leaves half a file and readers see the old or the new version.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from securefgl import extras

#: A run folder's marker of a control run (``benchmarks.plain_wire_control``): what differs
#: from the library's run, read by the reports that list the folder.
CONTROL_FILE = "control.json"


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(
    path: Path,
    data: Any,
    *,
    indent: int = 1,
    newline: bool = False,
    default: Any = None,
    allow_nan: bool = True,
) -> None:
    """``json.dumps(data, indent=indent, ...)`` (``+ "\\n"`` with ``newline``), atomically."""
    text = json.dumps(data, indent=indent, default=default, allow_nan=allow_nan)
    write_text(path, text + ("\n" if newline else ""))


def read_json(path: Path, default: Any = None) -> Any:
    """The JSON in ``path``, or ``default`` when the file does not exist."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else default


@contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (created if missing) for the block: processes
    that update one result file take turns."""
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def save_seed_rows(
    path: Path,
    rows: list[dict[str, Any]],
    key: Callable[[dict[str, Any]], Hashable],
    summarise: Callable[[dict[str, Any]], None],
) -> None:
    """Write a grid's ``rows`` (each a cell with its per-seed ``runs``) atomically, first
    merging what other grid processes saved meanwhile, under a lock file. Per cell and
    seed the run measured last wins (its ``finished`` time; a run without one counts as
    oldest, and on a tie the file's run is kept), so a process's stale copy of a run that
    another process re-measured never overwrites it; ``summarise`` recomputes a changed
    cell's statistics; cells only on disk are appended to ``rows``. Concurrent grids on one
    file lose nothing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path.with_suffix(".lock")):
        ours = {key(r): r for r in rows}
        for disk in read_json(path, []):
            row = ours.get(key(disk))
            if row is None:
                rows.append(disk)
                ours[key(disk)] = disk
                continue
            merged = {r["seed"]: r for r in row["runs"]}
            for run in disk["runs"]:
                mine = merged.get(run["seed"])
                if mine is None or run.get("finished", 0.0) >= mine.get("finished", 0.0):
                    merged[run["seed"]] = run
            runs = sorted(merged.values(), key=lambda x: x["seed"])
            if runs != row["runs"]:
                row["runs"] = runs
                summarise(row)
        write_json(path, rows, indent=1)


def csv_list(value: str) -> list[str]:
    """A command-line ``a,b,c`` as ``["a", "b", "c"]`` (blanks dropped)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_shard(text: str) -> tuple[int, int]:
    """``i/n`` with 0 <= i < n (argparse type)."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard is i/n, got {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"--shard i/n needs 0 <= i < n (shards count from 0), "
                                         f"got {text!r}")  # fmt: skip
    return i, n


class PartialFile:
    """The rows a run has measured so far (a JSON list), saved after every cell so that an
    interrupted run can resume; removed when the run completes."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> list[Any]:
        return read_json(self.path, [])

    def save(self, rows: list[Any]) -> None:
        write_json(self.path, rows, indent=1, newline=True)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend; without matplotlib (the
    ``plots`` extra) the benchmark ends with one line saying what to install."""
    try:
        return extras.pyplot("a benchmark figure")
    except extras.MissingExtraError as err:
        raise SystemExit(f"securefgl: {err}") from None


def save_figure(fig: Any, path: Path, dpi: int = 120, tight: bool = True) -> None:
    """Lay out ``fig``, save it atomically (format from the suffix of ``path``) and close it.
    The saved image is cropped to what is drawn, so legends placed outside the axes stay whole.
    ``tight=False`` keeps the figure's own layout (grids whose spacing is set by hand)."""
    plt = pyplot()
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    if tight:
        fig.tight_layout()
    try:
        fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png", bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        plt.close(fig)


def round_bytes(history: list[dict[str, Any]]) -> int:
    """Bytes a run's rounds put on the channel (up, down and peer to peer), from its
    result.json ``history``."""
    return int(sum(h["bytes_up"] + h["bytes_down"] + h["bytes_p2p"] for h in history))
