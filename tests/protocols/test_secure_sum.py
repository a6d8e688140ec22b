"""secure_sum: every mode equals the plain sum; masked/ckks transcripts hide every individual
block from the receiver and the server; support, range, dropout and tamper checks abort."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp
import tenseal as ts
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from protocols.base import Envelope, ProtocolError, no_transport
from protocols.crypto.prg import mask_words
from protocols.fixedpoint import FixedPointOverflowError
from protocols.secure_sum import (
    CKKSSum,
    MaskedSum,
    PlainSum,
    SecureSum,
    SumRangeError,
    SumRequest,
    SumTooLargeError,
    Support,
    SupportViolationError,
    run_secure_sums,
    setup_secure_sums,
)
from protocols.secure_sum.ckks import DEFAULT_PARAMS, TAG_CONTEXT, make_keypair_context
from protocols.secure_sum.masked import mask_peers
from protocols.secure_sum.parties import TAG_CONTRIBUTION, TAG_DELIVERY
from protocols.wire import Payload

SERVER = "server"
FRAC_BITS = 32
MODES: dict[str, Callable[[], SecureSum]] = {
    "plain": PlainSum,
    "masked": lambda: MaskedSum("exp-test", frac_bits=FRAC_BITS),
    # Z_2^32 with the finest resolution that fits |entries| <= 1 (2^-24 or finer up to 127)
    "masked32": lambda: MaskedSum("exp-test", word_bits=32, frac_bits=None, value_bound=1.0),
    # receiver masks only (no pairwise masks): the trust of ckks
    "masked-rx": lambda: MaskedSum("exp-test", frac_bits=FRAC_BITS, pair_masks=False),
    "ckks": CKKSSum,
}


class Recorder:
    """A transmit that serializes like the Channel, records, and can tamper with envelopes."""

    def __init__(self, mutate: Callable[[Envelope], Envelope] | None = None) -> None:
        self.log: list[Envelope] = []
        self.mutate = mutate

    def __call__(self, envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        if self.mutate is not None:
            out = [self.mutate(e) for e in out]
        self.log.extend(no_transport(out))  # the transcript keeps its own copy of the bytes
        return out

    def to(self, receiver: str, tag: str | None = None) -> list[Envelope]:
        return [e for e in self.log if e.receiver == receiver and tag in (None, e.tag)]


def _ids(n: int) -> list[str]:
    return [f"c{i:02d}" for i in range(n)]


def no_transport_payload(payload: Payload) -> Payload:
    return Payload.from_bytes(payload.to_bytes())


def _dense(block) -> np.ndarray:
    return block.toarray() if sp.issparse(block) else np.asarray(block, dtype=np.float64)


def _parties(mode: str, n: int, transmit=no_transport):
    protocol = MODES[mode]()
    parties = protocol.create_parties(SERVER, _ids(n))
    setup_secure_sums(protocol, parties, transmit)
    return protocol, parties


def _run(mode: str, n: int, jobs, transmit=no_transport, round_idx=0, **kwargs):
    protocol, parties = _parties(mode, n)
    return run_secure_sums(protocol, parties, jobs, transmit, round_idx=round_idx, **kwargs)


def _tolerance(mode: str, n_senders: int) -> float:
    if mode == "plain":
        return 1e-12
    if mode.startswith("masked"):  # round-to-nearest: 2^-(f+1) per summand
        frac_bits = 24 if mode == "masked32" else FRAC_BITS
        return n_senders * 2.0 ** -(frac_bits + 1) + 1e-12
    return 1e-6


def _random_block(rng: np.random.Generator, shape: tuple[int, int], sparse: bool):
    if sparse:
        fmt = str(rng.choice(["csr", "csc", "coo"]))
        block = sp.random_array(shape, density=float(rng.uniform(0, 0.7)), format=fmt, rng=rng)
        return sp.csr_matrix(block) if rng.random() < 0.3 else block  # spmatrix too
    return rng.uniform(-1, 1, shape) * (rng.random(shape) < 0.6)


def _simple_jobs(n: int, shape=(6, 9), seed=0, sparse=False):
    """Every client is the receiver of a sum over all the others (FedStruct's pattern)."""
    rng = np.random.default_rng(seed)
    return {r: {k: _random_block(rng, shape, sparse) for k in _ids(n) if k != r} for r in _ids(n)}


# ------------------------------------------------------------------------------ correctness


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(n=st.integers(2, 8), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_every_mode_equals_the_plain_sum(n, seed, data) -> None:
    ids = _ids(n)
    rng = np.random.default_rng(seed)
    receivers = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=n, unique=True))
    jobs, supports = {}, {}
    for r in receivers:
        others = [c for c in ids if c != r]
        senders = data.draw(st.lists(st.sampled_from(others), min_size=1, unique=True))
        members = senders + ([r] if data.draw(st.booleans()) else [])  # r: local term
        shape = (data.draw(st.integers(1, 6)), data.draw(st.integers(1, 9)))
        kind = data.draw(st.sampled_from(["dense", "sparse", "mixed"]))
        jobs[r] = {
            k: _random_block(rng, shape, kind == "sparse" or (kind == "mixed" and i % 2 == 0))
            for i, k in enumerate(members)
        }
        where = data.draw(st.sampled_from(["dense", "rows", "union"]))
        event(f"{kind} blocks, {where} support")
        if where == "rows":
            rows = np.flatnonzero(sum(np.abs(_dense(b)).sum(axis=1) for b in jobs[r].values()))
            supports[r] = Support.product(shape, rows=rows)
        elif where == "union":
            supports[r] = Support.union_of(jobs[r].values())
    for mode in MODES:
        results = _run(mode, n, jobs, supports=supports, round_idx=seed % 1000)
        assert set(results) == set(receivers)
        for r, blocks in jobs.items():
            res = results[r]
            expected = sum(_dense(b) for b in blocks.values())
            assert res.receiver == r and res.includes_local == (r in blocks)
            assert res.senders == tuple(k for k in blocks if k != r)
            assert sp.issparse(res.total) == all(sp.issparse(b) for b in blocks.values())
            np.testing.assert_allclose(
                _dense(res.total), expected, rtol=0, atol=_tolerance(mode, len(res.senders))
            )


def test_ckks_error_with_20_senders_values_in_unit_interval() -> None:
    n, d = 21, 5000  # 3 ciphertexts per block
    rng = np.random.default_rng(7)
    jobs = {"c00": {k: rng.uniform(0, 1, (1, d)) for k in _ids(n)[1:]}}
    expected = sum(jobs["c00"].values())
    total = _run("ckks", n, jobs)["c00"].total
    err = float(np.abs(total - expected).max())
    assert err < 2e-7  # measured ~3e-8 (scale 2^40, rounded to 2^-24)


def test_sparse_blocks_give_csr_and_zeros_stay_exact() -> None:
    jobs = _simple_jobs(4, shape=(20, 30), seed=3, sparse=True)
    for mode in MODES:
        for r, res in _run(mode, 4, jobs).items():
            assert isinstance(res.total, sp.csr_array)
            expected = sum(_dense(b) for b in jobs[r].values())
            # entries that are zero in every block come back as exact zeros (no CKKS noise)
            assert not np.any(_dense(res.total)[expected == 0]), mode


def test_local_only_job_sends_nothing() -> None:
    local = np.arange(6.0).reshape(2, 3)
    for mode in MODES:
        rec = Recorder()
        protocol, parties = _parties(mode, 3)
        res = run_secure_sums(protocol, parties, {"c01": {"c01": local}}, rec, round_idx=1)
        assert rec.log == []
        np.testing.assert_array_equal(res["c01"].total, local)
        assert res["c01"].senders == () and res["c01"].includes_local


def test_several_rounds_reuse_setup_but_not_round_idx() -> None:
    for mode in MODES:
        protocol, parties = _parties(mode, 3)
        for r in range(2):
            jobs = _simple_jobs(3, seed=r)
            out = run_secure_sums(protocol, parties, jobs, round_idx=r)
            for rec, res in out.items():
                expected = sum(jobs[rec].values())
                np.testing.assert_allclose(res.total, expected, atol=_tolerance(mode, 2))
        with pytest.raises(ProtocolError, match="already used"):
            run_secure_sums(protocol, parties, _simple_jobs(3), round_idx=1)


# ------------------------------------------------------------------------------ what leaks


def _leaks(env: Envelope, block, codec) -> bool:
    """Does ``env`` carry ``block``'s non-zero values in the clear, as fixed-point words or
    as raw float64 bytes inside a blob?"""
    nz = np.unique(_dense(block)[_dense(block) != 0])
    if nz.size == 0:
        return False
    words = codec.encode(nz)
    for value in env.payload.fields.values():
        if isinstance(value, bytes):
            probes = nz[:20]
            if sum(p.tobytes() in value for p in probes) >= max(1, probes.size // 2):
                return True
        elif value.dtype.kind == "f":
            if np.isin(nz, value).mean() > 0.5:
                return True
        elif (
            value.dtype.kind in "iu"
            and value.dtype.itemsize == words.itemsize
            and np.isin(words, value.view(words.dtype).reshape(-1)).mean() > 0.5
        ):
            return True
    return False


def _transcript_jobs(n: int) -> tuple[dict, dict]:
    """Dense jobs, sparse jobs on a public union support, and one job with a local term."""
    rng = np.random.default_rng(11)
    jobs: dict = {}
    supports: dict = {}
    for i, r in enumerate(_ids(n)):
        senders = [k for k in _ids(n) if k != r]
        if i % 2:
            jobs[r] = {k: _random_block(rng, (15, 40), True) for k in senders}
            supports[r] = Support.union_of(jobs[r].values())
        else:
            jobs[r] = {k: _random_block(rng, (7, 11), False) for k in [*senders, r]}
    return jobs, supports


def _individual_leaks(mode: str) -> tuple[list[tuple[str, str, str]], Recorder, dict]:
    n = 4
    jobs, supports = _transcript_jobs(n)
    protocol, parties = _parties(mode, n)
    rec = Recorder()
    results = run_secure_sums(protocol, parties, jobs, rec, supports=supports, round_idx=3)
    codec = MODES["masked32" if mode == "masked32" else "masked"]().codec_for(n)
    found = []
    for env in rec.log:
        for r, blocks in jobs.items():
            for k, block in blocks.items():
                if k != r and env.receiver in (r, SERVER) and _leaks(env, block, codec):
                    found.append((env.tag, env.receiver, f"B[{k}->{r}]"))
    for r, res in results.items():  # and the sums are right
        expected = sum(_dense(b) for b in jobs[r].values())
        np.testing.assert_allclose(_dense(res.total), expected, atol=_tolerance(mode, n))
    return found, rec, jobs


def test_detector_sees_every_block_in_plain_mode() -> None:
    """The baseline (and a check that the detector below can fire)."""
    found, _, jobs = _individual_leaks("plain")
    n_blocks = sum(len([k for k in b if k != r]) for r, b in jobs.items())
    assert {x[2] for x in found if x[1] == SERVER} == {
        f"B[{k}->{r}]" for r, b in jobs.items() for k in b if k != r
    }
    assert len({x[2] for x in found if x[1] != SERVER}) == n_blocks


@pytest.mark.parametrize("mode", ["masked", "masked32", "masked-rx", "ckks"])
def test_no_individual_block_reaches_receiver_or_server(mode: str) -> None:
    found, rec, jobs = _individual_leaks(mode)
    assert found == []
    for r, blocks in jobs.items():
        deliveries = rec.to(r, TAG_DELIVERY)
        assert len(deliveries) == 1  # ONE aggregate per job, never the individual blocks
        assert deliveries[0].payload.meta["senders"] == [k for k in blocks if k != r]
    for env in rec.log:  # no plaintext floats anywhere in the round
        for value in env.payload.fields.values():
            assert isinstance(value, bytes) or value.dtype.kind != "f", (env.tag, env.receiver)
        if mode.startswith("masked") and env.tag in (TAG_CONTRIBUTION, TAG_DELIVERY):
            word = np.uint32 if mode == "masked32" else np.uint64
            assert all(v.dtype == word for v in env.payload.fields.values())
        if mode == "ckks" and env.tag in (TAG_CONTRIBUTION, TAG_DELIVERY):
            assert set(env.payload.fields) == {"ct", "ct_len"}


def test_masked_server_cannot_sum_the_relayed_vectors() -> None:
    """Without the receiver's masks the server could add the masked vectors itself."""
    n = 4
    jobs = {"c00": {k: np.full((3, 5), 0.25) for k in _ids(n)[1:]}}
    protocol, parties = _parties("masked", n)
    rec = Recorder()
    run_secure_sums(protocol, parties, jobs, rec)
    ys = [e.payload.array("y") for e in rec.to(SERVER, TAG_CONTRIBUTION)]
    assert len(ys) == 3
    codec = protocol.codec_for(n)
    server_sum = codec.decode(np.sum(ys, axis=0, dtype=np.uint64))
    assert np.abs(server_sum - 0.75).min() > 1.0  # the sum stays masked (uniform words)
    # three identical blocks, yet the masked vectors share no word
    assert len(np.unique(np.concatenate(ys))) == 45


@pytest.mark.parametrize(("mode", "unmasked"), [("masked", False), ("masked-rx", True)])
def test_server_colluding_with_the_receiver(mode: str, unmasked: bool) -> None:
    """The server and the receiver pool what they hold: the relayed vectors and the
    receiver's seeds. Receiver masks alone then unmask every block (the documented limit
    of ``pair_masks=False``, as of ckks); the pairwise masks keep each block hidden."""
    n = 5
    rng = np.random.default_rng(4)
    jobs = {"c00": {k: rng.uniform(-1, 1, (3, 4)) for k in _ids(n)[1:]}}
    protocol, parties = _parties(mode, n)
    rec = Recorder()
    run_secure_sums(protocol, parties, jobs, rec, round_idx=7)
    codec, receiver = protocol.codec_for(n), parties.clients["c00"]
    for env in rec.to(SERVER, TAG_CONTRIBUTION):
        y = env.payload.array("y").copy()
        seed = receiver._seed(env.sender, "receiver-mask", "c00", env.sender)
        y -= mask_words(seed, y.size)  # mod 2^64
        recovered = codec.decode(y).reshape(3, 4)
        block = jobs["c00"][env.sender]
        assert np.allclose(recovered, block, atol=1e-9) == unmasked
        assert not np.allclose(codec.decode(env.payload.array("y")).reshape(3, 4), block)


def test_pair_masks_off_is_one_stream_per_sender_and_no_threshold() -> None:
    assert mask_peers("c00", _ids(6), None, pair_masks=False) == []
    with pytest.raises(ValueError, match="pair masks"):
        MaskedSum("exp", collusion_threshold=1, pair_masks=False)
    with pytest.raises(ValueError, match="bool"):
        MaskedSum("exp", pair_masks="no")  # type: ignore[arg-type]


def test_masked_pair_stream_masks_each_shared_job_with_its_own_segment() -> None:
    """One pair stream per round is cut into the jobs both senders share: the two ends cut
    it identically (opposite signs) and no keystream word masks two jobs."""
    n = 4
    _, parties = _parties("masked", n)
    a, b = _ids(n)[2], _ids(n)[3]
    requests = {r: SumRequest((a, b), (2, 3 + i)) for i, r in enumerate(_ids(n)[:2])}
    for party in (parties.clients[a], parties.clients[b]):
        party.begin_round(7)
        party._start_encoding(requests)
    seg = {}
    for who, peer in ((a, b), (b, a)):
        for r in requests:
            s = parties.clients[who]._pair_masks[peer, r]
            words = np.zeros(requests[r].length, np.uint64)
            s.stream.add_to(words, +1, s.offset)
            seg[who, r] = (words, s.add)
    for r in requests:
        (mask_a, add_a), (mask_b, add_b) = seg[a, r], seg[b, r]
        assert np.array_equal(mask_a, mask_b) and add_a != add_b
        assert mask_a.size == requests[r].length
    words = np.concatenate([seg[a, r][0] for r in requests])
    assert np.unique(words).size == words.size == 6 + 8
    s0 = parties.clients[a]._pair_masks[b, _ids(n)[0]]  # the segments tile one stream
    assert s0.offset == 0
    assert np.array_equal(words, mask_words(s0.stream._seed, 14))


def test_plain_sparse_blocks_travel_as_coo() -> None:
    jobs = _simple_jobs(3, shape=(50, 80), seed=5, sparse=True)
    rec = Recorder()
    _run("plain", 3, jobs, rec)
    for env in rec.log:
        if env.tag in (TAG_CONTRIBUTION, TAG_DELIVERY):
            r = env.payload.meta["receiver"]
            k = env.sender if env.tag == TAG_CONTRIBUTION else env.payload.meta["sender"]
            nnz = sp.coo_array(jobs[r][k]).nnz
            assert set(env.payload.fields) == {"row", "col", "data"}
            assert all(v.size == nnz for v in env.payload.fields.values())
    assert len(rec.to("c00", TAG_DELIVERY)) == 2  # one per sender


def test_ckks_secret_keys_stay_with_their_receivers() -> None:
    rec = Recorder()
    protocol, parties = _parties("ckks", 4, rec)
    assert len(parties.server.contexts) == 4
    assert not any(ctx.is_private() for ctx in parties.server.contexts.values())
    for cid, client in parties.clients.items():
        assert client.own_context is not None and client.own_context.is_private()
        assert set(client.peer_contexts) == set(_ids(4)) - {cid}
        assert not any(ctx.is_private() for ctx in client.peer_contexts.values())
    for env in rec.log:  # everything on the setup transcript is public-only
        for blob in env.payload.fields.values():
            assert isinstance(blob, bytes)
            ctx = ts.context_from(blob)
            assert not ctx.is_private() and ctx.has_public_key() and not ctx.has_galois_keys()
    run_secure_sums(protocol, parties, _simple_jobs(4))  # and rounds keep it that way
    assert not any(ctx.is_private() for ctx in parties.server.contexts.values())


def test_server_refuses_a_published_secret_key() -> None:
    def leak_secret(env: Envelope) -> Envelope:
        if env.tag != TAG_CONTEXT:
            return env
        blob = make_keypair_context(DEFAULT_PARAMS).serialize(save_secret_key=True)
        return Envelope(env.sender, env.receiver, env.tag, Payload({"context": blob}, {}))

    with pytest.raises(ProtocolError, match="secret key"):
        _parties("ckks", 3, Recorder(leak_secret))


@pytest.mark.parametrize("mode", ["masked", "ckks"])
@pytest.mark.parametrize("fault", ["missing", "duplicate", "malformed"])
def test_server_aborts_a_faulty_key_setup(mode: str, fault: str) -> None:
    """Set-up keys (masked) and public contexts (ckks): one per client, each well formed."""

    def faulty(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        to_server = [e for e in out if e.receiver == SERVER and e.sender == "c01"]
        if not to_server:
            return out
        if fault == "missing":
            return [e for e in out if e not in to_server]
        if fault == "duplicate":
            return out + to_server
        env = to_server[0]
        bad = Envelope(env.sender, env.receiver, env.tag, Payload({"other": b"x"}, {}))
        return [bad if e is env else e for e in out]

    expected = {"missing": "no public", "duplicate": "unexpected", "malformed": "malformed"}
    with pytest.raises(ProtocolError, match=expected[fault]):
        _parties(mode, 3, faulty)


# ---------------------------------------------------------------------------------- aborts


@pytest.mark.parametrize("mode", list(MODES))
def test_support_violation(mode: str) -> None:
    block = np.zeros((4, 5))
    block[0, 1] = block[2, 3] = 0.5
    jobs = {"c00": {"c01": block, "c02": sp.csr_array(block)}}
    ok = {"c00": Support.product((4, 5), rows=[0, 2])}
    res = _run(mode, 3, jobs, supports=ok)["c00"]
    np.testing.assert_allclose(res.total, 2 * block, atol=1e-6)
    for bad in (Support.product((4, 5), rows=[0]), Support.pattern((4, 5), [1, 2, 3])):
        with pytest.raises(SupportViolationError, match="outside the public support"):
            _run(mode, 3, jobs, supports={"c00": bad})


def test_masked_overflow_is_refused_before_sending() -> None:
    protocol = MaskedSum("exp", value_bound=1.0)
    parties = protocol.create_parties(SERVER, _ids(3))
    setup_secure_sums(protocol, parties)
    jobs = {"c00": {"c01": np.full((2, 2), 0.5), "c02": np.full((2, 2), 1.5)}}
    rec = Recorder()
    with pytest.raises(FixedPointOverflowError, match="exceeds the fixed-point bound"):
        run_secure_sums(protocol, parties, jobs, rec)
    assert rec.log == []
    # the default bound is the whole headroom: 2^(63 - frac_bits) / n_clients
    big = {"c00": {"c01": np.full((2, 2), 2.0**30), "c02": np.full((2, 2), 2.0**30)}}
    with pytest.raises(OverflowError):
        _run("masked", 3, big)
    with pytest.raises(FixedPointOverflowError, match="headroom"):
        MaskedSum("exp", frac_bits=60, value_bound=10.0).create_parties(SERVER, _ids(8))


def test_ckks_range_is_refused_before_sending() -> None:
    jobs = {"c00": {"c01": np.full((2, 2), 1e5), "c02": np.zeros((2, 2))}}
    with pytest.raises(SumRangeError, match="CKKS bound"):
        _run("ckks", 3, jobs)


@pytest.mark.parametrize("mode", list(MODES))
def test_dropped_sender_aborts(mode: str) -> None:
    protocol, parties = _parties(mode, 4)
    with pytest.raises(ProtocolError, match=r"senders \['c02'\].*did not contribute"):
        run_secure_sums(protocol, parties, _simple_jobs(4), dropped={"c02": "contribute"})


@pytest.mark.parametrize("mode", list(MODES))
def test_dropped_receiver_aborts(mode: str) -> None:
    protocol, parties = _parties(mode, 3)
    with pytest.raises(ProtocolError, match=r"receivers \['c01'\] did not request"):
        run_secure_sums(protocol, parties, _simple_jobs(3), dropped={"c01": "announce"})


def _replace(field: str, make: Callable[[object], object], tag: str = TAG_CONTRIBUTION):
    def mutate(env: Envelope) -> Envelope:
        if env.tag != tag:
            return env
        fields = dict(env.payload.fields)
        fields[field] = make(fields[field])
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
    protocol, parties = _parties("masked", 3)
    with pytest.raises(ProtocolError, match=match):
        run_secure_sums(protocol, parties, _simple_jobs(3), Recorder(_replace(field, make, tag)))


def test_masked32_sums_in_uint32_words_and_checks_their_width_and_range() -> None:
    protocol, parties = _parties("masked32", 3)
    assert protocol.codec_for(3).frac_bits == 29  # 3 x 2^29 < 2^31: the finest that fits
    wide = _replace("y", lambda y: y.astype(np.uint64))
    with pytest.raises(ProtocolError, match="garbled masked block.*uint32"):
        run_secure_sums(protocol, parties, _simple_jobs(3), Recorder(wide))
    jobs = {"c00": {"c01": np.full((2, 2), 0.5), "c02": np.full((2, 2), 1.5)}}
    with pytest.raises(FixedPointOverflowError, match="exceeds the fixed-point bound 1"):
        _run("masked32", 3, jobs)
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
    protocol, parties = _parties("ckks", 3)
    jobs = _simple_jobs(3, shape=(50, 100))  # 5000 values: 3 ciphertexts
    with pytest.raises(ProtocolError, match="garbled ciphertext"):
        run_secure_sums(protocol, parties, jobs, Recorder(_replace(field, make, tag)))


def test_min_senders_refuses_a_single_sender_sum() -> None:
    protocol = MaskedSum("exp", min_senders=2)
    parties = protocol.create_parties(SERVER, _ids(3))
    setup_secure_sums(protocol, parties)
    with pytest.raises(ProtocolError, match="min_senders=2"):
        run_secure_sums(protocol, parties, {"c00": {"c01": np.ones((2, 2))}})


@pytest.mark.parametrize(
    ("make", "per_value"),
    [
        (lambda **kw: PlainSum(**kw), 8),
        (lambda **kw: MaskedSum("exp", frac_bits=FRAC_BITS, **kw), 8),
        (lambda **kw: MaskedSum("exp", word_bits=32, frac_bits=None, value_bound=1.0, **kw), 4),
        (lambda **kw: CKKSSum(**kw), 32),
    ],
)
def test_server_refuses_a_round_over_max_round_bytes(make, per_value) -> None:
    """Admission: 3 jobs x 3 senders x 6 values = 54 values; the limit is checked on the
    public sizes when the server routes the requests, before any value is encoded."""
    jobs = {r: {k: np.ones((2, 3)) for k in _ids(4) if k != r} for r in _ids(4)[:3]}
    size = 54 * per_value
    assert make().bytes_per_value(4) == per_value
    for limit, fits in ((size, True), (size - 1, False)):
        protocol = make(max_round_bytes=limit)
        parties = protocol.create_parties(SERVER, _ids(4))
        setup_secure_sums(protocol, parties, no_transport)
        rec = Recorder()
        if fits:
            results = run_secure_sums(protocol, parties, jobs, rec)
            np.testing.assert_allclose(_dense(results["c00"].total), 3.0, atol=1e-6)
        else:
            with pytest.raises(SumTooLargeError, match="54 values"):
                run_secure_sums(protocol, parties, jobs, rec)
            assert not [e for e in rec.log if e.tag == TAG_CONTRIBUTION]
    with pytest.raises(ValueError, match="max_round_bytes"):
        make(max_round_bytes=0)


def test_round_without_setup_fails() -> None:
    for mode in ("masked", "ckks"):
        protocol = MODES[mode]()
        parties = protocol.create_parties(SERVER, _ids(3))
        with pytest.raises(ProtocolError, match="run setup_secure_sums first"):
            run_secure_sums(protocol, parties, _simple_jobs(3))


# ------------------------------------------------------------------------------- job specs


@settings(max_examples=80, deadline=None)
@given(
    shape=st.one_of(
        st.tuples(st.integers(0, 50), st.sampled_from([1, 7, 300, 70_000])),
        st.tuples(st.integers(1, 5), st.integers(1, 9), st.sampled_from([3, 300])),
        st.tuples(st.sampled_from([1, 40, 5_000])),
    ),
    data=st.data(),
)
def test_support_patterns_round_trip_in_their_smallest_encoding(shape, data) -> None:
    """Any pattern survives the wire in whichever encoding is smaller (flat or bitmap), and
    the message is never larger than the flat int64 indices."""
    total = math.prod(shape)
    flat = data.draw(st.lists(st.integers(0, max(total - 1, 0)), max_size=300, unique=True))
    support = Support.pattern(shape, flat if total else [])
    fields = support.to_fields()
    assert sum(v.nbytes for v in fields.values()) <= 8 * len(support.index)
    back = Support.from_fields(shape, no_transport_payload(Payload(fields, {})))
    assert back == support


def test_pattern_indices_travel_in_the_narrowest_unsigned_dtype() -> None:
    for shape, dtype in (
        ((10, 20), np.uint8),
        ((2_708, 2_708), np.uint32),
        ((10**5, 10**5), np.int64),
    ):
        support = Support.pattern(shape, np.arange(0, math.prod(shape), math.prod(shape) // 5))
        fields = support.to_fields()
        assert fields["support_flat"].dtype == dtype
        back = Support.from_fields(shape, no_transport_payload(Payload(fields, {})))
        assert back == support and back.index.dtype == np.int64


def test_malformed_pattern_supports_are_refused() -> None:
    flat = np.arange(70_000, 70_460, 20, dtype=np.int64)
    bads = (flat[::-1].copy(), np.append(flat, 700_000), flat - 70_001, flat.astype(np.int32))
    for bad in (*bads, flat.astype(np.uint64), np.append(flat, 700_000).astype(np.uint32)):
        with pytest.raises(ProtocolError, match="malformed support"):
            Support.from_fields((10, 70_000), Payload({"support_flat": bad}, {}))


def test_support_constructors_and_validation() -> None:
    s = Support.product((3, 4), rows=[2, 0])
    np.testing.assert_array_equal(s.index, [0, 1, 2, 3, 8, 9, 10, 11])
    assert s == Support.pattern((3, 4), [11, 10, 9, 8, 3, 2, 1, 0, 0])
    assert s.size == 8 and set(s.to_fields()) == {"support_rows", "support_cols"}
    u = Support.union_of([sp.csr_array(np.eye(3)), np.diag([0, 0, 1.0], k=0)[::-1]])
    np.testing.assert_array_equal(u.index, [0, 2, 4, 8])
    for support in (s, u, Support.pattern((30, 40), [5, 77, 1199])):  # product/bitmap/flat
        req = SumRequest(("c01", "c02"), support.shape, support, sparse_result=True)
        back = SumRequest.from_payload(no_transport_payload(req.to_payload(4, "c00")), "test")
        assert back == req and back.support == support
    assert (
        "support_bitmap" in u.to_fields()
        and "support_flat" in Support.pattern((30, 40), [5]).to_fields()
    )
    with pytest.raises(ValueError, match="out of range"):
        Support.pattern((3, 4), [12])
    with pytest.raises(ValueError, match="2-D"):
        Support.product((3, 4, 5))
    with pytest.raises(ValueError, match="support shape"):
        SumRequest(("c01",), (4, 3), s)
    with pytest.raises(ValueError, match="distinct"):
        SumRequest(("c01", "c01"), (3, 4))


def test_bad_jobs_rejected_locally() -> None:
    protocol, parties = _parties("plain", 3)
    with pytest.raises(ValueError, match="differ in shape"):
        run_secure_sums(protocol, parties, {"c00": {"c01": np.ones((2, 2)), "c02": np.ones(3)}})
    with pytest.raises(ValueError, match="NaN"):
        run_secure_sums(protocol, parties, {"c00": {"c01": np.full((2, 2), np.nan)}}, round_idx=1)
    with pytest.raises(ValueError, match="unknown"):
        run_secure_sums(protocol, parties, {"c00": {"zz": np.ones(2)}}, round_idx=2)


# ------------------------------------------------------------------------------ mask graph


def _components(nodes: list[str], edges: set[frozenset[str]]) -> int:
    parent = {v: v for v in nodes}

    def root(v: str) -> str:
        while parent[v] != v:
            v = parent[v]
        return v

    for e in edges:
        a, b = tuple(e)
        if a in parent and b in parent:
            parent[root(a)] = root(b)
    return len({root(v) for v in nodes})


@settings(max_examples=60, deadline=None)
@given(m=st.integers(2, 24), t=st.integers(1, 8), data=st.data())
def test_mask_graph_survives_any_t_colluding_senders(m, t, data) -> None:
    """The circulant mask graph is symmetric, has 2h = 2*ceil((t+1)/2) peers per sender (or
    is complete), and removing ANY t senders leaves the honest ones connected."""
    senders = data.draw(st.permutations(_ids(m)))  # the job's public order
    peers = {v: mask_peers(v, senders, t) for v in senders}
    h = (t + 2) // 2
    for v, ps in peers.items():
        assert v not in ps and len(set(ps)) == len(ps)
        assert len(ps) == (m - 1 if 2 * h >= m - 1 else 2 * h)
        assert all(v in peers[u] for u in ps)
    edges = {frozenset((v, u)) for v, ps in peers.items() for u in ps}
    corrupt = data.draw(st.lists(st.sampled_from(senders), max_size=t, unique=True))
    honest = [v for v in senders if v not in corrupt]
    if honest:
        assert _components(honest, edges) == 1
    assert mask_peers(senders[0], senders, None) == list(senders[1:])


def test_mask_graph_threshold_is_not_more_than_advertised() -> None:
    """With more than 2h - 1 corrupt senders the circulant can split: the docstring's
    bound is tight (corrupting both neighbours of a sender on a ring isolates it)."""
    senders = _ids(8)
    edges = {frozenset((v, u)) for v in senders for u in mask_peers(v, senders, 1)}
    honest = [v for v in senders if v not in ("c01", "c03")]
    assert _components(honest, edges) == 2  # c02 is cut off


@pytest.mark.parametrize("t", [1, 2, 5])
def test_masked_sum_with_a_collusion_threshold_is_exact_and_fewer_masks(t) -> None:
    n = 12
    jobs = _simple_jobs(n, shape=(4, 7), seed=t, sparse=True)
    supports = {r: Support.union_of(b.values()) for r, b in jobs.items()}
    protocol = MaskedSum("exp-t", frac_bits=FRAC_BITS, collusion_threshold=t)
    parties = protocol.create_parties(SERVER, _ids(n))
    setup_secure_sums(protocol, parties, no_transport)
    results = run_secure_sums(protocol, parties, jobs, no_transport, supports=supports)
    for r, blocks in jobs.items():
        expected = sum(_dense(b) for b in blocks.values())
        np.testing.assert_allclose(
            _dense(results[r].total), expected, rtol=0, atol=_tolerance("masked", n - 1)
        )
    # each sender masked each job with 2h peers, not all n - 2 co-senders
    client = parties.clients["c00"]
    assert client.collusion_threshold == t
    h = (t + 2) // 2
    assert len(mask_peers("c00", list(jobs["c01"]), t)) == min(2 * h, n - 2)
    with pytest.raises(ValueError, match="collusion_threshold"):
        MaskedSum("exp", collusion_threshold=0)
