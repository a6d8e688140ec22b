"""FedVN through the protocol layer on a tiny GOOD-Motif: what crosses the channel, s_global
by secure sums, secagg equal to plaintext, ω personal, the preset, and the attack's view."""

import numpy as np
import pytest

from attacks.fedvn_domain import fedvn_domain_inference, tie_aware_accuracy
from attacks.registry import ATTACKS, attacks_for
from attacks.simulation import simulate
from securefgl.algorithms.fedvn import apply_setup
from securefgl.algorithms.fedvn.parties import FedVNClient
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment.runner import load_graph, run_single
from securefgl.federation import Transcript

MOTIF = {"graphs_per_domain": 20, "val_per_domain": 6}


def config(protocol=None, **fedvn):
    cfg = ExperimentConfig(
        task="graph", dataset="motif-basis", clients=5, rounds=2, algorithms=["fedvn"],
        graph={"motif": MOTIF, "batch_size": 8, "eval_batch_size": 8, "hidden": 8,
               "model": "gin-bn", "optimizer": "sgd", "lr": 0.05, "weight_decay": 0.0},
        fedvn={"virtual_nodes": 4, "edge_hidden": 8, **fedvn},
        protocol=protocol or ["plain"], store_payloads=True,
    )  # fmt: skip
    return cfg


@pytest.fixture(scope="module")
def data():
    return load_graph(config())


@pytest.fixture(scope="module")
def plain_run(data):
    return simulate(config(), "fedvn", 0, data, payload_rounds=None)


def test_what_crosses_the_channel(plain_run):
    res = plain_run.result
    clients = [f"client-{i}" for i in range(5)]
    state = plain_run.state.algorithm
    dim = state.dim
    parties = {pid: state.clients[pid] for pid in clients}
    theta = sum(p.numel() for p in parties["client-0"].model.parameters())
    omega = sum(p.numel() for p in parties["client-0"].scorer.parameters())
    assert dim == theta + 4 * 8  # θ ‖ Q, nothing of ω
    tags = {e.tag for e in res.transcript.entries}
    assert "secure-sum/contribution" in tags  # s_global = mean s_local, by a (plain) sum
    updates = [e for e in res.transcript.entries if e.tag == "plain/update"]
    assert {e.sender for e in updates} == set(clients)
    sizes = {e.payload().array("weighted").size for e in updates}
    assert sizes == {dim} and omega not in sizes
    assert res.protection["edge generator ω"].startswith("never sent")
    assert 0 <= res.final["test_acc"] <= 1 and "val_selected_test_acc" in res.final


def test_s_global_is_the_mean_of_the_clients_s_local(plain_run):
    parties = list(plain_run.state.algorithm.clients.values())
    uploads = np.stack([p.s_upload for p in parties])
    for p in parties:
        assert np.allclose(p.s_global.numpy(), uploads.mean(0), atol=1e-5)
        assert not np.allclose(p.s_global.numpy(), 1 / 4)  # not the code's constant


def test_omega_stays_personal(plain_run):
    parties = list(plain_run.state.algorithm.clients.values())
    a, b = (np.concatenate([q.detach().numpy().ravel() for q in p.scorer.parameters()])
            for p in parties[:2])  # fmt: skip
    assert not np.allclose(a, b)  # each client's own ω (own start, own graphs)


def test_secagg_with_masked_sums_equals_plaintext(data, plain_run):
    secure = simulate(config(["secagg"]), "fedvn", 0, data, payload_rounds=None)
    assert secure.result.protection["mean edge-score vectors s_local (clients -> clients, "
                                     "for s_global)"].startswith("masked")  # fmt: skip
    a = [h["test_acc"] for h in plain_run.result.history]
    b = [h["test_acc"] for h in secure.result.history]
    assert np.allclose(a, b, atol=0.02)
    error = secure.state.algorithm.aggregate_error()  # θ ‖ Q audited like FedAvg's
    assert error is not None and 0 < error < 1e-6
    for p, q in zip(plain_run.state.algorithm.clients.values(),
                    secure.state.algorithm.clients.values(), strict=True):  # fmt: skip
        assert np.allclose(p.s_global.numpy(), q.s_global.numpy(), atol=1e-4)
    # the attack: plaintext sums show every s_local; masked sums leave a uniform guess
    plain = fedvn_domain_inference(plain_run)
    masked = fedvn_domain_inference(secure)
    assert plain.details["source"].startswith("plaintext s_local")
    assert "domain_accuracy_scores" in plain.metrics and "domain_accuracy_q" in plain.metrics
    assert masked.details["source"].startswith("no per-client vector")
    assert masked.value == pytest.approx(0.2) and masked.baseline() == pytest.approx(0.2, 0.05)
    assert not masked.leaks()


def test_constant_s_global_sends_no_scores(data):
    seen = Transcript(store_payloads=False)
    res = run_single(config(s_global="constant"), "fedvn", 0, data, progress=False,
                     transcript=seen)  # fmt: skip
    assert seen.entries and not any(e.tag.startswith("secure-sum") for e in seen.entries)
    assert res.protection["mean edge-score vectors s_local (clients -> clients, for "
                          "s_global)"].startswith("never sent")  # fmt: skip


def test_s_local_is_the_last_batch_or_the_whole_pass(data, plain_run):
    """The code's s_local (the last mini-batch's mean) differs from the pass's mean; the
    paper's (``all``) is the mean over the client's graphs, the vector it sends."""
    for p in plain_run.state.algorithm.clients.values():
        assert not np.allclose(p.s_local.numpy(), p.s_upload, atol=1e-6)
    paper = simulate(config(s_local="all"), "fedvn", 0, data, payload_rounds=None)
    for p in paper.state.algorithm.clients.values():
        assert np.allclose(p.s_local.numpy(), p.s_upload, atol=1e-6)


def test_an_unknown_s_local_is_refused():
    from securefgl.algorithms.fedvn.settings import FedVNSettings

    with pytest.raises(ValueError, match="s_local"):
        FedVNSettings(s_local="current")


def test_fedvn_needs_every_client_every_round(data):
    with pytest.raises(ConfigError, match="client_fraction must be 1"):
        run_single(config().replace(client_fraction=0.6), "fedvn", 0, data, progress=False)


def test_the_setup_preset_is_fedvns_code():
    cfg = apply_setup(ExperimentConfig(task="graph", dataset="motif-size", clients=5))
    g = cfg.graph
    assert (g.model, g.hidden, g.optimizer, g.lr, g.batch_size, g.weight_decay) == (
        "gin-bn", 100, "sgd", 1e-3, 32, 0.0)  # fmt: skip
    assert (cfg.rounds, cfg.eval_every, g.best_of_last) == (100, 1, 100)
    assert cfg.fedvn.virtual_nodes == 20 and cfg.fedvn.tau == 0.1


def test_the_attack_is_registered_for_fedvn():
    assert [s.name for s in attacks_for("fedvn")] == ["fedvn_domain_inference"]
    assert "secure-sum/contribution" in ATTACKS["fedvn_domain_inference"].keep_tags
    sizes = np.array([15.0, 10.9, 25.0, 16.0, 15.0])  # wheel, tree, ladder, star, path
    assert tie_aware_accuracy(sizes, sizes, np.arange(5)) == pytest.approx(0.8)  # wheel≈path
    assert tie_aware_accuracy(-sizes, sizes, np.arange(5)) < 0.5


def test_client_methods_are_typed_roles():
    assert callable(FedVNClient.prepare_scores) and callable(FedVNClient.finish_scores)


@pytest.mark.parametrize("argv", [
    ["--task", "graph", "--dataset", "MUTAG", "--clients", "3"],
    ["--dataset", "motif-basis", "--clients", "5"],  # the preset implies the graph task
])  # fmt: skip
def test_the_fedvn_setup_flag_works_without_a_config_file(argv: list[str]) -> None:
    from securefgl.cli import build_parser
    from securefgl.config.flags import config_from_args

    parser = build_parser()[0]
    config = config_from_args(parser.parse_args(["run", "--algorithms", "fedvn",
                                                 "--fedvn-setup", *argv]))  # fmt: skip
    assert (config.task, config.rounds, config.algorithms) == ("graph", 100, ["fedvn"])
    assert config.dataset.lower() == argv[argv.index("--dataset") + 1].lower()


def test_a_min_senders_the_clients_cannot_meet_is_refused_before_training() -> None:
    from securefgl.algorithms.registry import check_config
    from securefgl.config import ConfigError, ExperimentConfig

    cfg = ExperimentConfig(task="graph", dataset="synthetic-graphs", clients=3,
                           algorithms=["fedvn"], protocol=["secagg"],
                           fedvn={"min_senders": 5})  # fmt: skip
    with pytest.raises(ConfigError, match="min_senders = 5"):
        check_config(cfg)


def test_label_skew_settings_on_a_domain_split_are_named_as_unused(caplog) -> None:
    import logging

    from securefgl.config import ExperimentConfig
    from securefgl.experiment.graph_world import draw_graph_world, load_graph_data

    motif = {"graphs_per_domain": 60, "val_per_domain": 10}
    cfg = ExperimentConfig(task="graph", dataset="motif-basis", clients=5,
                           graph={"dirichlet": 0.1, "motif": motif})  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="securefgl.experiment.graph_world"):
        draw_graph_world(cfg, 0, load_graph_data(cfg))
    assert "dirichlet have no effect" in caplog.text
