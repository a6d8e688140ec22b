"""Safe protocol defaults in the configuration and the algorithms: SecAgg thresholds above
n/2 (Bonawitz et al. 2017), at least two senders per secure sum unless allowed."""

from __future__ import annotations

import pytest

from protocols.secure_sum.parties import TAG_CONTRIBUTION
from securefgl.algorithms.fedgcn.settings import FedGCNSettings
from securefgl.algorithms.fedstruct.abar_build import PlainHopSum
from securefgl.algorithms.fedstruct.algorithm import _hop_sum
from securefgl.algorithms.fedstruct.settings import FedStructSettings
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data import build_client_views, partition_graph, random_split
from securefgl.data.synthetic import csbm
from securefgl.federation import Channel, Transcript
from securefgl.federation.stack import build_stack
from tests.securefgl.algorithms.fedgcn.test_fedgcn import make_world, precompute
from tests.securefgl.algorithms.fedstruct.test_training import _settings, _setup

# ------------------------------------------------------------------- secagg configuration


@pytest.mark.parametrize("bad", [0.5, 0.3, 0.0, -1.0, 1.5, 1.99, 0, -3, 2.5, float("inf")])
def test_thresholds_that_can_never_be_valid_are_config_errors(bad) -> None:
    with pytest.raises(ConfigError, match=r"secagg_threshold.*\(0.5, 1\] or a whole count ≥ 2"):
        ExperimentConfig(protocol={"stack": ["secagg"], "secagg_threshold": bad})


@pytest.mark.parametrize("good", [None, 0.51, 2 / 3, 1.0, 2, 3.0, 7])
def test_valid_thresholds_pass(good) -> None:
    cfg = ExperimentConfig(protocol={"stack": ["secagg"], "secagg_threshold": good})
    assert cfg.protocol.secagg_threshold == good


@pytest.mark.parametrize("bad", [0, 1, 3, 5, -2])
def test_odd_or_small_secagg_k_is_a_config_error(bad) -> None:
    with pytest.raises(ConfigError, match="secagg_k must be an even integer ≥ 2"):
        ExperimentConfig(protocol={"stack": ["secagg+"], "secagg_k": bad})
    assert ExperimentConfig(protocol={"stack": ["secagg+"], "secagg_k": 4}).protocol.secagg_k == 4


def test_a_count_at_most_half_of_the_round_is_refused_when_parties_are_made() -> None:
    """A count of 2 is a valid configuration, but not for 10 clients of secagg (t > 5)."""
    config = ExperimentConfig(protocol={"stack": ["secagg"], "secagg_threshold": 2}, clients=10)
    protocol = build_stack(config, 10).protocol
    with pytest.raises(ValueError, match="minimum is t=6"):
        protocol.create_parties("server", [f"c{i}" for i in range(10)], 3)
    protocol.create_parties("server", ["c0", "c1", "c2"], 3)  # t = 2 > 3/2


# ------------------------------------------------------------------------- min_senders


def test_min_senders_defaults_and_options() -> None:
    assert FedGCNSettings().min_senders == 2
    assert FedStructSettings().abar_min_senders == 2
    cfg = ExperimentConfig(fedstruct={"abar_min_senders": 1}, fedgcn={"min_senders": 1})
    assert FedStructSettings.of(cfg).abar_min_senders == 1 and cfg.fedgcn.min_senders == 1
    for bad in ({"fedstruct": {"abar_min_senders": 0}}, {"fedgcn": {"min_senders": 0}}):
        with pytest.raises(ConfigError, match="min_senders"):
            ExperimentConfig(**bad)


def test_cli_flags() -> None:
    from securefgl.cli import build_parser, config_from_args

    parser, _ = build_parser()
    argv = ["run", "--abar-min-senders", "1", "--fedgcn-min-senders", "3"]
    cfg = config_from_args(parser.parse_args(argv))
    assert cfg.fedstruct.abar_min_senders == 1 and cfg.fedgcn.min_senders == 3


@pytest.mark.parametrize("mode", ["masked", "ckks"])
def test_abar_min_senders_reaches_the_secure_hop_sums(mode: str) -> None:
    for m in (1, 2, 3):
        settings = FedStructSettings(sum_mode=mode, abar_min_senders=m)
        assert _hop_sum(settings, "exp").protocol.min_senders == m
    assert isinstance(
        _hop_sum(FedStructSettings(sum_mode="plain", abar_min_senders=3), "exp"), PlainHopSum
    )


def _two_client_views():
    g = csbm(num_nodes=120, num_classes=3, num_features=8, avg_degree=6, seed=4)
    g.train_mask, g.val_mask, g.test_mask = random_split(g.num_nodes, 0.2, 0.2, 0.6, seed=1)
    part = partition_graph(g, 2, "random", seed=2)  # each client: one neighbouring client
    return build_client_views(g, part.assignment, "known", seed=3)


@pytest.mark.parametrize("mode", ["masked", "ckks"])
def test_fedstruct_refuses_a_single_sender_abar_sum_with_advice(mode: str) -> None:
    views = _two_client_views()
    with pytest.raises(ConfigError) as info:
        _setup(views, _settings(sum_mode=mode), store=False)
    message = str(info.value)
    assert "Ā build refused" in message and "--abar-min-senders 1" in message
    assert "receiver 'client-" in message and "that sender's block itself" in message
    algo, _ = _setup(views, _settings(sum_mode=mode, abar_min_senders=1), store=False)
    assert algo.abar_report is not None
    assert algo.abar_report.hops[1].notes["single_sender_receivers"] == 2
    _setup(views, _settings(), store=False)  # plain: blocks in the clear anyway, not refused


@pytest.mark.parametrize("mode", ["masked", "ckks"])
def test_fedgcn_refuses_a_single_sender_neighbour_sum_with_advice(mode: str) -> None:
    _, views = make_world(n=120, k=2)
    channel = Channel(Transcript())
    with pytest.raises(ConfigError) as info:
        precompute(views, FedGCNSettings(sum_mode=mode), channel)
    message = str(info.value)
    assert "--fedgcn-min-senders 1" in message and "receiver 'client-" in message
    assert not [e for e in channel.transcript.entries if e.tag == TAG_CONTRIBUTION]
    report = precompute(views, FedGCNSettings(sum_mode=mode, min_senders=1))[3]
    assert report.single_sender_receivers == [2, 2]
    assert precompute(views, FedGCNSettings(sum_mode="plain"))[3].single_sender_receivers == [2, 2]
