"""Support, range, dropout, tamper and size checks abort a secure sum before harm."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp

from protocols.base import Envelope, ProtocolError, no_transport
from protocols.fixedpoint import FixedPointOverflowError
from protocols.secure_sum import (
    CKKSSum,
    MaskedSum,
    PlainSum,
    SumRangeError,
    SumTooLargeError,
    Support,
    SupportViolationError,
    run_secure_sums,
    setup_secure_sums,
)
from protocols.secure_sum.masked import TAG_KEYLIST
from protocols.secure_sum.parties import TAG_CONTRIBUTION, TAG_DELIVERY, TAG_ROUTED_REQUEST
from protocols.wire import Payload
from tests.protocols.secure_sum.helpers import (
    FRAC_BITS,
    MODES,
    SERVER,
    Recorder,
    as_dense,
    client_ids,
    make_parties,
    run_mode,
    simple_jobs,
)
from tests.protocols.tampering import edit_transmit


@pytest.mark.parametrize("mode", list(MODES))
def test_support_violation(mode: str) -> None:
    block = np.zeros((4, 5))
    block[0, 1] = block[2, 3] = 0.5
    jobs = {"c00": {"c01": block, "c02": sp.csr_array(block)}}
    ok = {"c00": Support.product((4, 5), rows=[0, 2])}
    res = run_mode(mode, 3, jobs, supports=ok)["c00"]
    np.testing.assert_allclose(res.total, 2 * block, atol=1e-6)
    for bad in (Support.product((4, 5), rows=[0]), Support.pattern((4, 5), [1, 2, 3])):
        with pytest.raises(SupportViolationError, match="outside the public support"):
            run_mode(mode, 3, jobs, supports={"c00": bad})


def test_masked_overflow_is_refused_before_sending() -> None:
    protocol = MaskedSum("exp", value_bound=1.0)
    parties = protocol.create_parties(SERVER, client_ids(3))
    setup_secure_sums(protocol, parties)
    jobs = {"c00": {"c01": np.full((2, 2), 0.5), "c02": np.full((2, 2), 1.5)}}
    rec = Recorder()
    with pytest.raises(FixedPointOverflowError, match="exceeds the fixed-point bound"):
        run_secure_sums(protocol, parties, jobs, rec)
    assert rec.log == []
    # the default bound is the whole headroom: 2^(63 - frac_bits) / n_clients
    big = {"c00": {"c01": np.full((2, 2), 2.0**30), "c02": np.full((2, 2), 2.0**30)}}
    with pytest.raises(OverflowError):
        run_mode("masked", 3, big)
    with pytest.raises(FixedPointOverflowError, match="headroom"):
        MaskedSum("exp", frac_bits=60, value_bound=10.0).create_parties(SERVER, client_ids(8))


def test_ckks_range_is_refused_before_sending() -> None:
    jobs = {"c00": {"c01": np.full((2, 2), 1e5), "c02": np.zeros((2, 2))}}
    with pytest.raises(SumRangeError, match="CKKS bound"):
        run_mode("ckks", 3, jobs)


@pytest.mark.parametrize("mode", list(MODES))
def test_dropped_sender_aborts(mode: str) -> None:
    protocol, parties = make_parties(mode, 4)
    with pytest.raises(ProtocolError, match=r"senders \['c02'\].*did not contribute"):
        run_secure_sums(protocol, parties, simple_jobs(4), dropped={"c02": "contribute"})


@pytest.mark.parametrize("mode", list(MODES))
def test_dropped_receiver_aborts(mode: str) -> None:
    protocol, parties = make_parties(mode, 3)
    with pytest.raises(ProtocolError, match=r"receivers \['c01'\] did not request"):
        run_secure_sums(protocol, parties, simple_jobs(3), dropped={"c01": "announce"})


def _replace(field: str, make: Callable[[object], object], tag: str = TAG_CONTRIBUTION):
    def mutate(env: Envelope) -> Envelope:
        if env.tag != tag:
            return env
        fields = dict(env.payload.fields)
        names = [n for n in fields if n.rpartition("/")[2] == field]  # every bundled part's
        for name in names or [field]:
            fields[name] = make(fields[name])
        return Envelope(env.sender, env.receiver, env.tag, Payload(fields, env.payload.meta))

    return mutate


@pytest.mark.parametrize(
    ("field", "make", "tag", "match"),
    [
        ("y", lambda y: y[:-1], TAG_CONTRIBUTION, "garbled masked block"),
        ("y", lambda y: y.astype(np.float64), TAG_CONTRIBUTION, "garbled masked block"),
        ("y_sum", lambda y: y.view(np.int64), TAG_DELIVERY, "garbled masked sum"),
    ],
)
def test_garbled_masked_payload(field, make, tag, match) -> None:
    protocol, parties = make_parties("masked", 3)
    with pytest.raises(ProtocolError, match=match):
        run_secure_sums(protocol, parties, simple_jobs(3), Recorder(_replace(field, make, tag)))


def test_masked32_sums_in_uint32_words_and_checks_their_width_and_range() -> None:
    protocol, parties = make_parties("masked32", 3)
    assert protocol.codec_for(3).frac_bits == 29  # 3 x 2^29 < 2^31: the finest that fits
    wide = _replace("y", lambda y: y.astype(np.uint64))
    with pytest.raises(ProtocolError, match="garbled masked block.*uint32"):
        run_secure_sums(protocol, parties, simple_jobs(3), Recorder(wide))
    jobs = {"c00": {"c01": np.full((2, 2), 0.5), "c02": np.full((2, 2), 1.5)}}
    with pytest.raises(FixedPointOverflowError, match="exceeds the fixed-point bound 1"):
        run_mode("masked32", 3, jobs)
    with pytest.raises(ValueError, match="needs a value_bound"):
        MaskedSum("exp", word_bits=32, frac_bits=None)
    with pytest.raises(ValueError, match="sum_bound takes neither"):
        MaskedSum("exp", word_bits=32, sum_bound=4.0)  # frac_bits defaults to 32
    with pytest.raises(ValueError, match="word_bits"):
        MaskedSum("exp", word_bits=16)
    summed = MaskedSum("exp", word_bits=32, frac_bits=None, sum_bound=4.0).codec_for(3)
    assert summed.frac_bits == 28 and summed.dtype == np.uint32  # 4 x 2^28 + 3 < 2^31


def _random_bytes(blob: object) -> bytes:
    assert isinstance(blob, bytes)
    return np.random.default_rng(0).bytes(len(blob))


@pytest.mark.parametrize(
    ("field", "make", "tag"),
    [
        ("ct", _random_bytes, TAG_CONTRIBUTION),
        ("ct", lambda b: b[:-10], TAG_CONTRIBUTION),
        ("ct_len", lambda n: n[:1], TAG_CONTRIBUTION),
        ("ct", _random_bytes, TAG_DELIVERY),
    ],
)
def test_garbled_ciphertext(field, make, tag) -> None:
    protocol, parties = make_parties("ckks", 3)
    jobs = simple_jobs(3, shape=(50, 100))  # 5000 values: 3 ciphertexts
    with pytest.raises(ProtocolError, match="garbled ciphertext"):
        run_secure_sums(protocol, parties, jobs, Recorder(_replace(field, make, tag)))


def test_min_senders_refuses_a_single_sender_sum() -> None:
    protocol = MaskedSum("exp", min_senders=2)
    parties = protocol.create_parties(SERVER, client_ids(3))
    setup_secure_sums(protocol, parties)
    with pytest.raises(ProtocolError, match="min_senders=2"):
        run_secure_sums(protocol, parties, {"c00": {"c01": np.ones((2, 2))}})


@pytest.mark.parametrize(
    ("make", "per_value"),
    [
        (lambda **kw: PlainSum(**kw), 8),
        (lambda **kw: MaskedSum("exp", frac_bits=FRAC_BITS, **kw), 8),
        (lambda **kw: MaskedSum("exp", word_bits=32, frac_bits=None, value_bound=1.0, **kw), 4),
        (lambda **kw: CKKSSum(**kw), 16),
    ],
)
def test_server_refuses_a_round_over_max_round_bytes(make, per_value) -> None:
    """Admission: 3 jobs x 3 senders x 6 values = 54 values; the limit is checked on the
    public sizes when the server routes the requests, before any value is encoded."""
    jobs = {r: {k: np.ones((2, 3)) for k in client_ids(4) if k != r} for r in client_ids(4)[:3]}
    size = 54 * per_value
    assert make().bytes_per_value(4) == per_value
    for limit, fits in ((size, True), (size - 1, False)):
        protocol = make(max_round_bytes=limit)
        parties = protocol.create_parties(SERVER, client_ids(4))
        setup_secure_sums(protocol, parties, no_transport)
        rec = Recorder()
        if fits:
            results = run_secure_sums(protocol, parties, jobs, rec)
            np.testing.assert_allclose(as_dense(results["c00"].total), 3.0, atol=1e-6)
        else:
            with pytest.raises(SumTooLargeError, match="54 values"):
                run_secure_sums(protocol, parties, jobs, rec)
            assert not [e for e in rec.log if e.tag == TAG_CONTRIBUTION]
    with pytest.raises(ValueError, match="max_round_bytes"):
        make(max_round_bytes=0)


def test_round_without_setup_fails() -> None:
    for mode in ("masked", "ckks"):
        protocol = MODES[mode]()
        parties = protocol.create_parties(SERVER, client_ids(3))
        with pytest.raises(ProtocolError, match="run setup_secure_sums first"):
            run_secure_sums(protocol, parties, simple_jobs(3))


# ------------------------------------------------------------------------------- job specs


@pytest.mark.parametrize("mode", ["masked", "ckks"])
def test_receiver_refuses_a_sum_over_other_senders(mode: str) -> None:
    def one_sender_less(env: Envelope) -> None:
        env.payload.meta["senders"] = env.payload.meta["senders"][1:]

    protocol, parties = make_parties(mode, 3)
    with pytest.raises(ProtocolError, match="sum is not over the requested senders"):
        transmit = edit_transmit(TAG_DELIVERY, one_sender_less)
        run_secure_sums(protocol, parties, simple_jobs(3), transmit)


def test_client_refuses_a_key_list_in_another_order() -> None:
    """Keys are matched to peers by the list's ids: a list in another order (keys and ids
    permuted together) would pair each key with the wrong peer, so it is refused."""

    def reverse(env: Envelope) -> None:
        env.payload.meta["ids"] = env.payload.meta["ids"][::-1]
        env.payload.fields["keys"] = env.payload.fields["keys"][::-1].copy()

    with pytest.raises(ProtocolError, match="garbled key list"):
        make_parties("masked", 3, edit_transmit(TAG_KEYLIST, reverse))


@pytest.mark.parametrize(
    "edit",
    [
        lambda senders: senders[1:],  # the sender itself left out
        lambda senders: [*senders, "c00"],  # the receiver listed as one of its senders
    ],
    ids=["without-sender", "with-receiver"],
)
def test_sender_refuses_a_routed_request_it_is_not_part_of(edit) -> None:
    def tamper(env: Envelope) -> None:
        if env.receiver == "c01" and env.payload.meta["receiver"] == "c00":
            env.payload.meta["senders"] = edit(env.payload.meta["senders"])

    protocol, parties = make_parties("masked", 4)
    jobs = {"c00": simple_jobs(4)["c00"]}
    with pytest.raises(ProtocolError, match="c01: request of 'c00' does not list this client"):
        run_secure_sums(protocol, parties, jobs, edit_transmit(TAG_ROUTED_REQUEST, tamper))


def test_sender_refuses_a_routed_request_of_another_shape() -> None:
    def wider(env: Envelope) -> None:
        env.payload.meta["shape"] = [6, 10]

    protocol, parties = make_parties("masked", 3)
    with pytest.raises(ProtocolError, match=r"has shape \(6, 9\), the request says \(6, 10\)"):
        run_secure_sums(protocol, parties, simple_jobs(3), edit_transmit(TAG_ROUTED_REQUEST, wider))


def test_receiver_refuses_a_delivery_of_another_round() -> None:
    def stale(env: Envelope) -> None:
        env.payload.meta["round"] = 4

    protocol, parties = make_parties("masked", 3)
    with pytest.raises(ProtocolError, match="'secure-sum/delivery' is not for round 5"):
        transmit = edit_transmit(TAG_DELIVERY, stale)
        run_secure_sums(protocol, parties, simple_jobs(3), transmit, round_idx=5)


@pytest.mark.parametrize("fault", ["duplicate", "non-sender"])
def test_server_refuses_a_stray_contribution(fault: str) -> None:
    """c03 is no sender of c00's job: a bundle from it, or a second one from c01, aborts."""

    def inject(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        extra = [e for e in out if e.tag == TAG_CONTRIBUTION and e.sender == "c01"]
        if fault == "non-sender":
            extra = [Envelope("c03", e.receiver, e.tag, e.payload) for e in extra]
        return out + extra

    jobs = {"c00": {k: np.ones((2, 3)) for k in ("c01", "c02")}}
    protocol, parties = make_parties("masked", 4)
    match = "two contributions from 'c01'" if fault == "duplicate" else "from 'c03' to 'c00'"
    with pytest.raises(ProtocolError, match=match):
        run_secure_sums(protocol, parties, jobs, inject)
