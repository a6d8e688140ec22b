"""Progress lines: what a run says about itself when no progress bar is drawn."""

from __future__ import annotations

import logging
import time

from securefgl.federation import progress as progress_module
from securefgl.federation.progress import PROGRESS_LOGGER, Progress


def test_a_line_a_period_from_set_up_to_the_last_round(caplog):
    with (
        caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER),
        Progress("fedavg seed=0", total=4, bar=False, every=0.05) as bar,
    ):
        time.sleep(0.12)  # set-up
        assert bar.line().startswith("fedavg seed=0: set-up, ")
        bar.start_rounds()
        for _ in range(2):
            bar.step(loss=0.5)
        time.sleep(0.12)
        line = bar.line()
    assert line.startswith("fedavg seed=0: round 2/4, loss 0.5, ") and "to go" in line
    logged = [r.getMessage() for r in caplog.records]
    assert any("set-up" in m for m in logged) and any("round 2/4" in m for m in logged)


def test_a_run_that_may_stop_early_says_so_and_guesses_no_end():
    bar = Progress("fesog seed=0", total=2000, bar=False, every=0, cap=True)
    bar.step(best_val_rmse=0.91)
    line = bar.line()
    bar.close()
    assert "round 1 of at most 2000" in line and "to go" not in line


def test_no_thread_and_no_line_when_a_bar_is_drawn(monkeypatch):
    monkeypatch.setattr(progress_module.sys.stderr, "isatty", lambda: True, raising=False)
    with Progress("x", total=3, bar=True, every=0.01) as bar:
        assert bar._thread is None and bar._bar is not None
        bar.step(loss=1.0)


def test_the_cli_shows_the_same_logger():
    from securefgl import cli

    assert cli.PROGRESS_LOGGER == PROGRESS_LOGGER
