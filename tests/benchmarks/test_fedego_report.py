"""FedEgo's report keeps the authors'-split runs apart from ours of the same budget."""

import json

import benchmarks.reproduce_survey_node.fedego_report as fedego_report
from benchmarks.reproduce_survey_node.report import fedego_rows


def _cell(part: str, local: float) -> dict:
    run = {"seed": 1027, "rounds": 100, "hidden": 512, "privacy": {},
           "f1_local_val_selected": local, "f1_global_val_selected": 0.7,
           "f1_local_last": local, "f1_global_last": 0.7, "f1_local_max": local,
           "f1_global_max": 0.7}  # fmt: skip
    return {"part": part, "method": "fedego", "dataset": "CiteSeer", "clients": 5,
            "protection": "plain", "runs": [run]}  # fmt: skip


def test_authors_split_is_a_cell_of_its_own(tmp_path, monkeypatch):
    cells = [_cell("fedego-r100", 0.89), _cell("fedego-r100-authors-split", 0.90)]
    (tmp_path / "fedego_runs.json").write_text(json.dumps(cells))
    monkeypatch.setattr(fedego_report, "RESULTS", tmp_path)
    local = {r["variant"]: r["mean"] for r in fedego_rows() if r["metric"] == "f1_local"}
    assert local == {None: 0.89, "authors-split": 0.90}
