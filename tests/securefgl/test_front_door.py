"""``import securefgl`` gives a user what the README shows."""

import securefgl
from securefgl.config.families import algorithm_names


def test_the_front_door_runs_an_experiment(tmp_path):
    cfg = securefgl.ExperimentConfig(
        csbm={"num_nodes": 300, "num_features": 8}, clients=3, rounds=2, algorithms=["fedavg"]
    )
    result = securefgl.run_experiment(cfg, progress=False)
    folder = securefgl.save_result(result, tmp_path)
    assert (folder / "result.json").exists()
    assert result.summary()[0]["algorithm"] == "fedavg"
    assert {"fedavg", "fedstruct", "fedgcn"} <= set(algorithm_names("node"))
    channel = securefgl.Channel(securefgl.Transcript())
    assert channel.transcript.total_bytes() == 0
    assert callable(securefgl.load_dataset)
