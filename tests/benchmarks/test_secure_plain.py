"""The secure = plain report: one section per algorithm, dataset, K and rounds; reruns
replace."""

from __future__ import annotations

from typing import Any

from benchmarks.secure_plain import markdown, merge


def _row(dataset: str, protocol: str, acc: float, rounds: int = 100) -> dict[str, Any]:
    return {
        "algorithm": "fedavg", "dataset": dataset, "clients": 10, "rounds": rounds,
        "seeds": [0], "protocol": protocol, "ring": "float32", "test_acc": [acc],
        "test_acc_mean": acc, "test_acc_std": 0.0, "aggregate_max_abs_error": None,
        "bytes": 1e6, "bytes_by_family": {}, "seconds": 1.0,
    }  # fmt: skip


def test_rerun_replaces_its_group_only() -> None:
    old = [_row("Cora", "plain", 80.0), _row("Cora", "secagg", 79.0)]
    computers = [_row("Computers", "plain", 70.0), _row("Computers", "secagg", 70.1)]
    rows = merge(old, computers)
    assert rows == old + computers
    rerun = [_row("Cora", "plain", 81.0), _row("Cora", "secagg", 81.0)]
    assert merge(rows, rerun) == computers + rerun


def test_each_group_has_its_verdict() -> None:
    rows = [_row("Cora", "plain", 80.0), _row("Cora", "secagg", 79.0),
            _row("Computers", "plain", 70.0), _row("Computers", "secagg", 70.1)]  # fmt: skip
    text = markdown(rows)
    assert "## fedavg on Cora, K = 10" in text and "## fedavg on Computers, K = 10" in text
    cora, computers = text.split("## fedavg on Computers")
    assert "Largest gap to plain 1.00 points (target ≤ 0.3: NOT met)" in cora
    assert "Largest gap to plain 0.10 points (target ≤ 0.3: met)" in computers
    rows[2]["note"] = "Why it differs."
    cora, computers = markdown(rows).split("## fedavg on Computers")
    assert "Why it differs." in computers and "Why it differs." not in cora


def test_a_longer_run_sits_beside_the_shorter_one() -> None:
    short = [_row("Computers", "plain", 63.0, 30), _row("Computers", "secagg", 49.5, 30)]
    long = [_row("Computers", "plain", 69.0, 100), _row("Computers", "secagg", 64.9, 100)]
    rows = merge(short, long)
    assert rows == short + long
    text = markdown(rows)
    assert "K = 10, 30 rounds" in text and "K = 10, 100 rounds" in text


def test_added_rows_join_their_group_and_a_control_is_not_a_transport() -> None:
    rows = [{**_row("Computers", "plain", 69.0), "name": "plain"},
            {**_row("Computers", "secagg", 64.9), "name": "secagg32"},
            {**_row("Cora", "plain", 80.0), "name": "cora-plain"}]  # fmt: skip
    control = {**_row("Computers", "plain", 66.0), "name": "plain64", "ring": "float64 (control)"}
    rerun = {**_row("Computers", "plain", 69.0), "name": "plain", "note": "again"}
    short = {**_row("Computers", "plain", 63.0, 30), "name": "plain"}  # same name, 30 rounds
    added = merge([short, *rows], [rerun, control], add=True)
    assert [r["name"] for r in added] == ["plain", "cora-plain", "plain", "secagg32", "plain64"]
    assert added[0] is short
    assert added[2]["note"] == "again"
    text = markdown(added)
    cora, computers = text.split("## fedavg on Cora")[1].split(
        "## fedavg on Computers, K = 10, 100"
    )
    control_line = (
        "Control (plain, float64 on the wire, no transport): -3.00 points, per seed -3.00."
    )
    assert "Largest gap to plain 4.10 points (target ≤ 0.3: NOT met)." in computers
    assert control_line in computers and "No secure transport in this group." in cora
