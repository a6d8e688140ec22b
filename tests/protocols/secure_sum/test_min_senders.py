"""``min_senders`` (default 2): a one-sender "sum" is that sender's block, so it is refused
unless ``min_senders=1`` is asked for; receiver, server and senders each enforce it."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.registry import make_secure_sum
from protocols.secure_sum import (
    CKKSSum,
    MaskedSum,
    PlainSum,
    TooFewSendersError,
    run_secure_sums,
)
from tests.protocols.secure_sum.helpers import MODES, Recorder, make_parties, run_mode

FAST = ["plain", "masked", "masked32"]


def test_the_default_is_two_in_every_mode() -> None:
    assert MaskedSum("e").min_senders == PlainSum().min_senders == CKKSSum().min_senders == 2
    for mode in ("plain", "masked", "ckks"):
        assert make_secure_sum(mode, "e").min_senders == 2


@pytest.mark.parametrize("mode", [*FAST, "ckks"])
def test_single_sender_refused_before_anything_is_sent(mode: str) -> None:
    rec = Recorder()
    protocol, parties = make_parties(mode, 3)
    block = np.arange(6.0).reshape(2, 3) / 8
    with pytest.raises(TooFewSendersError, match=r"receiver 'c00'.*min_senders=2.*that sender's"):
        run_secure_sums(protocol, parties, {"c00": {"c01": block}}, rec)
    assert rec.log == []  # refused by the receiver before it announced anything
    # allowed explicitly, the "sum" is the block itself
    total = run_mode(mode, 3, {"c00": {"c01": block}}, options={"min_senders": 1})["c00"].total
    np.testing.assert_allclose(total, block, atol=1e-6)


def test_a_receiver_with_no_sender_needs_no_minimum() -> None:
    res = run_mode("masked", 3, {"c00": {"c00": np.ones((1, 2))}})["c00"]
    assert res.senders == () and res.includes_local


@pytest.mark.parametrize("mode", FAST)
def test_server_and_senders_enforce_it_too(mode: str) -> None:
    block = np.ones((1, 4))
    protocol, parties = make_parties(mode, 3)
    parties.clients["c00"].min_senders = 1  # a receiver that would accept one sender
    with pytest.raises(TooFewSendersError, match=r"server: 'c00' asks for a sum of 1 sender"):
        run_secure_sums(protocol, parties, {"c00": {"c01": block}})
    protocol, parties = make_parties(mode, 3)
    parties.clients["c00"].min_senders = parties.server.min_senders = 1
    with pytest.raises(TooFewSendersError, match=r"c01: refusing to contribute to 'c00'"):
        run_secure_sums(protocol, parties, {"c00": {"c01": block}})


def test_a_higher_minimum_counts_senders() -> None:
    jobs = {"c00": {"c01": np.ones((1, 2)), "c02": np.ones((1, 2))}}
    with pytest.raises(TooFewSendersError, match="the sum of only 2 blocks; set min_senders=2"):
        run_mode("masked", 4, jobs, options={"min_senders": 3})
    assert run_mode("masked", 4, jobs)["c00"].total.sum() == pytest.approx(4)


def test_min_senders_is_validated() -> None:
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="min_senders"):
            MODES["masked"](min_senders=bad)
