"""SecAgg hardening: thresholds above n/2 (Bonawitz et al. 2017) and late masked inputs."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from protocols.base import Envelope, ProtocolError, aggregate, no_transport
from protocols.crypto import shamir
from protocols.secagg import (
    TAG_MASKED,
    RoundInfo,
    SecAggPlus,
    SecAggregation,
    min_threshold,
    resolve_threshold,
)

SERVER = "server"


def _ids(n: int) -> list[str]:
    return [f"c{i:02d}" for i in range(n)]


def _inputs(n: int, d: int, seed: int = 0) -> dict[str, tuple[np.ndarray, float]]:
    rng = np.random.default_rng(seed)
    return {c: (rng.uniform(-5, 5, d), float(rng.uniform(0.5, 3))) for c in _ids(n)}


def _mean(inputs, members) -> np.ndarray:
    return sum(inputs[c][0] * inputs[c][1] for c in members) / sum(inputs[c][1] for c in members)


# ------------------------------------------------------------------------------ thresholds


def test_split_view_attack_needs_t_at_most_half() -> None:
    """Why t > n/2: with t <= n/2 a server that tells one half of the holders "u survived"
    and the other half "u dropped" gets t shares of u's self-mask seed AND of its mask key."""
    seed, key = bytes(range(32)), bytes(range(32, 64))
    for n, t, attack_works in ((6, 3, True), (6, 4, False), (7, 3, True), (7, 4, False)):
        xs = list(range(1, n + 1))
        b_shares = shamir.split(seed, t, n, xs=xs)
        s_shares = shamir.split(key, t, n, xs=xs)
        half = n // 2  # holders told "survived" answer b, the others "dropped" answer s
        got_b, got_s = b_shares[:half], s_shares[half:]
        assert (len(got_b) >= t and len(got_s) >= t) == attack_works
        if attack_works:
            assert shamir.combine(got_b[:t], t) == seed and shamir.combine(got_s[:t], t) == key


@pytest.mark.parametrize("holders", range(2, 40))
def test_default_threshold_is_the_minimum_above_half(holders: int) -> None:
    t = resolve_threshold(None, holders)
    assert t == min_threshold(holders) and 2 * t > holders and 2 * (t - 1) <= holders
    assert holders - t < holders / 2  # dropout tolerance below n/2
    for fraction in (0.51, 2 / 3, 0.75, 1.0):
        assert 2 * resolve_threshold(fraction, holders) > holders


@pytest.mark.parametrize(
    ("threshold", "holders", "minimum"), [(2, 4, 3), (3, 6, 4), (3, 7, 4), (5, 10, 6), (2, 5, 3)]
)
def test_integer_threshold_at_most_half_is_refused(threshold, holders, minimum) -> None:
    with pytest.raises(ValueError, match=f"minimum is t={minimum}"):
        resolve_threshold(threshold, holders)
    assert resolve_threshold(minimum, holders) == minimum


@pytest.mark.parametrize("fraction", [0.5, 0.3, 0.01, 0.0, -1.0, 1.5])
def test_fraction_outside_half_to_one_is_refused(fraction: float) -> None:
    with pytest.raises(ValueError, match=r"\(0.5, 1\]"):
        SecAggregation("e", threshold=fraction)
    with pytest.raises(ValueError, match=r"\(0.5, 1\]"):
        resolve_threshold(fraction, 5)


def test_protocols_refuse_low_thresholds_when_parties_are_made() -> None:
    # secagg: the share holders are all n clients
    with pytest.raises(ValueError, match="minimum is t=6"):
        SecAggregation("e", threshold=5).create_parties(SERVER, _ids(10), 2)
    SecAggregation("e", threshold=6).create_parties(SERVER, _ids(10), 2)
    # secagg+: a client's neighbourhood (itself and k neighbours) holds its shares
    with pytest.raises(ValueError, match="minimum is t=3"):
        SecAggPlus("e", k=4, threshold=2).create_parties(SERVER, _ids(12), 2)
    protocol = SecAggPlus("e", k=4, threshold=3)
    info = RoundInfo.build(protocol.config_for(12), 0, _ids(12))
    assert info.graph.holders_per_client == 5 and info.t == 3
    # a small federation where the secagg+ graph is complete: h = n
    with pytest.raises(ValueError, match="minimum is t=3"):
        SecAggPlus("e", k=8, threshold=2).create_parties(SERVER, _ids(4), 2)


def test_threshold_above_half_still_aggregates_with_dropouts() -> None:
    n, d = 7, 4  # t = 4 (the default): up to 3 < 7/2 dropouts
    inputs = _inputs(n, d)
    dropped = {"c01": "masked_input", "c03": "unmask", "c05": "share_keys"}
    protocol = SecAggregation("exp-t")
    result = aggregate(protocol, protocol.create_parties(SERVER, _ids(n), d), 0, inputs,
                       dropped=dropped)  # fmt: skip
    members = [c for c in _ids(n) if c not in ("c01", "c05")]
    np.testing.assert_allclose(result.mean, _mean(inputs, members), atol=1e-5)
    with pytest.raises(ProtocolError, match="threshold t=4"):  # a 4th dropout aborts
        aggregate(protocol, protocol.create_parties(SERVER, _ids(n), d), 1, inputs,
                  dropped={**dropped, "c06": "masked_input"})  # fmt: skip


# ----------------------------------------------------------------------------- late inputs


class Delay:
    """A transmit that holds the first masked input of ``who`` back for ``calls`` transmits."""

    def __init__(self, who: str, calls: int = 1) -> None:
        self.who, self.calls = who, calls
        self.held: list[tuple[int, Envelope]] = []
        self.delivered_late: list[Envelope] = []

    def __call__(self, envelopes: list[Envelope]) -> list[Envelope]:
        out = []
        for env in no_transport(envelopes):
            if env.tag == TAG_MASKED and env.sender == self.who and not self.delivered_late:
                if not self.held:
                    self.held.append((self.calls, env))
            else:
                out.append(env)
        due = [env for left, env in self.held if left == 0]
        self.held = [(left - 1, env) for left, env in self.held if left > 0]
        self.delivered_late.extend(due)
        return out + due


@pytest.mark.parametrize("protocol", [SecAggregation("exp-late"), SecAggPlus("exp-late+", k=4)])
def test_late_masked_input_is_ignored(protocol, caplog) -> None:
    n, d = 8, 5
    inputs = _inputs(n, d, seed=3)
    parties = protocol.create_parties(SERVER, _ids(n), d)
    late = Delay("c02")
    with caplog.at_level(logging.DEBUG, logger="protocols.secagg"):
        result = aggregate(protocol, parties, 0, inputs, transmit=late)
    assert [e.receiver for e in late.delivered_late] == [SERVER]  # it did arrive, late
    members = [c for c in _ids(n) if c != "c02"]
    assert result.participants == tuple(members)
    np.testing.assert_allclose(result.mean, _mean(inputs, members), atol=1e-5)
    assert "ignoring the masked input of 'c02'" in caplog.text
    assert "no unmask request" in caplog.text  # the late client reveals nothing


@pytest.mark.parametrize("calls", [5, 8, 10])  # in round 1: key lists, masked inputs, unmasks
def test_stale_masked_input_in_the_next_round_is_ignored(calls: int) -> None:
    n, d = 5, 3
    protocol = SecAggregation("exp-stale")
    parties = protocol.create_parties(SERVER, _ids(n), d)
    late = Delay("c04", calls=calls)  # round 0's input reaches the server in round 1
    aggregate(protocol, parties, 0, _inputs(n, d, 0), transmit=late)
    inputs = _inputs(n, d, 1)
    result = aggregate(protocol, parties, 1, inputs, transmit=late)
    assert late.delivered_late and late.delivered_late[0].payload.meta["round"] == 0
    # Delay drops c04's later inputs while it holds the first: from call 8 on, round 1's too
    members = _ids(n) if calls < 8 else _ids(n)[:-1]
    assert result.participants == tuple(members)
    np.testing.assert_allclose(result.mean, _mean(inputs, members), atol=1e-5)


def test_masked_input_from_a_survivor_in_finalize_still_aborts() -> None:
    """Only inputs of clients already counted as dropped are ignored: a second input from a
    survivor is a protocol violation."""
    n, d = 4, 2
    protocol = SecAggregation("exp-dup")
    parties = protocol.create_parties(SERVER, _ids(n), d)
    sent: list[Envelope] = []

    def replay(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        sent.extend(e for e in out if e.tag == TAG_MASKED)
        if out and out[0].tag == "secagg/unmask":
            out.append(sent[0])
        return out

    with pytest.raises(ProtocolError, match="unexpected 'secagg/masked-input'"):
        aggregate(protocol, parties, 0, _inputs(n, d), transmit=replay)
