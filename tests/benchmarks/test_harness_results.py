"""Grid result files shared by concurrent processes: nothing saved by one is lost; shards
name a part of the plan."""

import argparse

import pytest

from benchmarks.harness.results import csv_list, parse_shard, read_json, save_seed_rows


def _key(row):
    return row["cell"]


def _summarise(row):
    row["seeds"] = len(row["runs"])


def test_concurrent_grids_unite_runs_per_cell_and_seed(tmp_path):
    path = tmp_path / "grid.json"
    first = [{"cell": "a", "runs": [{"seed": 0, "acc": 1.0, "finished": 1.0}], "seeds": 1}]
    save_seed_rows(path, first, _key, _summarise)
    # a second process re-measured seed 0 after the first: its run is the newer one
    second = [{"cell": "a", "runs": [{"seed": 0, "acc": 2.0, "finished": 2.0},
                                     {"seed": 1, "acc": 3.0, "finished": 2.5}]},
              {"cell": "b", "runs": [{"seed": 0, "acc": 4.0}]}]  # fmt: skip
    save_seed_rows(path, second, _key, _summarise)
    third = [{"cell": "a", "runs": [{"seed": 2, "acc": 5.0, "finished": 3.0}]}]
    save_seed_rows(path, third, _key, _summarise)
    rows = {r["cell"]: r for r in read_json(path)}
    assert [(r["seed"], r["acc"]) for r in rows["a"]["runs"]] == [(0, 2.0), (1, 3.0), (2, 5.0)]
    assert rows["a"]["seeds"] == 3 and rows["b"]["runs"] == [{"seed": 0, "acc": 4.0}]
    assert not list(tmp_path.glob("*.tmp"))


def test_a_stale_copy_never_overwrites_a_run_measured_since(tmp_path):
    """A long grid loaded the file before another process re-measured a seed: when the
    long grid saves, the re-measured run stays (the long grid's copy is older)."""
    path = tmp_path / "grid.json"
    old = {"seed": 0, "acc": 1.0}  # measured before runs were stamped
    save_seed_rows(path, [{"cell": "a", "runs": [old]}], _key, _summarise)
    stale = [{"cell": "a", "runs": [dict(old)]}, {"cell": "b", "runs": []}]  # loaded early
    new = {"seed": 0, "acc": 7.0, "finished": 5.0}
    save_seed_rows(path, [{"cell": "a", "runs": [new]}], _key, _summarise)
    stale[1]["runs"] = [{"seed": 0, "acc": 9.0, "finished": 6.0}]  # what it measured
    save_seed_rows(path, stale, _key, _summarise)
    rows = {r["cell"]: r for r in read_json(path)}
    assert rows["a"]["runs"] == [new] and rows["b"]["runs"][0]["acc"] == 9.0
    assert stale[0]["runs"] == [new]  # the stale process now holds the newer run too


def test_csv_list():
    assert csv_list(" a, b,,c ") == ["a", "b", "c"] and csv_list("") == []


def test_round_bytes_adds_every_direction_of_every_round() -> None:
    from benchmarks.harness.results import round_bytes

    history = [{"bytes_up": 1, "bytes_down": 2, "bytes_p2p": 3},
               {"bytes_up": 10, "bytes_down": 20, "bytes_p2p": 0}]  # fmt: skip
    assert round_bytes(history) == 36
    assert round_bytes([]) == 0


def test_shards_count_from_zero() -> None:
    assert parse_shard("0/1") == (0, 1) and parse_shard("1/2") == (1, 2)
    for text in ("2/2", "-1/2", "0/0", "1", "a/b"):
        with pytest.raises(argparse.ArgumentTypeError, match="--shard"):
            parse_shard(text)
