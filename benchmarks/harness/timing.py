"""Best-of-N timings of plain calls (the machine is shared: the minimum is the least
disturbed measurement)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any


def best_seconds(
    fn: Callable[[], Any], repeats: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Least ``clock`` seconds of ``fn()`` over ``repeats`` calls (inf for none)."""
    best = math.inf
    for _ in range(repeats):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


def best_wall_cpu(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Least wall and least CPU seconds of ``fn()`` over ``repeats`` calls, and the last
    result."""
    best, best_cpu, out = math.inf, math.inf, None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        best_cpu = min(best_cpu, time.process_time() - c)
        best = min(best, time.perf_counter() - t)
    return best, best_cpu, out
