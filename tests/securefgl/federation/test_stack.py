"""FedAvg runs through every protocol stack; protected transports match plaintext."""

import numpy as np
import pytest

from protocols.registry import parse_stack
from securefgl.algorithms.registry import check_config
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment.runner import load_graph, run_single
from securefgl.federation.stack import build_stack

TINY = {"num_nodes": 300, "num_features": 8, "feature_signal": 1.0}


def _cfg(**kw):
    base = dict(
        csbm=TINY,
        clients=4,
        partition="random",
        rounds=6,
        eval_every=3,
        hidden=8,
        algorithms=["fedavg"],
    )
    return check_config(ExperimentConfig(**{**base, **kw}))


@pytest.fixture(scope="module")
def graph():
    return load_graph(_cfg())


@pytest.fixture(scope="module")
def plain_run(graph):
    return run_single(_cfg(), "fedavg", 0, graph, progress=False)


@pytest.mark.parametrize("transport", ["secagg", "secagg+", "ckks"])
@pytest.mark.parametrize("algo", ["fedavg", "fedprox"])
def test_protected_transports_match_plaintext(graph, transport, algo):
    # plain averaging (server SGD, lr 1): Adam's scale invariance would magnify the ~1e-8
    # encoding error of coordinates whose gradient is itself ~1e-7
    opts = dict(local_epochs=2, server_optimizer="sgd", lr=1.0, client_lr=0.5, weight_decay=0)
    cfg = _cfg(protocol=[transport], **opts)
    ref = run_single(_cfg(**opts), algo, 0, graph, progress=False)
    got = run_single(cfg, algo, 0, graph, progress=False)
    for r_ref, r_got in zip(ref.history, got.history, strict=True):
        assert r_got["loss"] == pytest.approx(r_ref["loss"], abs=1e-4)
    assert abs(got.final["test_acc"] - ref.final["test_acc"]) <= 0.01
    assert "guarantees" not in got.privacy and "epsilon" not in got.privacy  # no DP claimed


def test_protected_transports_cost_more_bytes_than_plain(graph, plain_run):
    plain = sum(h["bytes_up"] for h in plain_run.history)
    for transport in ("secagg", "ckks"):
        run = run_single(_cfg(protocol=[transport]), "fedavg", 0, graph, progress=False)
        assert sum(h["bytes_up"] for h in run.history) > plain


def test_ckks_server_never_sends_or_holds_a_trained_model(graph):
    cfg = _cfg(protocol=["ckks"], rounds=3, store_payloads=True)
    run = run_single(cfg, "fedavg", 0, graph, progress=False)
    server_sent = {e.tag for e in run.transcript.sent_by("server") if e.round >= 0}
    assert "fedavg/model" not in server_sent  # only the random init, in setup (round -1)
    assert {e.tag for e in run.transcript.sent_by("server") if e.round < 0} >= {"fedavg/model"}


@pytest.mark.parametrize(
    "stack",
    [["clip_noise"], ["clip_noise", "secagg"], ["secagg+", "clip_noise"], ["ckks", "clip_noise"]],
)
def test_dp_stacks_report_epsilon_from_the_accountant(graph, stack):
    from protocols.dp import PrivacyAccountant

    run = run_single(
        _cfg(protocol={"stack": stack, "dp_noise": 1.5, "dp_clip": 0.5}), "fedavg", 0, graph,
        progress=False,
    )
    acc = PrivacyAccountant("rdp", 1e-5)
    acc.step(1.5, 1.0, steps=6)  # all 4 clients every round, 6 rounds
    assert run.privacy["epsilon"] == pytest.approx(acc.epsilon())
    assert run.privacy["delta"] == 1e-5 and run.privacy["dp_rounds"] == 6
    assert "epsilon" in run.history[2] and run.history[2]["epsilon"] < run.privacy["epsilon"]


def test_dp_noise_changes_the_model(graph, plain_run):
    run = run_single(
        _cfg(protocol={"stack": ["clip_noise"], "dp_noise": 5.0}), "fedavg", 0, graph,
        progress=False,
    )
    losses = np.array([h["loss"] for h in run.history])
    assert not np.allclose(losses, [h["loss"] for h in plain_run.history])


def test_ldp_laplace_accounts_pure_dp(graph):
    run = run_single(
        _cfg(protocol={"stack": ["ldp_laplace"], "dp_epsilon": 2.0}), "fedavg", 0, graph,
        progress=False,
    )
    assert run.privacy["epsilon"] == pytest.approx(2.0 * 6)  # basic composition, 6 rounds
    assert run.privacy["accountant"] == "pure-dp"


def test_stack_errors():
    for bad, msg in [
        (["secagg", "ckks"], "at most one"),
        (["quantum"], "unknown protocol"),
        (["clip_noise", "ldp_laplace"], "at most one"),
    ]:
        with pytest.raises(ValueError, match=msg):
            parse_stack(bad)
        with pytest.raises(ConfigError, match=msg):
            _cfg(protocol=bad)
    with pytest.raises(ValueError, match="and the server never sees it"):
        build_stack(_cfg(protocol={"stack": ["ckks", "clip_noise"], "dp_mode": "central"}), 4)


def test_ckks_with_client_sampling_is_refused(graph):
    with pytest.raises(ConfigError, match="client_fraction = 1"):
        run_single(_cfg(protocol=["ckks"], client_fraction=0.5), "fedavg", 0, graph, progress=False)


def test_cli_protocol_flag_and_toml(tmp_path):
    import json

    from securefgl.cli import main

    toml = tmp_path / "p.toml"
    toml.write_text(
        'protocol = ["secagg", "clip_noise"]\nclients = 3\nrounds = 2\n'
        'algorithms = ["fedavg"]\ncsbm = { num_nodes = 200, num_features = 4 }\n'
    )
    assert (
        main(
            [
                "run",
                "--config",
                str(toml),
                "--output-dir",
                str(tmp_path),
                "--name",
                "a",
                "--no-progress",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "run",
                "--protocol",
                "secagg,clip_noise",
                "--clients",
                "3",
                "--rounds",
                "2",
                "--algorithms",
                "fedavg",
                "--csbm",
                '{"num_nodes": 200, "num_features": 4}',
                "--output-dir",
                str(tmp_path),
                "--name",
                "b",
                "--no-progress",
            ]
        )
        == 0
    )
    a = json.loads((tmp_path / "a" / "result.json").read_text())
    b = json.loads((tmp_path / "b" / "result.json").read_text())
    assert a["summary"][0]["epsilon"] == pytest.approx(b["summary"][0]["epsilon"])
    assert a["summary"][0]["epsilon"] > 0
    assert "ε" in (tmp_path / "a" / "result.md").read_text()


def _masked_codec(cfg):
    stack = build_stack(cfg, clients_per_round=cfg.clients)
    parties = stack.parties("server", [f"client-{i}" for i in range(cfg.clients)], 10)
    server = getattr(parties.server, "inner", parties.server)  # under a DP wrapper
    return server.config.codec


def test_secagg_ring_from_the_experiment():
    """The ring is a public parameter of the experiment: 32 bits under clip_noise (the clip
    bounds the values) or with a declared bound, 64 when nothing is known or asked."""
    assert _masked_codec(_cfg(protocol=["secagg"])).word_bits == 64
    assert _masked_codec(_cfg(protocol=["clip_noise", "secagg+"])).word_bits == 32
    declared = {"stack": ["secagg"], "secagg_value_bound": 1.0, "secagg_weight_bound": 100.0}
    codec = _masked_codec(_cfg(protocol=declared))
    assert codec.word_bits == 32 and codec.effective_bound == 100.0
    forced = {**declared, "secagg_ring_bits": 64}
    assert _masked_codec(_cfg(protocol=forced)).word_bits == 64
    with pytest.raises(ValueError, match="secagg_ring_bits = 32 needs a value bound"):
        _masked_codec(_cfg(protocol={"stack": ["secagg"], "secagg_ring_bits": 32}))


def test_secagg_32_bit_ring_matches_plaintext(graph):
    opts = dict(local_epochs=2, server_optimizer="sgd", lr=1.0, client_lr=0.5, weight_decay=0)
    ref = run_single(_cfg(**opts), "fedavg", 0, graph, progress=False)
    ring = {"stack": ["secagg"], "secagg_value_bound": 4.0, "secagg_weight_bound": 200.0,
            "secagg_ring_bits": 32}  # fmt: skip
    got = run_single(_cfg(protocol=ring, **opts), "fedavg", 0, graph, progress=False)
    for r_ref, r_got in zip(ref.history, got.history, strict=True):
        assert r_got["loss"] == pytest.approx(r_ref["loss"], abs=1e-4)
    assert abs(got.final["test_acc"] - ref.final["test_acc"]) <= 0.01


def test_every_secure_run_reports_its_aggregate_error(graph, plain_run):
    """The aggregate's max abs error against the float64 mean of the clients' inputs:
    within the transport's bound, above zero where it quantises, none under DP noise."""
    ring = {"stack": ["secagg"], "secagg_value_bound": 4.0, "secagg_weight_bound": 200.0}
    codec = _masked_codec(_cfg(protocol=ring))
    assert codec.word_bits == 32
    runs = {
        name: run_single(_cfg(protocol=protocol), "fedavg", 0, graph, progress=False)
        for name, protocol in [
            ("secagg-32", ring),
            ("secagg-64", ["secagg"]),
            ("ckks", ["ckks"]),
            ("dp", ["clip_noise", "secagg"]),
        ]
    }
    errors = {name: run.aggregate_error for name, run in runs.items()}
    assert plain_run.aggregate_error is not None and plain_run.aggregate_error < 1e-6
    # fixed point: every entry of w·x and w rounds by at most 2^-(f+1); 4 clients, Σ w ≥ 1
    half_step = 2.0 ** -(codec.frac_bits + 1)
    assert 0 < errors["secagg-32"] <= 2 * 4 * half_step * (1 + 4.0), errors
    assert 0 < errors["secagg-64"] < errors["secagg-32"], errors
    assert 0 < errors["ckks"] < 1e-5, errors
    assert errors["dp"] is None
    assert runs["secagg-32"].to_dict()["aggregate_max_abs_error"] == errors["secagg-32"]


@pytest.mark.parametrize(("algorithm", "takes_dp"), [
    ("fedego", True), ("fedsage+", True), ("spreadfgl", True), ("fed-pub", False),
])  # fmt: skip
def test_the_families_with_their_own_rounds_report_their_aggregate_error(
    graph, algorithm, takes_dp
):
    """FedEgo, the edge-server families (FedSage+, SpreadFGL) and FED-PUB's personalised
    sums audit their aggregates like FedAvg: non-zero under secagg's fixed point, within
    2^-25 (64-bit ring, 24 fractional bits, means and convex mixtures); none under a DP
    mechanism (FED-PUB refuses one)."""
    stacks = [("secagg", ["secagg"])] + [("dp", ["clip_noise", "secagg"])] * takes_dp
    errors = {
        name: run_single(_cfg(protocol=stack, algorithms=[algorithm], rounds=2),
                         algorithm, 0, graph, progress=False).aggregate_error
        for name, stack in stacks
    }  # fmt: skip
    assert errors["secagg"] is not None and 0 < errors["secagg"] <= 2.0**-25, errors
    assert errors.get("dp") is None
