"""The audit of the SpreadFGL family: what the edge server reads off H, what a client reads
off generated rows, what FedSage+'s answered gradients give away; and the protections."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attacks.audit import guarantees
from attacks.fedsage_gradients import fedsage_gradient_features
from attacks.generated_features import generated_feature_inference
from attacks.h_inference import h_label_inference, h_link_inference, h_membership, uploads
from attacks.registry import attacks_for
from attacks.simulation import simulate
from protocols.dp.rows import RandomizedResponse
from protocols.wire import Payload
from securefgl.algorithms.spreadfgl.client import H_TAG
from securefgl.algorithms.spreadfgl.patch import PATCH_TAG
from tests.securefgl.algorithms.spreadfgl.world import tiny_config, tiny_graph

KEEP = frozenset({H_TAG, PATCH_TAG})


@pytest.fixture(scope="module")
def graph():
    return tiny_graph(n=240)


def _run(graph, algorithm="fedgl", rounds=6, **section):
    # random clients hold every class, so H separates a client's nodes
    cfg = tiny_config(rounds=rounds, hidden=16, partition="random", spreadfgl={
        "interval": 2, "local_steps": 10, "top_k": 3, "ae_iterations": 3, **section})  # fmt: skip
    return simulate(cfg, algorithm, 0, graph, keep_tags=KEEP)


@pytest.fixture(scope="module")
def plain(graph):
    return _run(graph)


def test_the_server_reads_links_labels_and_membership_off_plain_h(plain):
    link, label, member = h_link_inference(plain), h_label_inference(plain), h_membership(plain)
    assert link.leaks(), link.to_dict()  # beyond chance by its Hanley-McNeil margin
    assert label.leaks(), label.to_dict()
    assert member.applicable and 0 <= member.value <= 1
    assert label.details["uploaded_fraction"] == 1.0


def test_randomised_response_and_row_subsets_reduce_the_leak(graph, plain):
    rr = _run(graph, h_mechanism="rr", h_epsilon=0.05)
    assert h_label_inference(plain).leaks() and not h_label_inference(rr).leaks()
    assert rr.result.privacy["h_epsilon"] == pytest.approx(0.05 * 3)  # 3 uploads composed
    # the audit states the H ledger as what it is, never as a clip_noise model-update ε
    (claim,) = guarantees("fedgl", ["plain"], None, rr)
    assert claim["unit"] == "node-row (H uploads)" and claim["epsilon"] == pytest.approx(0.15)
    assert "not the model updates" in claim["covers"]
    subset = _run(graph, h_rows=0.25)
    label = h_label_inference(subset)
    assert label.details["uploaded_fraction"] == pytest.approx(0.25, abs=0.03)
    assert h_link_inference(subset).value < h_link_inference(plain).value


def test_a_client_reads_foreign_labels_off_generated_rows(plain):
    result = generated_feature_inference(plain)
    assert result.applicable and result.details["foreign_rows"] > 0
    assert 0 <= result.value <= 1 and -1 <= result.metrics["cosine"] <= 1


def test_fedsage_answers_give_away_the_nearest_nodes_features(graph):
    cfg = tiny_config(rounds=1)
    exact = fedsage_gradient_features(simulate(cfg, "fedsage+", 0, graph))
    assert exact.metrics["exact_fraction"] == 1.0 and exact.value > 0.999 and exact.leaks()
    noisy_cfg = cfg.replace(fedsage={"cross_clip": 1.0, "cross_noise": 2.0})
    noisy = fedsage_gradient_features(simulate(noisy_cfg, "fedsage+", 0, graph))
    assert noisy.metrics["exact_fraction"] == 0.0 and noisy.value < exact.value - 0.3


def test_registry_targets():
    names = {s.name for s in attacks_for("spreadfgl")}
    assert {"h_link_inference", "h_label_inference", "h_membership",
            "generated_feature_inference"} <= names  # fmt: skip
    assert {s.name for s in attacks_for("fedsage+")} >= {"fedsage_gradient_features"}
    assert not {s.name for s in attacks_for("fedavg-fusion")} & names


def _rr_run(uploads_per_client: int, epsilon: float = 0.7, nodes: int = 600, classes: int = 4):
    """An edge server's view of one client's H uploads, each randomised response (ε per
    upload) on the node's true class: the client's model is perfect, so the labels are the
    only thing the uploads carry."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, classes, nodes)
    onehot = np.eye(classes)[y]
    rr = RandomizedResponse(epsilon)
    sent = [SimpleNamespace(sender="c0", payload=Payload({"h": rr.apply(onehot, rng)}))
            for _ in range(uploads_per_client)]  # fmt: skip
    client = SimpleNamespace(
        server_id="edge-0", num_own=nodes, h_release=SimpleNamespace(rows=np.arange(nodes)),
        masks={"train": torch.zeros(nodes, dtype=torch.bool)}, y=torch.as_tensor(y),
    )  # fmt: skip
    view = SimpleNamespace(messages=lambda tag: sent if tag == H_TAG else [])
    algorithm = SimpleNamespace(clients={"c0": client}, impute=True)
    return SimpleNamespace(state=SimpleNamespace(algorithm=algorithm), view=lambda pid: view)


def _last_upload_accuracy(run) -> float:
    (client, h, _), = uploads(run)  # the last upload only: what the attack used to score
    return float((h.argmax(axis=1) == client.y.numpy()).mean())


def test_label_inference_votes_across_every_upload_it_saw():
    """Under randomised response over 6 uploads, a majority vote is the stronger adversary:
    the attack must use every upload, not only the last."""
    run = _rr_run(6)
    last, vote = _last_upload_accuracy(run), h_label_inference(run)
    assert abs(last - RandomizedResponse(0.7).keep_probability(4)) < 0.06
    assert vote.value > last + 0.1, (vote.value, last)
    assert vote.details["uploads"] == 6
    one = _rr_run(1)
    assert h_label_inference(one).value == pytest.approx(_last_upload_accuracy(one))
