"""GPFL's reproduction: a method on the authors' own splits runs with the code's split
streams and seeds, and its report row sits beside the same method on our splits."""

import os

import numpy as np
import pytest

from benchmarks.reproduce_gpfl.grid import AUTHORS_SEEDS, Cell, cell_seeds, make_config
from benchmarks.reproduce_gpfl.report import authors_split, variants


def test_authors_split_cells_take_the_codes_streams_and_seeds():
    cell = Cell("PROTEINS", 20, 1.0, "self-train[authors-split]")
    cfg, algo = make_config(cell, rounds=3)
    assert algo == "self-train" and cfg.graph.split_stream == "authors"
    assert cell_seeds(cell, 5) == list(AUTHORS_SEEDS) and cell_seeds(cell, 2) == [0, 10]
    plain = Cell("PROTEINS", 20, 1.0, "self-train")
    assert make_config(plain, 3)[0].graph.split_stream == "ours"
    assert cell_seeds(plain, 3) == [0, 1, 2]
    cfg, algo = make_config(Cell("NCI1", 15, 0.5, "gpfl[authors-split]"), rounds=3)
    assert algo == "gpfl" and cfg.graph.split_stream == "authors"


def _row(method, mean):
    return {"dataset": "PROTEINS", "clients": 20, "alpha": 1.0, "method": method,
            "protection": "plain", "mean": mean, "std": 1.0, "seeds": 5,
            "paper_mean": 71.98, "final_mean": mean - 1.52, "runs": []}  # fmt: skip


def test_the_report_sets_both_splits_side_by_side_and_keeps_variants_apart():
    rows = [_row("self-train", 77.0), _row("self-train[authors-split]", 72.5),
            _row("gpfl[paper-gamma]", 70.0), _row("gpfl[authors-split]", 75.0)]  # fmt: skip
    table = "\n".join(authors_split(rows))
    assert "| PROTEINS k=20 α=1 | self-train | 77.00 ± 1.00 | 72.50 ± 1.00 (5 seeds) | " \
           "71.98 | +0.52 | 70.98 | -1.00 |" in table  # fmt: skip
    assert "| gpfl | – | 75.00" in table
    shown = "\n".join(variants(rows))
    assert "paper-gamma" in shown and "authors-split" not in shown


def test_other_test_folds_of_the_codes_splits_and_their_five_fold_mean():
    from benchmarks.reproduce_gpfl.grid import authors_tag

    assert authors_tag("self-train[authors-fold3]") == ("self-train", 3)
    assert authors_tag("gpfl[paper-gamma]") == ("gpfl[paper-gamma]", None)
    cfg, algo = make_config(Cell("PROTEINS", 20, 1.0, "self-train[authors-fold2]"), rounds=3)
    assert (algo, cfg.graph.split_stream, cfg.graph.test_fold) == ("self-train", "authors", 2)
    assert cell_seeds(Cell("PROTEINS", 20, 1.0, "gpfl[authors-fold4]"), 5) == list(AUTHORS_SEEDS)
    rows = [_row("self-train[authors-split]", 70.0)]
    rows += [_row(f"self-train[authors-fold{k}]", 70.0 + k) for k in range(1, 4)]
    assert "mean of folds" not in "\n".join(authors_split(rows))  # fold 4 missing
    rows.append(_row("self-train[authors-fold4]", 74.0))
    table = "\n".join(authors_split(rows))
    assert "| self-train, test fold 2 | – | 72.00 ± 1.00 (5 seeds) |" in table
    assert "| self-train, mean of folds 0–4 | – | 72.00 (5 folds) | 71.98 | +0.02 |" in table


def test_the_logged_runs_cell_fixes_its_split_and_evaluates_every_round():
    cfg, algo = make_config(Cell("NCI1", 25, 1.0, "gpfl[authors-log]"), rounds=3)
    g = cfg.graph
    assert algo == "gpfl" and cfg.eval_every == 1
    assert (g.split_stream, g.prior_cap, g.split_seed, g.test_fold) == ("authors", 1.0, 0, 0)
    assert cell_seeds(Cell("NCI1", 25, 1.0, "gpfl[authors-log]"), 3) == [0, 1, 2]
    with pytest.raises(ValueError, match="logged run"):
        make_config(Cell("NCI1", 20, 1.0, "self-train[authors-log]"), rounds=3)


@pytest.mark.skipif(not os.environ.get("SECUREFGL_DATA"), reason="SECUREFGL_DATA is not set")
def test_the_logged_runs_cell_draws_the_split_the_log_prints_whatever_the_training_seed():
    from benchmarks.reproduce_gpfl.code_log import code_log
    from securefgl.experiment.graph_world import draw_graph_world, load_graph_data

    cfg, _ = make_config(Cell("NCI1", 25, 1.0, "self-train[authors-log]"), rounds=3)
    data = load_graph_data(cfg)
    for seed in (0, 7):
        views = draw_graph_world(cfg, seed, data)[2]
        counts = [np.bincount(np.asarray(v.y), minlength=2).tolist() for v in views]
        assert counts == code_log()["client_label_counts"]


def test_the_log_table_reads_the_log_against_our_seeds_round_by_round():
    from benchmarks.reproduce_gpfl.code_log import log_table, mean_curve

    runs = [{"seed": s, "best_last": 70.0 + 2 * s, "final": 69.0,
             "curve": [[r, 60.0 + s] for r in range(1, 201)]} for s in range(2)]  # fmt: skip
    row = {"dataset": "NCI1", "clients": 25, "alpha": 1.0, "method": "fedstar[authors-log]",
           "protection": "plain", "mean": 71.0, "std": 1.0, "seeds": 2, "final_mean": 69.0,
           "runs": runs}  # fmt: skip
    assert mean_curve(row)[5] == 60.5
    (line,) = log_table([row])[2:]
    # the log's FedStar: 70.06 best of last 10, 69.21 last; two evaluations per round
    assert line.startswith("| fedstar | 70.06 | 71.00 ± 1.00 [70.00, 72.00] (2 seeds) | -0.94 | "
                           "69.21 | 69.00 |")  # fmt: skip
    assert line.endswith("| 70.57 |")  # the paper's FedStar at NCI1 k=25 α=1


def test_the_codes_seed0_split_is_fixed_in_any_cell_and_sits_beside_the_other_splits():
    from benchmarks.reproduce_gpfl.code_log import seed0_table

    cell = Cell("PROTEINS", 20, 1.0, "self-train[authors-seed0]")
    cfg, algo = make_config(cell, rounds=3)
    assert algo == "self-train" and cell_seeds(cell, 3) == [0, 1, 2]
    g = cfg.graph
    assert (g.split_stream, g.split_seed, g.prior_cap, g.test_fold) == ("authors", 0, 0.95, 0)
    rows = [_row("self-train", 77.0), _row("self-train[authors-seed0]", 73.0)]
    (line,) = seed0_table(rows)[2:]
    assert line == ("| PROTEINS k=20 α=1 | self-train | 77.00 ± 1.00 (+5.02) | – | "
                    "73.00 ± 1.00 (+1.02) | 71.98 ± 2.50 |")  # fmt: skip
