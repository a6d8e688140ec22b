"""The encrypted-FedGCN report's floor: the best ratio a run's measured work allows."""

from __future__ import annotations

import pytest

from benchmarks.fedgcn_overhead import floor_ratio, markdown


def _row(mode: str, seconds: float, cpu: float | None) -> dict:
    row = {"dataset": "Cora", "clients": 5, "pair": "h", "mode": mode, "seconds": seconds,
           "setup_seconds": 1.0, "peak_rss_gib": 0.5, "test_acc": 0.83, "bytes": 10**6,
           "bytes_by_family": {"structure": 1, "rounds": 2}}  # fmt: skip
    if cpu is not None:
        row["cpu_seconds"] = cpu
    return row


def test_floor_spreads_the_work_less_start_up_over_the_cores() -> None:
    plain = _row("plain", 10.0, 14.0)  # 4 s of start-up CPU
    ckks = _row("ckks", 30.0, 44.0)  # 40 s of work: 20 s on 2 cores
    assert floor_ratio(ckks, plain, cores=2) == pytest.approx(2.0)
    assert floor_ratio(ckks, plain, cores=8) == pytest.approx(1.0)  # never below plain


def test_floor_needs_both_cpu_times() -> None:
    assert floor_ratio(_row("ckks", 30.0, None), _row("plain", 10.0, 14.0)) is None
    text = markdown([_row("plain", 10.0, None), _row("ckks", 30.0, 44.0)])
    assert "| 3.00 |" in text  # the ratio, without a floor


def test_markdown_shows_the_floor_beside_the_ratio() -> None:
    text = markdown([_row("plain", 10.0, 14.0), _row("ckks", 30.0, 44.0)])
    assert "| 44 | 3.00 (2.00) |" in text
