"""The row-DP report: the clip scale is chosen per z by validation RMSE, never by test."""

from __future__ import annotations

from benchmarks.fesog_row_dp import MEDIAN_NORMS, METHODS, SETTINGS, render, summary
from securefgl.algorithms.recommendation.settings import RowDPConfig
from securefgl.algorithms.recommendation.trainer import RecConfig


def _run(noise: float, clip: float | None, seed: int, val: float, test: float) -> dict:
    return {"dataset": "FilmTrust", "noise": noise, "clip": clip, "seed": seed,
            "val_rmse": val, "test_rmse": test, "rounds": 100,
            "epsilon": None if noise == 0 else 10.0 * seed + 5,
            "max_releases": 50 + seed}  # fmt: skip


def test_the_clip_scale_is_chosen_on_validation_and_the_worst_epsilon_reported() -> None:
    runs = [_run(0.0, None, 0, 2.0, 2.1),
            _run(1.0, 0.2, 0, 3.0, 3.9), _run(1.0, 0.2, 1, 3.2, 3.9),  # best validation
            _run(1.0, 1.0, 0, 3.5, 3.0), _run(1.0, 1.0, 1, 3.5, 3.0),  # best test
            {"dataset": "FilmTrust", "method": "user mean", "seed": 0,
             "test_rmse": 1.7}]  # fmt: skip
    rows = summary(runs)
    assert [r.get("method", "fesog") for r in rows] == ["user mean", "fesog", "fesog"]
    chosen = rows[2]
    assert chosen["clip"] == 0.2 and chosen["test_rmse"] == 3.9 and chosen["epsilon"] == 15.0
    assert chosen["clips_tried"] == [0.2, 1.0]
    text = render(rows)
    # the most active user's 51 rounds charged at SecAgg's share floor, below the cohort
    honest = RowDPConfig(1.0).epsilon(51, 4, 256, 256)
    assert chosen["epsilon_malicious"] > honest
    mal = f"{chosen['epsilon_malicious']:.3g}"
    assert f"| FilmTrust | fesog | 1 | 0.2 (0.2, 1.0) | 15 | {mal} | 3.900 ± 0.000 |" in text
    assert "| FilmTrust | user mean (no model; nothing sent) |" in text


def test_methods_are_summarised_apart() -> None:
    fedgnn = [{**_run(1.0, 0.2, 0, 2.0, 2.5), "algorithm": "fedgnn"}]
    rows = summary([_run(1.0, 0.2, 0, 3.0, 3.9), *fedgnn])
    assert [(r["algorithm"], r["test_rmse"]) for r in rows] == [("fedgnn", 2.5), ("fesog", 3.9)]
    assert rows[0]["epsilon_malicious"] < rows[1]["epsilon_malicious"]  # 3 parts, not 4


def test_every_method_has_valid_settings_and_positive_bounds() -> None:
    for method in METHODS:
        cfg = RecConfig(**SETTINGS[method])  # refuses an unknown or misplaced option
        assert cfg.method in ("fesog", "fedgnn")
        assert len(MEDIAN_NORMS[method]) == 3 and min(MEDIAN_NORMS[method]) > 0


def test_a_variant_is_charged_as_its_method() -> None:
    offset = [{**_run(1.0, 0.2, 0, 2.0, 2.5), "algorithm": "fedgnn-offset"}]
    fedgnn = [{**_run(1.0, 0.2, 0, 2.0, 2.5), "algorithm": "fedgnn"}]
    (a,), (b,) = summary(offset), summary(fedgnn)
    assert a["algorithm"] == "fedgnn-offset" and a["epsilon_malicious"] == b["epsilon_malicious"]
