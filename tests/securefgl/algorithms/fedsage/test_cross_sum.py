"""FedSage+ with the answered gradients as a secure sum: the fGen step equals the per-peer
answers' on the common batch, no single answer crosses in the clear, the gradient attack
falls to the mean of the answerers' rows, and the sum's noise is accounted."""

import numpy as np
import pytest

from attacks.fedsage_gradients import fedsage_gradient_features
from attacks.simulation import simulate
from protocols.dp.accounting import PrivacyAccountant
from securefgl.algorithms.fedsage.clients import ANSWER_TAG
from securefgl.algorithms.fedsage.settings import FedSageSettings
from tests.securefgl.algorithms.spreadfgl.world import tiny_config, tiny_graph

SAGE = {"gen_epochs": 2, "fed_gen_epochs": 2, "gen_hidden": [16, 32], "cross_queries": 4,
        "local_steps": 2, "latent": 8, "encoder_hidden": 8}  # fmt: skip


@pytest.fixture(scope="module")
def graph():
    return tiny_graph(n=240)


def run(graph, **fedsage):
    cfg = tiny_config(rounds=1, edge_servers=1, fedsage={**SAGE, **fedsage})
    return simulate(cfg, "fedsage+", 0, graph, payload_rounds=None)


@pytest.mark.parametrize("mode", ["masked", "ckks"])
def test_sum_replaces_every_answer_and_only_the_mean_row_leaks(graph, mode):
    plain = fedsage_gradient_features(run(graph))
    res = run(graph, cross_sum=mode)
    assert not any(e.tag == ANSWER_TAG for e in res.transcript.entries)
    algo = res.state.algorithm
    for client in algo.clients.values():  # i's sum = Σ_j 2(g − x_{u*_j}) over its peers
        g, total, peers = client.neighgen.received_sum
        want = np.zeros_like(g)
        for p in peers:
            x = algo.clients[p].x_own.toarray().astype(np.float64)
            near = ((g**2).sum(1)[:, None] - 2 * g @ x.T + (x**2).sum(1)[None]).argmin(1)
            want += 2 * (g - x[near])
        assert np.abs(total - want).max() < 1e-4
        assert len(peers) == len(algo.clients) - 1
    secure = fedsage_gradient_features(res)
    assert plain.value > 0.999 and secure.applicable
    assert secure.metrics["exact_fraction"] < 0.2 and secure.value < plain.value - 0.1
    assert "secure sum" in res.result.protection[
        "fGen queries and answered gradients (client <-> client)"]


def test_noise_on_the_sum_is_accounted(graph):
    res = run(graph, cross_sum="masked", cross_clip=1.0, cross_sum_noise=1.0)
    acc = PrivacyAccountant("rdp", 1e-5)
    for _ in range(SAGE["fed_gen_epochs"]):
        acc.step(1.0, 1.0)
    assert res.result.privacy["answers_epsilon"] == pytest.approx(acc.epsilon())
    assert "client i" in res.result.privacy["answers_adversary"]
    [claim] = res.result.privacy["guarantees"]  # in the report's ε column, with its unit
    assert claim["epsilon"] == res.result.privacy["answers_epsilon"]
    assert claim["adversary"] == "client i" and "one node" in claim["unit"]


def test_settings_refuse_noise_without_the_sum():
    with pytest.raises(ValueError, match="cross_sum_noise needs"):
        FedSageSettings(cross_sum_noise=1.0, cross_clip=1.0)
    with pytest.raises(ValueError, match="cross_sum must be"):
        FedSageSettings(cross_sum="magic")
