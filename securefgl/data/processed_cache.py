"""The processed half of the dataset cache: built aside, committed by a rename, checked on load.

PyG writes ``processed/`` (``data.pt`` ...) in place with a plain ``torch.save`` to the final
name, so a run killed while it writes leaves a truncated file that every later load fails
on. Here a dataset is processed in a staging folder under the cache whose ``raw/`` links to
the cache's (:func:`build_staged`), each processed file is recorded (size, SHA-256) in
:data:`RECORD`, and the staged folder replaces the cache's ``processed/`` in one rename. A
load checks the record first (:func:`state`); the caller rebuilds an entry that has no
record (a killed write, or a cache from before this module) or whose files do not match it.
A dataset that PyG has to download is processed in place and recorded afterwards; a kill
during that leaves no record, so the next load rebuilds it from the downloaded raw files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

RECORD = ".securefgl-complete.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(processed: Path) -> list[Path]:
    if not processed.is_dir():
        return []
    return sorted(p for p in processed.iterdir() if p.is_file() and not p.name.startswith(RECORD))


def state(processed: Path) -> tuple[str, str]:
    """``("complete", "")``, ``("missing", "")`` or ``("corrupt", why)``, where ``why``
    names the file at fault."""
    files = _files(processed)
    record = processed / RECORD
    if not record.is_file():
        if not files:
            return "missing", ""
        return "corrupt", (
            f"{processed} has no completion record {RECORD} (a run was killed while writing "
            "it, or an older version wrote it)"
        )
    try:
        entries = json.loads(record.read_text())["files"]
        checks = [(processed / str(n), int(size), str(sha)) for n, (size, sha) in entries.items()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "corrupt", f"its completion record {record} is unreadable"
    for path, size, sha in checks:
        if not path.is_file():
            return "corrupt", f"{path} is missing"
        actual = path.stat().st_size
        if actual != size:
            return "corrupt", f"{path} has {actual} of the {size} bytes it was written with"
        if _sha256(path) != sha:
            return "corrupt", f"{path} does not match the SHA-256 it was written with"
    return "complete", ""


def record(processed: Path) -> None:
    """Record every file of ``processed`` (size, SHA-256); written to a temporary name first."""
    entries = {p.name: [p.stat().st_size, _sha256(p)] for p in _files(processed)}
    tmp = processed / f"{RECORD}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"files": entries}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, processed / RECORD)


def build_staged(
    cache: Path, name: str, raw_of: Callable[[Path], Path], process: Callable[[Path], object]
) -> None:
    """Process a dataset aside and commit it: ``process(stage)`` runs PyG under a fresh
    staging root whose raw folder ``raw_of(stage)`` links to ``raw_of(cache)``; the staged
    ``processed/`` is recorded and renamed over ``raw_of(cache).parent / "processed"``.
    Leftovers of a killed build of ``name`` are removed first (the caller holds the lock)."""
    for old in cache.glob(f".build-{name}-*"):
        shutil.rmtree(old, ignore_errors=True)
    stage = Path(tempfile.mkdtemp(prefix=f".build-{name}-", dir=cache))
    try:
        raw = raw_of(stage)
        raw.parent.mkdir(parents=True)
        raw.symlink_to(raw_of(cache).resolve(), target_is_directory=True)
        process(stage)
        built = raw.parent / "processed"
        if not _files(built):
            raise RuntimeError(f"PyG wrote no processed files under {built}")
        record(built)
        target = raw_of(cache).parent / "processed"
        if target.exists():
            shutil.rmtree(target)
        os.replace(built, target)  # one rename: the entry is complete or absent
        target.chmod(0o700)
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # removes the raw link, never its target
