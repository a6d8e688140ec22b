"""A sweep trains each cell once, attacks it, survives a kill and draws its frontier."""

from __future__ import annotations

import json
import logging

import pytest

from attacks.sweep import save_frontier
from attacks.sweep.engine import CELLS, done_cells, run_sweep
from attacks.sweep.grid import SweepConfig, cells
from securefgl.config import ConfigError, ExperimentConfig

BASE = ExperimentConfig(
    csbm={"num_nodes": 240, "num_features": 8}, clients=3, rounds=3,
    protocol={"seeded_noise": True},  # reproducible noise, so that rows can be compared
)  # fmt: skip


def _sweep(**kw: object) -> SweepConfig:
    settings = dict(base=BASE, algorithms=["fedavg"], seeds=[0, 1],
                    protections=["plain", "secagg,clip_noise", "edgerand"], epsilons=[1.0, 8.0],
                    attacks=["link_stealing"])  # fmt: skip
    return SweepConfig(**{**settings, **kw})  # type: ignore[arg-type]


def _comparable(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def test_a_killed_sweep_resumes_to_the_same_rows(tmp_path) -> None:
    sweep = _sweep()
    whole = run_sweep(sweep, tmp_path / "whole", progress=False)
    assert len(whole) == len(cells(sweep)) == 10  # plain 2 seeds + 2 × 2 levels × 2 seeds

    def die(index: int, record: dict) -> None:
        if index == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, tmp_path / "killed", progress=False, on_cell=die)
    assert len(done_cells(tmp_path / "killed")) == 4
    with (tmp_path / "killed" / CELLS).open("a") as fh:
        fh.write('{"cell": "fedavg|edgerand|eps')  # the kill came mid-line
    resumed = run_sweep(sweep, tmp_path / "killed", progress=False)
    assert _comparable(resumed) == _comparable(whole)
    assert len((tmp_path / "killed" / CELLS).read_text().splitlines()) == 10


def test_each_cell_reports_its_epsilon_in_its_unit(tmp_path) -> None:
    records = run_sweep(_sweep(seeds=[0]), tmp_path, progress=False)
    by = {(r["protection"], r["level"]): r for r in records}
    assert by[("plain", None)]["epsilon"] is None and by[("plain", None)]["unit"] is None
    dp = by[("secagg,clip_noise", 1.0)]
    assert dp["unit"] == "client-level" and dp["epsilon"] == pytest.approx(1.0, rel=1e-3)
    assert dp["dp_noise"] > by[("secagg,clip_noise", 8.0)]["dp_noise"]
    assert dp["adversary_of_epsilon"] == "server"  # the headline claim of distributed noise
    edge = by[("edgerand", 8.0)]
    assert edge["unit"] == "edge-level" and edge["epsilon"] == 8.0
    assert edge["adversary_of_epsilon"] == "everyone" and "internal edges" in edge["epsilon_covers"]
    assert "clip_noise" in dp["epsilon_covers"]  # what each ε covers travels with it
    assert all(r["attacks"][0]["value"] is not None for r in records)


def test_the_frontier_averages_seeds_and_draws_its_figures(tmp_path) -> None:
    records = run_sweep(_sweep(), tmp_path, progress=False)
    out = save_frontier(records, tmp_path, "frontier")
    rows = json.loads(out["json"].read_text())
    keys = {"algorithm", "protection", "epsilon", "seeds", "utility", "utility_std", "attack",
            "attack_value", "attack_baseline"}  # fmt: skip
    assert all(keys <= set(r) for r in rows) and len(rows) == 5
    plain = next(r for r in rows if r["protection"] == "plain")
    assert plain["epsilon"] is None and plain["seeds"] == [0, 1]
    utilities = [r["utility"] for r in records if r["protection"] == "plain"]
    assert plain["utility"] == pytest.approx(sum(utilities) / 2)
    for name in ("frontier_utility", "frontier_attacks", "frontier_tradeoff"):
        assert out[name].stat().st_size > 10_000
    assert "∞ (no DP)" in out["md"].read_text()
    dp = next(r for r in rows if r["protection"] == "secagg,clip_noise")
    assert dp["epsilon_unit"] == "client-level, vs server"  # never one scale for two adversaries
    assert "(client-level, vs server)" in out["md"].read_text()


def test_a_garbled_record_is_redone_and_a_short_write_is_finished(tmp_path, monkeypatch,
                                                                 caplog) -> None:
    from attacks.sweep import engine

    real_write = engine.os.write
    monkeypatch.setattr(engine.os, "write", lambda fd, data: real_write(fd, bytes(data[:7])))
    for cell in ("a", "b"):
        engine._append(tmp_path / CELLS, {"cell": cell, "value": 0.5})
    monkeypatch.undo()
    lines = (tmp_path / CELLS).read_text().splitlines()
    assert [json.loads(line)["cell"] for line in lines] == ["a", "b"]
    (tmp_path / CELLS).write_text(f"{lines[0]}\n{{\"cell\": \"b\", \"va\n{lines[1]}\n")
    with caplog.at_level(logging.WARNING):
        assert sorted(done_cells(tmp_path)) == ["a", "b"]
    assert "line 2 is not a whole cell record" in caplog.text


def test_cells_of_another_code_version_are_named_on_resume(tmp_path, caplog) -> None:
    plain = _sweep(seeds=[0], protections=["plain"], epsilons=[])
    (record,) = run_sweep(plain, tmp_path, progress=False)
    assert "code" in record  # the checkout's commit (None outside a git checkout)
    lines = (tmp_path / CELLS).read_text().splitlines()
    old = {**json.loads(lines[0]), "code": {"commit": "0000000", "dirty": False}}
    (tmp_path / CELLS).write_text(json.dumps(old) + "\n")
    with caplog.at_level(logging.WARNING):
        run_sweep(plain, tmp_path, progress=False)
    assert "reused cells ran at code" in caplog.text and "0000000" in caplog.text


def test_an_unreadable_grid_file_is_named(tmp_path) -> None:
    plain = _sweep(seeds=[0], protections=["plain"], epsilons=[])
    run_sweep(plain, tmp_path, progress=False)
    (tmp_path / "sweep.json").write_text('{"fingerprint": "ab')
    with pytest.raises(ValueError, match="sweep.json is not readable JSON.*the 1 cells"):
        run_sweep(plain, tmp_path, progress=False)


def test_levels_that_round_alike_keep_their_own_cells() -> None:
    sweep = _sweep(protections=["secagg,clip_noise"], epsilons=[], noise=[1.0, 1.0000004],
                   seeds=[0])  # fmt: skip
    assert [c.key.split("|")[2] for c in cells(sweep)] == ["noise=1", "noise=1.0000004"]


def test_a_grown_grid_reuses_its_cells_and_another_context_is_refused(tmp_path) -> None:
    plain = {"protections": ["plain"], "epsilons": []}
    run_sweep(_sweep(seeds=[0], **plain), tmp_path, progress=False)
    first = (tmp_path / CELLS).read_text()
    # another seed, other threads and a reordered list: the finished cell is reused
    grown = _sweep(seeds=[1, 0], base=BASE.replace(threads=2, algorithms=["fedavg", "local"]),
                   **plain)  # fmt: skip
    assert [r["seed"] for r in run_sweep(grown, tmp_path, progress=False)] == [1, 0]
    assert (tmp_path / CELLS).read_text().startswith(first)
    assert len((tmp_path / CELLS).read_text().splitlines()) == 2
    (tmp_path / "frontier.md").write_text("an earlier grid's report")
    other = _sweep(seeds=[1], base=BASE.replace(rounds=4), **plain)
    with pytest.raises(ValueError, match=r"2 cells run with other settings \(base.rounds: 3 -> 4"):
        run_sweep(other, tmp_path, progress=False)
    again = run_sweep(other, tmp_path, progress=False, restart=True)
    assert [r["seed"] for r in again] == [1] and not (tmp_path / "frontier.md").exists()


def test_progress_lines_when_not_a_terminal(tmp_path, caplog) -> None:
    """One line per cell on the progress logger (stderr under the CLI, not the report's
    stdout), its ε with its adversary and, under seeded noise, the void."""
    with caplog.at_level(logging.INFO, logger="securefgl.progress"):
        run_sweep(_sweep(seeds=[0], protections=["plain", "secagg,clip_noise"], epsilons=[1.0]),
                  tmp_path, progress=True)  # fmt: skip
    assert "[1/2] fedavg · plain · seed 0: ε=∞, accuracy" in caplog.text
    assert "ε=1 (client-level, vs server, seeded noise: NOT PRIVATE)" in caplog.text


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"protections": ["secagg,clip_noise"], "epsilons": []}, "needs epsilons"),
        ({"noise": [1.0]}, "not both"),
        ({"attacks": ["link_steal"]}, "did you mean"),
        ({"protections": ["edgerand:2"]}, "epsilons give edge DP"),
        ({"seeds": [0, 0]}, "seeds repeat"),
        ({"epsilons": [4.0, 4.0]}, "epsilons repeat"),
        ({"protections": ["plain", "secagg"]}, "no protection uses epsilons"),
        ({"ldp_epsilons": [2.0]}, "no protection uses ldp_epsilons"),
        ({"base": BASE.replace(protocol=["ckks"])}, "protocol stack 'ckks' would be ignored"),
        ({"epsilons": [1.0, float("inf")]}, "finite and > 0"),
        ({"protections": ["secagg,ckks"]}, "at most one transport"),
        ({"protections": ["plian"]}, "did you mean 'plain'"),
        ({"algorithms": ["central"], "protections": ["secagg,clip_noise"]}, "no cell to run"),
        ({"algorithms": ["local"], "protections": ["secagg"], "epsilons": [], "attacks": []},
         "no cell"),
        ({"attacks": ["hop2vec_leakage"]}, "none of the attacks"),
        # link_stealing reads node-task runs: graph-task FedAvg is not its target
        ({"base": ExperimentConfig(task="graph", dataset="MUTAG")}, "none of the attacks"),
    ],
)
def test_grid_refusals(kw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _sweep(**kw)


def test_a_laplace_cell_has_no_sigma(tmp_path) -> None:
    sweep = _sweep(seeds=[0], protections=["ldp_laplace"], epsilons=[], ldp_epsilons=[2.0])
    (record,) = run_sweep(sweep, tmp_path, progress=False)
    assert record["level_kind"] == "ldp_epsilon" and record["dp_noise"] is None


def test_a_second_sweep_in_a_running_sweeps_folder_is_refused(tmp_path) -> None:
    import fcntl

    with open(tmp_path / ".lock", "a") as held:  # the first sweep, still running
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(ValueError, match="another sweep is running"):
            run_sweep(_sweep(seeds=[0], protections=["plain"], epsilons=[]), tmp_path,
                      progress=False)  # fmt: skip
