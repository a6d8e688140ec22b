"""The Ray executor on a two-node cluster (``ray.cluster_utils.Cluster``, both nodes on this
machine): workers spread over the nodes, and the local executor's result."""

import pytest

from securefgl.algorithms.registry import check_config
from securefgl.config import ExperimentConfig
from securefgl.experiment.runner import load_graph, run_single
from securefgl.federation import Transcript

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

import securefgl.federation.ray_executor as ray_executor  # noqa: E402

SMALL = {"num_nodes": 300, "num_features": 8, "feature_signal": 0.3, "homophily": 0.8}


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        ray.shutdown()
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    nodes.add_node(num_cpus=1)
    nodes.wait_for_nodes()  # both nodes registered before any worker is placed
    yield nodes
    ray.shutdown()
    nodes.shutdown()


def test_workers_spread_over_two_nodes_and_give_the_local_result(cluster, monkeypatch):
    cfg = check_config(ExperimentConfig(
        csbm=SMALL, clients=4, partition="random", rounds=4, eval_every=2, hidden=8,
        protocol=["secagg"], workers=2, ray_address=cluster.address,
    ))  # fmt: skip
    data = load_graph(cfg)
    nodes: list[str] = []
    shutdown = ray_executor.RayExecutor.shutdown

    def record_nodes(self):
        nodes.extend(node for node, _ in ray.get([w.where.remote() for w in self.workers]))
        shutdown(self)

    monkeypatch.setattr(ray_executor.RayExecutor, "shutdown", record_nodes)
    results = {}
    for executor in ("local", "ray"):
        transcript = Transcript()
        result = run_single(cfg.replace(executor=executor), "fedavg", 0, data, False,
                            transcript=transcript)  # fmt: skip
        results[executor] = (result.final, [(e.sender, e.receiver, e.nbytes)
                                            for e in transcript.entries])  # fmt: skip
    assert results["ray"] == results["local"]
    assert len(set(nodes)) == 2  # one worker on each node


def test_the_recommendation_path_on_two_nodes_gives_the_local_result(cluster):
    from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
    from securefgl.data.rating_views import ClientViews
    from securefgl.data.ratings import synthetic_ratings

    views = ClientViews.from_data(synthetic_ratings(n_users=60, n_items=40, per_user=8))
    out = {}
    for executor in ("local", "ray"):
        cfg = RecConfig(
            rounds=4, eval_every=2, users_per_round=30, pseudo_items=3, seeded_noise=True,
            executor=executor, ray_address=cluster.address,
        )  # fmt: skip
        with FedRecTrainer(views, cfg) as tr:
            res = tr.run()
            out[executor] = (res.test_rmse, [(e.sender, e.receiver, e.nbytes)
                                             for e in tr.channel.transcript.entries])  # fmt: skip
    assert out["ray"] == out["local"]
