"""save_result records the folder it wrote and leaves no earlier result's transcripts."""

import json

from securefgl import run_experiment, save_result
from securefgl.config import ExperimentConfig


def test_a_result_saved_elsewhere_records_that_folder_and_replaces_stale_transcripts(tmp_path):
    config = ExperimentConfig(csbm={"num_nodes": 200}, clients=3, rounds=1, name="same",
                              algorithms=["fedavg", "fedprox"], store_payloads=True)  # fmt: skip
    kept = run_experiment(config, progress=False, keep_state=True)
    folder = save_result(kept, tmp_path)
    assert sorted(p.name for p in folder.glob("transcript-*")) == [
        "transcript-fedavg-seed0", "transcript-fedprox-seed0"
    ]  # fmt: skip
    saved = json.loads((folder / "result.json").read_text())
    assert saved["config"]["output_dir"] == str(tmp_path)
    again = run_experiment(config.replace(algorithms=["fedavg"], store_payloads=False),
                           progress=False)  # fmt: skip
    assert save_result(again, tmp_path) == folder
    assert not list(folder.glob("transcript-*"))  # the first result's, gone with it


def test_result_json_is_standard_json_with_infinite_epsilon(tmp_path):
    config = ExperimentConfig(
        csbm={"num_nodes": 200}, clients=3, rounds=1, name="noiseless",
        protocol={"stack": ["secagg", "clip_noise"], "dp_noise": 0.0},
    )  # fmt: skip
    folder = save_result(run_experiment(config, progress=False), tmp_path)

    def refuse(constant):
        raise ValueError(f"not standard JSON: {constant}")

    saved = json.loads((folder / "result.json").read_text(), parse_constant=refuse)
    assert saved["summary"][0]["epsilon"] == "inf"


def test_a_seed_without_final_metrics_is_counted_not_fatal(tmp_path):
    from securefgl.experiment.runner import ExperimentResult, RunResult

    history = [{"round": 0, "loss": 1.0, "seconds": 0.1, "bytes_up": 0, "bytes_down": 0,
                "bytes_p2p": 0}]  # fmt: skip
    refused = [{**history[0], "evaluation_refused": "client-2 silent"}]
    runs = [RunResult("fedavg", 0, True, {"test_acc": 0.8}, history, {}, 0),
            RunResult("fedavg", 1, True, {}, refused, {}, 0)]  # fmt: skip
    result = ExperimentResult(ExperimentConfig(seeds=[0, 1]), runs)
    (row,) = result.summary()
    assert row["test_acc"] == 0.8 and row["test_acc_seeds"] == 1
    folder = save_result(result, tmp_path)
    assert "no metrics in round(s) 0: the secure evaluation could not run (client-2 silent)" in (
        folder / "result.md").read_text()  # fmt: skip


def test_the_default_folder_names_how_clients_got_their_data():
    from types import SimpleNamespace

    from securefgl.experiment.results import default_name

    def name(**kw):
        return default_name(SimpleNamespace(config=ExperimentConfig(**kw))).rsplit("-", 2)[0]

    assert name(dataset="Cora", clients=3, partition="metis") == "cora-metis-K3"
    assert name(task="graph", dataset="MUTAG", clients=3, graph={"dirichlet": 0.5}) == (
        "mutag-dirichlet0.5-K3"
    )
    assert name(task="graph", dataset="motif-basis", clients=5) == "motif-basis-domains-K5"
