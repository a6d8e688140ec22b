"""The process and the machine: memory, load, allocator and code version."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

GIB = 1 << 30


def mem_available() -> int:
    """MemAvailable from /proc/meminfo in bytes (a large number if unknown)."""
    try:
        text = Path("/proc/meminfo").read_text()
        return int(re.search(r"MemAvailable:\s+(\d+) kB", text).group(1)) * 1024  # type: ignore[union-attr]
    except (OSError, AttributeError):
        return 1 << 50


def _status_kib(key: str) -> int | None:
    try:
        match = re.search(rf"{key}:\s+(\d+) kB", Path("/proc/self/status").read_text())
    except OSError:
        return None
    return int(match.group(1)) if match else None


def rss_bytes() -> int | None:
    """The process's resident set size (VmRSS), None if unknown."""
    kib = _status_kib("VmRSS")
    return None if kib is None else kib * 1024


def peak_rss_bytes() -> int | None:
    """The process's peak resident set size (VmHWM) since the last :func:`reset_peak_rss`."""
    kib = _status_kib("VmHWM")
    return None if kib is None else kib * 1024


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux clear_refs 5); False if unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def tree_rss_bytes(root: int) -> int:
    """The summed resident set size of process ``root`` and all its descendants (Linux
    ``/proc``; 0 where unreadable): a run's memory with its worker processes."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, AttributeError, ValueError):
            text = (entry / "status").read_text()
            pid = int(entry.name)
            parents[pid] = int(re.search(r"PPid:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
            kib = re.search(r"VmRSS:\s+(\d+) kB", text)
            rss[pid] = int(kib.group(1)) * 1024 if kib else 0
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(rss.get(p, 0) for p in tree)


def loadavg() -> list[float] | None:
    """The 1 / 5 / 15-minute load averages, rounded to 0.01 (None if unknown)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def free_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc malloc_trim)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL(None).malloc_trim(0)


def steady_allocator() -> bool:
    """Let the process keep and reuse freed memory (glibc ``mallopt``: fixed mmap threshold,
    no trimming). With glibc's defaults large arrays are often fresh mappings whose pages
    fault in on first touch, so the first timing of a call in a fresh process can be much
    slower than later ones. Returns whether it applied (glibc only)."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    settings = ((-3, 32 << 20), (-1, 2**31 - 1), (-2, 256 << 20))  # MMAP_THRESHOLD, TRIM, TOP_PAD
    return all(mallopt(option, value) == 1 for option, value in settings)


def machine_info(versions: dict[str, Any] | None = None) -> dict[str, Any]:
    """CPU, platform, Python (plus ``versions`` of libraries), memory and load at the start."""
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "sched_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": sys.version.split()[0],
        **(versions or {}),
        "mem_total_bytes": None,
        "mem_available_bytes_at_start": mem_available(),
        "loadavg_at_start": loadavg(),
    }
    try:
        text = Path("/proc/meminfo").read_text()
        info["mem_total_bytes"] = int(re.search(r"MemTotal:\s+(\d+) kB", text).group(1)) * 1024  # type: ignore[union-attr]
    except (OSError, AttributeError):
        pass
    try:
        cpu = Path("/proc/cpuinfo").read_text()
        model = re.search(r"model name\s*:\s*(.+)", cpu)
        if model:
            info["processor"] = model.group(1).strip()
    except OSError:
        pass
    return info


def code_version(root: Path) -> str | None:
    """The checkout's commit at ``root`` (``+dirty`` with uncommitted changes), or None."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("+dirty" if dirty else "")
