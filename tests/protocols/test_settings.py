"""ProtocolSettings: how secagg's value bound is known (declared, the DP clip, the weights)
and the ring options it hands the transport."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.dp.clip_noise import TAIL_SIGMAS, ClipNoiseMechanism
from protocols.registry import make_transport
from protocols.secagg import SecAggregation
from protocols.settings import ProtocolSettings


def test_nothing_known_means_no_bound() -> None:
    s = ProtocolSettings(stack=["secagg"])
    assert s.masked_value_bound() is None
    assert s.secagg_options() == {"value_bound": None, "ring_bits": None, "precision_bits": 20}


@settings(max_examples=50, deadline=None)
@given(value=st.floats(1e-3, 1e3), weight=st.none() | st.floats(1e-3, 1e4))
def test_a_declared_bound_covers_weighted_entries_and_the_weight(value, weight) -> None:
    s = ProtocolSettings(stack=["secagg"], secagg_value_bound=value, secagg_weight_bound=weight)
    w = 1.0 if weight is None else weight
    assert s.masked_value_bound() == max(w * value, w)


@settings(max_examples=50, deadline=None)
@given(
    clip=st.floats(0.01, 100),
    sigma=st.floats(0.0, 10),
    clients=st.integers(1, 500),
    mode=st.sampled_from(["central", "distributed"]),
)
def test_the_dp_clip_bounds_what_clip_noise_hands_the_transport(clip, sigma, clients, mode):
    s = ProtocolSettings(stack=["clip_noise", "secagg"], dp_clip=clip, dp_noise=sigma,
                         dp_mode=mode)  # fmt: skip
    mech = ClipNoiseMechanism(clip, sigma, mode=mode, expected_clients=clients)
    tail = TAIL_SIGMAS * sigma * clip / math.sqrt(clients) if mode == "distributed" else 0.0
    assert s.masked_value_bound(mech) == pytest.approx(max(clip + tail, 1.0))
    assert mech.entry_bound() == pytest.approx(clip + tail)
    # a declared bound wins over the clip
    declared = s.replace(secagg_value_bound=0.5)
    assert declared.masked_value_bound(mech) == 1.0  # the unit weight travels too


def test_fixed_dp_weights_bound_the_weight() -> None:
    mech = ClipNoiseMechanism(2.0, 0.0, weighting="fixed", max_weight=30.0, expected_weight=100)
    assert mech.max_client_weight == 30.0 and mech.entry_bound() == 60.0
    assert ProtocolSettings(stack=["secagg"]).masked_value_bound(mech) == 60.0


def test_the_ring_follows_from_the_settings() -> None:
    """clip_noise over secagg with 10 clients: a 32-bit ring; 5000 clients need 64 bits."""
    s = ProtocolSettings(stack=["clip_noise", "secagg"], dp_clip=1.0, dp_noise=1.0)
    mech = ClipNoiseMechanism(1.0, 1.0, mode="distributed", expected_clients=10)
    transport = make_transport("secagg", "exp", **s.secagg_options(mech))
    assert isinstance(transport, SecAggregation)
    assert transport.config_for(10).codec.word_bits == 32
    assert transport.config_for(5000).codec.word_bits == 64
    forced = make_transport("secagg", "exp", **s.replace(secagg_ring_bits=64).secagg_options(mech))
    assert forced.config_for(10).codec.word_bits == 64
    plain = make_transport("secagg", "exp", **ProtocolSettings(stack=["secagg"]).secagg_options())
    assert plain.config_for(10).ring == "Z_2^64/f24"


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("secagg_value_bound", 0.0, "finite number > 0"),
        ("secagg_value_bound", math.inf, "finite number > 0"),
        ("secagg_weight_bound", -1.0, "finite number > 0"),
        ("secagg_ring_bits", 16, "32 or 64"),
        ("secagg_precision_bits", 63, r"\[0, 62\]"),
        ("secagg_threshold", 2.7, "whole count"),
        ("secagg_threshold", math.inf, "whole count"),
        ("dp_clip", math.inf, "finite number > 0"),
        ("dp_noise", math.inf, "finite number ≥ 0"),
        ("dp_noise", -0.5, "finite number ≥ 0"),
        ("dp_clip", 0.0, "finite number > 0"),
        ("dp_epsilon", 0.0, "finite number > 0"),
        ("dp_delta", 1.0, r"lie in \(0, 1\)"),
        ("dp_colluding_clients", -1, "≥ 0"),
        ("min_cohort", 1, "integer ≥ 2"),
        ("secagg_k", 5, "even integer ≥ 2"),
    ],
)
def test_settings_are_checked(field, value, match) -> None:
    with pytest.raises(ValueError, match=match):
        ProtocolSettings(stack=["secagg"], **{field: value})


@pytest.mark.parametrize(
    ("stack", "mode"),
    [(["clip_noise"], "auto"), (["clip_noise"], "central"), (["clip_noise", "secagg"], "central")],
)
def test_a_malicious_server_is_not_trusted_to_add_the_noise(stack, mode) -> None:
    with pytest.raises(ValueError, match="malicious server can leave it out"):
        ProtocolSettings(stack=stack, dp_mode=mode, threat_model="malicious")
    ProtocolSettings(stack=stack, dp_mode=mode)  # honest-but-curious: central noise is fine
    ProtocolSettings(stack=["clip_noise", "secagg+"], threat_model="malicious")  # distributed


def test_distributed_noise_needs_a_transport_that_hides_each_share() -> None:
    with pytest.raises(ValueError, match="1/√n share"):
        ProtocolSettings(stack=["clip_noise"], dp_mode="distributed")
    ProtocolSettings(stack=["clip_noise", "secagg"], dp_mode="distributed")


def test_the_settings_name_the_rings_of_the_fixed_point_codec():
    """protocols.settings reads no numpy, so it names the rings itself: they must agree."""
    from protocols import fixedpoint, settings

    assert settings.WORD_BITS == fixedpoint.WORD_BITS
    assert settings.DEFAULT_PRECISION_BITS == fixedpoint.DEFAULT_PRECISION_BITS


@pytest.mark.parametrize(
    ("settings", "ignored"),
    [
        ({"stack": ["clip_noise"], "dp_epsilon": 0.5}, "dp_epsilon (read by ldp_laplace only)"),
        ({"stack": ["secagg"], "dp_noise": 2.0}, "dp_noise"),
        ({"stack": ["ldp_laplace"], "dp_mode": "central"}, "dp_mode"),
        ({"stack": ["ckks"], "secagg_threshold": 0.9}, "secagg_threshold (secagg and secagg+"),
        ({"stack": ["secagg"], "secagg_k": 4}, "secagg_k (secagg+ only"),
        ({"stack": ["secagg"], "secagg_precision_bits": 30}, "needs a value bound"),
        ({"stack": ["clip_noise"], "dp_colluding_clients": 1}, "dp_colluding_clients"),
        ({"stack": ["ckks"], "min_cohort": 3}, "min_cohort (secagg, secagg+, and ckks under"),
    ],
)
def test_settings_the_stack_never_reads_are_named(settings, ignored) -> None:
    assert any(ignored in line for line in ProtocolSettings(**settings).ignored_settings())


def test_settings_the_stack_reads_are_not_named() -> None:
    used = ProtocolSettings(stack=["secagg+", "clip_noise"], dp_noise=2.0, dp_clip=0.5,
                            secagg_k=4, secagg_precision_bits=24, dp_colluding_clients=1)
    assert used.ignored_settings() == []
    assert ProtocolSettings(stack=["ldp_laplace"], dp_epsilon=2.0).ignored_settings() == []


def test_central_noise_needs_a_server_that_sees_the_aggregate() -> None:
    with pytest.raises(ValueError, match="and the server never sees it"):
        ProtocolSettings(stack=["ckks", "clip_noise"], dp_mode="central")
    ProtocolSettings(stack=["secagg", "clip_noise"], dp_mode="central")  # the server opens it


@pytest.mark.parametrize(
    ("stack", "mode", "refused"),
    [(["secagg", "clip_noise"], "central", True), (["secagg", "clip_noise"], "distributed", False),
     (["clip_noise"], "central", False)],
)
def test_poisson_sampling_with_central_noise_needs_the_plain_transport(stack, mode, refused):
    settings = ProtocolSettings(stack=stack, dp_mode=mode)
    settings.check_sampling("fixed")
    if refused:
        with pytest.raises(ValueError, match="Poisson sampling with central noise over secagg"):
            settings.check_sampling("poisson")
    else:
        settings.check_sampling("poisson")


@pytest.mark.parametrize("transport", ["secagg", "secagg+"])
def test_a_masked_sum_needs_two_clients_a_round(transport) -> None:
    settings = ProtocolSettings(stack=[transport])
    settings.check_cohort(2)
    with pytest.raises(ValueError, match="at least 2 clients per round"):
        settings.check_cohort(1)
    ProtocolSettings(stack=["plain"]).check_cohort(1)
