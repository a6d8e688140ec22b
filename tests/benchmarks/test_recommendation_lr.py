"""Recommendation reproduction: the main table's server lr is chosen on validation RMSE;
which aggregations a run's rows show."""

from benchmarks.reproduce_recommendation.__main__ import select_lr, table_rows


def run(lr: float, seed: int, val: float, test: float, dataset: str = "Epinions") -> dict:
    return {
        "experiment": "table", "dataset": dataset, "method": "fesog", "privacy": "p",
        "backend": "plain", "lr": lr, "seed": seed, "val_rmse": val, "rmse": test, "mae": test,
    }  # fmt: skip


def test_lr_with_lower_mean_validation_rmse_is_kept_whatever_the_test_rmse():
    runs = [
        run(0.1, 0, val=4.4, test=1.0),  # a diverged validation curve
        run(0.1, 1, val=1.7, test=1.0),
        run(0.05, 0, val=1.9, test=9.0),
        run(0.05, 1, val=1.9, test=9.0),
    ]
    out = select_lr(runs)
    kept = {r["lr"] for r in out if r["experiment"] == "table"}
    assert kept == {0.05}
    assert [r["experiment"] for r in out if r["lr"] == 0.1] == ["lr-selection"] * 2


def test_selection_compares_common_seeds_only_and_is_per_dataset():
    runs = [
        run(0.1, 0, val=1.5, test=1.5),
        run(0.1, 1, val=1.5, test=1.5),
        run(0.05, 0, val=1.6, test=1.6),  # seed 1 at 0.05 not run yet
        run(0.1, 0, val=2.0, test=2.0, dataset="Ciao"),  # one lr only: kept
    ]
    out = select_lr(runs)
    assert [(r["dataset"], r["lr"]) for r in out if r["experiment"] == "table"] == [
        ("Epinions", 0.1), ("Epinions", 0.1), ("Ciao", 0.1),
    ]  # fmt: skip


def test_each_privacy_variant_chooses_its_own_lr():
    """FeSoG's secure variants share method and backend; each is selected on its own runs."""
    runs = [run(0.1, 0, val=1.5, test=1.5), run(0.05, 0, val=1.6, test=1.6)]
    runs += [{**r, "privacy": "q", "val_rmse": 3.2 - r["val_rmse"]} for r in runs]
    out = select_lr(runs)
    kept = sorted((r["privacy"], r["lr"]) for r in out if r["experiment"] == "table")
    assert kept == [("p", 0.1), ("q", 0.05)]


def test_table_rows_replace_stale_summaries_when_the_choice_changes():
    stale = {"experiment": "table", "dataset": "Epinions", "method": "fesog", "lr": 0.1}
    sweep = {"experiment": "sweep_ldp", "dataset": "FilmTrust", "method": "fesog"}
    runs = [run(0.1, 0, val=3.0, test=3.0), run(0.05, 0, val=2.0, test=2.0)]
    rows = table_rows([stale, sweep], runs)
    assert sweep in rows and stale not in rows
    table = [r for r in rows if r["experiment"] == "table"]
    assert [(r["lr"], r["seeds"]) for r in table] == [(0.05, 1)]


def test_runs_recorded_by_separate_processes_are_merged_not_overwritten(tmp_path, monkeypatch):
    from benchmarks.reproduce_recommendation import __main__ as rr

    monkeypatch.setattr(rr, "RUNS", tmp_path / "runs.json")
    monkeypatch.setattr(rr, "JSON", tmp_path / "rows.json")
    rr.record_runs([run(0.1, 0, val=2.0, test=2.0)])  # one grid process
    rr.record_runs([run(0.1, 1, val=2.2, test=2.4)])  # another, started before the first wrote
    assert {r["seed"] for r in rr.read_json(rr.RUNS)} == {0, 1}
    (row,) = rr.read_json(rr.JSON)
    assert (row["seeds"], row["rmse"]) == (2, 2.2)


def test_a_run_stopped_by_a_lower_round_cap_is_run_on_and_replaced(tmp_path, monkeypatch):
    from benchmarks.reproduce_recommendation import __main__ as rr

    monkeypatch.setattr(rr, "RUNS", tmp_path / "runs.json")
    monkeypatch.setattr(rr, "JSON", tmp_path / "rows.json")
    capped = {**run(0.3, 0, val=2.4, test=2.4), "run": "fedgnn", "rounds": 20000,
              "stopped_by_round_cap": True}  # fmt: skip
    patience = {**run(0.3, 1, val=2.0, test=2.0), "run": "fedgnn", "rounds": 9000,
                "stopped_by_round_cap": False}  # fmt: skip
    rr.record_runs([capped, patience])
    key = ("table", "Epinions", "fedgnn")
    assert rr.done_runs(20000) == {(*key, 0), (*key, 1)}
    assert rr.done_runs(200_000) == {(*key, 1)}  # the capped run goes on
    rr.record_runs([{**capped, "rounds": 61000, "stopped_by_round_cap": False, "rmse": 2.1}])
    runs = rr.read_json(rr.RUNS)
    assert len(runs) == 2 and {r["rounds"] for r in runs} == {61000, 9000}


def test_fesogs_secure_row_is_a_run_of_its_own_and_fedgnns_repeats_its_plain_run():
    from benchmarks.reproduce_recommendation.__main__ import shown_as
    from securefgl.algorithms.recommendation.settings import aggregating
    from securefgl.algorithms.recommendation.trainer import RecConfig

    fesog_plain = RecConfig(method="fesog")
    fesog_secure = RecConfig(method="fesog", **aggregating("ideal"))
    assert shown_as(fesog_plain, "table") == ("plain",)  # uniform averages: another run
    assert shown_as(fesog_secure, "table") == ("ideal",)
    assert shown_as(RecConfig(method="fedgnn"), "table") == ("plain", "ideal")
    assert shown_as(RecConfig(method="fedgnn"), "ablation") == ("plain",)
