"""``best-round`` reruns Table II's cells unchanged but evaluated along the way, and reads
the round of the best validation accuracy, never the test accuracy, to pick it."""

from benchmarks.reproduce_spreadfgl.grid import (
    EVAL_EVERY,
    Cell,
    make_config,
    plan,
    round_accuracies,
)
from benchmarks.reproduce_spreadfgl.report import round_table, targets


def test_best_round_cells_are_table2_s_evaluated_every_few_rounds():
    cells = plan(["best-round"], ["Cora"], [6], ["localfgl", "fedgl", "spreadfgl", "fedsage+"])
    assert {c.method for c in cells} == {"fedgl", "spreadfgl"}
    for meth in ("fedavg-fusion", "fedgl", "spreadfgl"):
        t2 = make_config(Cell("table2", "CiteSeer", 9, meth), 3703)
        br = make_config(Cell("best-round", "CiteSeer", 9, meth), 3703)
        assert t2.eval_every == t2.rounds and br.eval_every == EVAL_EVERY < br.rounds
        assert br.replace(eval_every=t2.eval_every, name=t2.name) == t2


def test_the_round_is_picked_on_validation_and_the_first_of_equals_kept():
    history = [{"round": 4, "val_acc": 0.6, "test_acc": 0.9},
               {"round": 9, "val_acc": 0.8, "test_acc": 0.7},
               {"round": 10, "loss": 0.1},  # a round without evaluation
               {"round": 14, "val_acc": 0.8, "test_acc": 0.75},
               {"round": 19, "val_acc": 0.7, "test_acc": 0.72}]  # fmt: skip
    assert round_accuracies(history) == {"val_round": 10, "val_round_acc": 70.0,
                                         "best_round_acc": 90.0}  # fmt: skip
    assert round_accuracies(history[-1:]) == {}  # evaluated only at the end: nothing to add


def _row(method, acc, val_round_acc, best, paper=80.0):
    runs = [{"seed": 0, "acc": acc, "val_round_acc": val_round_acc, "best_round_acc": best}]
    return {"setting": "best-round", "dataset": "Cora", "clients": 6, "edge_servers": 1,
            "method": method, "protection": "none", "runs": runs, "acc": acc, "std": 0.0,
            "val_round_acc": val_round_acc, "best_round_acc": best, "seeds": 1,
            "paper_acc": paper}  # fmt: skip


def test_targets_read_the_round_they_are_asked_for():
    rows = [_row("fedavg-fusion", 70.0, 79.0, 85.0), _row("fedgl", 75.0, 81.0, 83.0),
            _row("spreadfgl", 72.0, 78.0, 86.0)]  # fmt: skip
    at_val = "\n".join(targets(rows, setting="best-round", key="val_round_acc", survey=False))
    best = "\n".join(targets(rows, setting="best-round", key="best_round_acc", survey=False))
    last = "\n".join(targets(rows, setting="best-round", survey=False))
    assert "FedAvg-fusion -1.00 ✓ · FedGL +1.00 ✓ · SpreadFGL − FedAvg-fusion -1.00 ✗" in at_val
    assert "FedAvg-fusion +5.00 ✗ · FedGL +3.00 ✗ · SpreadFGL − FedAvg-fusion +1.00 ✓" in best
    assert "FedAvg-fusion -10.00 ✗" in last and "survey" not in last
    assert "| FedGL | 75.00 / 81.00 / 83.00 (80.00) [1 seed] |" in "\n".join(round_table(rows))
