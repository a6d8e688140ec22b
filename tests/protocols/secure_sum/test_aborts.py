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
from protocols.secure_sum.parties import TAG_CONTRIBUTION, TAG_DELIVERY
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
