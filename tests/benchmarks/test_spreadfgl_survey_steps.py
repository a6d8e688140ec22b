"""The survey cells' local steps are chosen on validation accuracy, never on test."""

from benchmarks.reproduce_spreadfgl.report import survey_kept


def _row(steps, runs):
    return {"setting": "survey", "dataset": "Cora", "clients": 10, "method": "fedsage+",
            "protection": steps, "runs": runs}  # fmt: skip


def _runs(pairs):
    return [{"seed": s, "val_acc": v, "acc": 100 - v} for s, v in pairs]


def test_the_higher_validation_accuracy_is_kept_whatever_the_test_accuracy():
    rows = [_row("none", _runs([(0, 80), (1, 82)])), _row("steps:1", _runs([(0, 81), (1, 83)]))]
    assert survey_kept(rows, "Cora", 10, "fedsage+") == "steps:1"  # its test acc is lower
    rows[1]["runs"] = _runs([(0, 79), (1, 82)])
    assert survey_kept(rows, "Cora", 10, "fedsage+") == "none"


def test_only_common_seeds_count_and_a_tie_keeps_ten_steps():
    rows = [_row("none", _runs([(0, 80), (1, 82)])),
            _row("steps:1", _runs([(0, 80), (1, 82), (2, 99)]))]  # fmt: skip
    assert survey_kept(rows, "Cora", 10, "fedsage+") == "none"


def test_no_choice_until_every_variant_has_validation_runs():
    rows = [_row("none", [{"seed": 0, "acc": 80.0}]), _row("steps:1", _runs([(0, 90)]))]
    assert survey_kept(rows, "Cora", 10, "fedsage+") is None
    assert survey_kept(rows[1:], "Cora", 10, "fedsage+") is None
