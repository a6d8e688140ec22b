"""result.md and the printed table say what the run's ε rests on: the server's threat
model, where the noise was added, and each claim's sampling and collusion assumptions."""

from __future__ import annotations

from securefgl.config import ExperimentConfig
from securefgl.experiment import run_experiment
from securefgl.experiment.report import markdown_table, text_table


def test_the_tables_name_the_threat_model_and_what_each_claim_assumes() -> None:
    config = ExperimentConfig(
        dataset="csbm", csbm={"num_nodes": 120}, clients=3, rounds=1, algorithms=["fedavg"],
        protocol={"stack": ["secagg+", "clip_noise"], "threat_model": "malicious",
                  "dp_colluding_clients": 1},
    )  # fmt: skip
    result = run_experiment(config, progress=False)
    md, text = markdown_table(result), text_table(result)
    head = md.splitlines()[0]
    assert "protocol secagg+,clip_noise · malicious server, distributed noise" in head
    assert "(malicious server, distributed noise)" in text.splitlines()[0]
    assumes = md.split("What each ε assumes:")[1]
    server = next(line for line in assumes.splitlines() if "vs server" in line)
    assert "at most 1 client(s) collude" in server and "the server chooses the cohort" in server
    assert "q = 1" in server  # no amplification claimed against the server
    channels = md.split("what each algorithm sent, and how:")[1]
    assert "- fedavg: model updates (clients -> server): clip_noise+secagg+" in channels


def test_a_run_without_a_claim_lists_no_assumptions() -> None:
    config = ExperimentConfig(dataset="csbm", csbm={"num_nodes": 120}, clients=3, rounds=1,
                              algorithms=["fedavg"])  # fmt: skip
    md = markdown_table(run_experiment(config, progress=False))
    assert "honest-but-curious server" in md.splitlines()[0]
    assert "What each ε assumes" not in md


def test_the_central_recommendation_reference_states_its_own_settings() -> None:
    from securefgl.algorithms.recommendation.central import central_settings
    from securefgl.experiment.report import recommendation_markdown

    config = ExperimentConfig(task="recommendation", dataset="FilmTrust",
                              protocol=["secagg"])  # fmt: skip
    row = {"method": "central", "seed": 0, "test_rmse": 1.0, "test_mae": 0.8, "val_rmse": 1.0,
           "rounds": 7, "seconds": 0.1, "dataset": {"dataset": "FilmTrust"},
           "reference_settings": central_settings()}  # fmt: skip
    md = recommendation_markdown(config, [row])
    assert "central: the non-federated reference" in md and "no protocol" in md
    assert "dim 8" in central_settings()
