"""Progress of a long run: a bar on a terminal, else a line a minute.

A run's set-up or a single round can take minutes (CKKS, Ray, FedStruct's Ā). When asked
for a bar and stderr is a terminal, :class:`Progress` draws a tqdm bar; otherwise a
heartbeat thread logs the run's latest state every ``every`` seconds on the
``securefgl.progress`` logger at INFO, so a run whose output goes to a file or a pipe still
says how far it is. ``securefgl`` shows those lines by default and hides them with
``--quiet``; a library user sees them once logging shows INFO for that logger.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

from tqdm.auto import tqdm

#: the logger of progress lines (``securefgl.cli`` shows it at the default level)
PROGRESS_LOGGER = "securefgl.progress"
#: seconds between two progress lines
EVERY_SECONDS = 60.0

log = logging.getLogger(PROGRESS_LOGGER)


class Progress:
    """The rounds of one run: ``step(**metrics)`` after each round, ``close()`` at the end
    (or use it as a context manager). ``total``: the most rounds the run may take; ``cap``:
    it may stop earlier (patience, a time budget)."""

    def __init__(
        self, label: str, total: int, bar: bool = True, every: float | None = None,
        cap: bool = False,
    ) -> None:  # fmt: skip
        self.label, self.total, self.cap = label, total, cap
        self.done, self.metrics = 0, {}
        self.started = self.rounds_started = time.perf_counter()
        self._bar = None
        if bar and sys.stderr.isatty():
            self._bar = tqdm(total=total, desc=label, leave=False)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        every = EVERY_SECONDS if every is None else every
        if self._bar is None and every > 0:
            self._thread = threading.Thread(
                target=self._beat, args=(every,), name=f"progress {label}", daemon=True
            )
            self._thread.start()

    def start_rounds(self) -> None:
        """The set-up is over: estimates of the time to go count from here."""
        self.rounds_started = time.perf_counter()

    def step(self, **metrics: Any) -> None:
        """One more round done; ``metrics`` (e.g. ``loss=0.41``) are shown with it."""
        self.done += 1
        self.metrics.update({k: v for k, v in metrics.items() if v is not None})
        if self._bar is not None:
            self._bar.update(1)
            if metrics:
                self._bar.set_postfix({k: _short(v) for k, v in self.metrics.items()})

    def line(self) -> str:
        """The state as one line: ``fedavg seed=0: round 40/100, loss 0.41, 2 min in, ~3 min
        to go`` (``set-up, 1 min in`` before the first round)."""
        now = time.perf_counter()
        spent = _minutes(now - self.started)
        if self.done == 0:
            return f"{self.label}: set-up, {spent} in"
        of = f"{'at most ' if self.cap else ''}{self.total}"
        parts = [f"round {self.done}/{of}" if not self.cap else f"round {self.done} of {of}"]
        parts += [f"{k} {_short(v)}" for k, v in self.metrics.items()]
        parts.append(f"{spent} in")
        if not self.cap:
            per_round = (now - self.rounds_started) / self.done
            parts.append(f"~{_minutes(per_round * (self.total - self.done))} to go")
        return f"{self.label}: {', '.join(parts)}"

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every):
            log.info("%s", self.line())

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
