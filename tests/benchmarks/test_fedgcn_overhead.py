"""The encrypted-FedGCN report's floor (the best ratio a run's measured work allows) and
its verdicts against the targets."""

from __future__ import annotations

import pytest

from benchmarks.fedgcn_overhead import floor_ratio, markdown, verdicts


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


def test_verdicts_judge_each_cell_on_its_latest_pair() -> None:
    old = [_row("plain", 10.0, 14.0), _row("ckks", 30.0, 44.0)]  # pair h: 3.00x
    new = [{**r, "pair": "j"} for r in (_row("plain", 10.0, 14.0), _row("ckks", 19.0, 30.0))]
    lines = verdicts(old + new)
    assert len(lines) == 1 and "(pair j): 1.90× plain" in lines[0] and "**met**" in lines[0]
    worse = [{**new[0]}, {**new[1], "test_acc": 0.825}]  # 0.5 points below plain
    assert "**not met**" in verdicts(worse)[0]
    big = [{**r, "dataset": "PubMed", "clients": 20} for r in new]
    big[1]["peak_tree_rss_gib"] = 8.0  # 8.6 GB with the workers: above 8 GB
    assert "**not met**" in verdicts(big)[0] and "peak 8.6 GB" in verdicts(big)[0]
