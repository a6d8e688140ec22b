"""Privacy noise is secret: nothing a result file or the transcript publishes regenerates it.

Everything published about a run (its configuration and seed in result.json, the message
sizes and senders in the transcript) is the same for two runs of the same configuration.
If any privacy noise were a function of it, the two runs would draw the same noise; each
test runs twice and checks that the noised outputs differ, and that with
``seeded_noise`` (the explicit NOT PRIVATE switch) they are equal and marked not private.
"""

import dataclasses

import numpy as np
import pytest

from securefgl.algorithms.fedstruct.edge_dp import perturb_federation
from securefgl.algorithms.fedstruct.settings import EdgeDP
from securefgl.algorithms.recommendation.ldp import LDPConfig
from securefgl.algorithms.recommendation.row_dp import RowDPConfig
from securefgl.algorithms.recommendation.settings import aggregating
from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
from securefgl.config import ExperimentConfig
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import synthetic_ratings
from securefgl.experiment.runner import load_graph, run_single
from tests.securefgl.algorithms.fedstruct.test_adjacency import make_world

TINY = {"num_nodes": 240, "num_features": 8}


def _twice(config: ExperimentConfig, algorithm: str):
    data_config = config.replace(store_payloads=True)
    data = load_graph(data_config)
    runs = [
        run_single(data_config, algorithm, 0, data, progress=False, keep_state=True)
        for _ in range(2)
    ]
    published = [
        [(e.round, e.sender, e.receiver, e.tag) for e in r.transcript.entries] for r in runs
    ]
    return runs, published


def _server_params(run) -> np.ndarray:
    return np.asarray(run.state.algorithm.server.params)


@pytest.mark.parametrize(
    "protocol", [["clip_noise"], ["secagg", "clip_noise"], ["ldp_laplace"], ["ldp_gaussian"]]
)
def test_update_noise_is_not_a_function_of_what_a_run_publishes(protocol):
    cfg = ExperimentConfig(
        csbm=TINY, clients=3, rounds=2, algorithms=["fedavg"],
        protocol={"stack": protocol, "dp_noise": 0.5},
    )
    (a, b), (pub_a, pub_b) = _twice(cfg, "fedavg")
    assert a.to_dict()["seed"] == b.to_dict()["seed"] and a.privacy["noise"] == "secret"
    assert pub_a == pub_b  # the same public record ...
    assert not np.allclose(_server_params(a), _server_params(b))  # ... and other noise
    (c, d), _ = _twice(cfg.replace(protocol={"seeded_noise": True}), "fedavg")
    np.testing.assert_array_equal(_server_params(c), _server_params(d))
    assert c.privacy["noise"] == "seeded (NOT PRIVATE)" and "private" not in c.privacy
    assert all(g["void"] == "seeded noise: NOT PRIVATE" for g in c.privacy["guarantees"])
    assert not any("void" in g for g in a.privacy["guarantees"])


def test_poisson_participation_is_each_clients_secret_coin():
    cfg = ExperimentConfig(
        csbm=TINY, clients=8, rounds=6, algorithms=["fedavg"], client_fraction=0.5,
        client_sampling="poisson",
    )  # fmt: skip

    def participants(run):
        entries = run.transcript.entries
        return [sorted({e.sender for e in entries if e.round == r}) for r in range(6)]

    (a, b), _ = _twice(cfg, "fedavg")
    assert participants(a) != participants(b)
    (c, d), _ = _twice(cfg.replace(protocol={"seeded_noise": True}), "fedavg")
    assert participants(c) == participants(d)


def test_a_poisson_round_too_small_to_sum_is_skipped_and_epsilon_stays_finite(caplog):
    cfg = ExperimentConfig(
        csbm=TINY, clients=6, rounds=12, algorithms=["fedavg"], client_fraction=0.25,
        client_sampling="poisson",  # seeded coins: this draw has rounds of 0 and 1 client
        protocol={"stack": ["secagg", "clip_noise"], "seeded_noise": True},
    )  # fmt: skip
    with caplog.at_level("WARNING"):
        run = run_single(cfg, "fedavg", 0, load_graph(cfg), progress=False)
    assert "1 client(s) joined, fewer than the 2 clip_noise+secagg sums" in caplog.text
    assert np.isfinite(run.privacy["epsilon"]) and run.privacy["dp_rounds"] == 12


def test_edge_dp_noise_is_secret_for_fedstruct_and_the_standalone_exchange():
    cfg = ExperimentConfig(
        csbm=TINY, clients=3, rounds=1, algorithms=["fedstruct"],
        fedstruct={"nsf": "degree", "structure_hops": 2, "edge_dp": "edgerand",
                   "edge_epsilon": 1.0},
    )  # fmt: skip

    def structure(run):
        views = [c.structure_view for c in run.state.algorithm.clients.values()]
        return [(v.edge_index.tolist(), v.external_edges.tolist()) for v in views]

    (a, b), _ = _twice(cfg, "fedstruct")
    assert structure(a) != structure(b)
    (c, d), _ = _twice(cfg.replace(protocol={"seeded_noise": True}), "fedstruct")
    assert structure(c) == structure(d)
    _, _, views = make_world(n=120, K=3)
    first, second = (perturb_federation(views, EdgeDP("edgerand", 1.0)) for _ in range(2))
    assert any(
        not np.array_equal(x.edge_index.numpy(), y.edge_index.numpy())
        for x, y in zip(first, second, strict=True)
    )


@pytest.mark.parametrize("method", ["fesog", "fedgnn"])
def test_recommendation_ldp_noise_and_pseudo_items_are_secret(method):
    views = ClientViews.from_data(synthetic_ratings(n_users=40, n_items=30, seed=0), seed=0)
    mode = "heuristic" if method == "fesog" else "laplace"
    cfg = RecConfig(method=method, rounds=1, users_per_round=20, ldp=LDPConfig(mode, 0.1, 0.1))

    def uploads(c):
        trainer = FedRecTrainer(views, c)
        view = trainer.observe(0, "plain")
        up = view.per_user
        return up.item_idx.numpy().tolist(), up.item_grad.numpy()

    (idx_a, grad_a), (idx_b, grad_b) = uploads(cfg), uploads(cfg)
    assert idx_a != idx_b or not np.allclose(grad_a, grad_b)
    seeded = dataclasses.replace(cfg, seeded_noise=True)
    (idx_c, grad_c), (idx_d, grad_d) = uploads(seeded), uploads(seeded)
    assert idx_c == idx_d
    np.testing.assert_array_equal(grad_c, grad_d)


@pytest.mark.parametrize("aggregation", ["ideal", "secagg"])
def test_row_dp_noise_is_secret_and_seeded_only_when_asked(aggregation):
    views = ClientViews.from_data(synthetic_ratings(n_users=40, n_items=30, seed=0), seed=0)
    cfg = RecConfig(method="fesog", rounds=1, users_per_round=8, keep_views=1,
                    row_dp=RowDPConfig(noise=1.0, threshold=-50.0),
                    **aggregating(aggregation))  # fmt: skip

    def counts(c):
        with FedRecTrainer(views, c) as trainer:
            return trainer.round(0).sums.item_count.numpy()

    assert not np.array_equal(counts(cfg), counts(cfg))
    seeded = dataclasses.replace(cfg, seeded_noise=True)
    np.testing.assert_array_equal(counts(seeded), counts(seeded))
