"""What the receiver and the server see: no individual block under masked or ckks sums."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import tenseal as ts

from protocols.base import Envelope, ProtocolError, no_transport
from protocols.bundles import unbundle
from protocols.crypto.prg import mask_words
from protocols.secure_sum import (
    MaskedSum,
    SumRequest,
    Support,
    run_secure_sums,
)
from protocols.secure_sum.ckks import DEFAULT_PARAMS, TAG_CONTEXT, make_keypair_context
from protocols.secure_sum.masked import mask_peers
from protocols.secure_sum.parties import TAG_CONTRIBUTION, TAG_DELIVERY
from protocols.wire import Payload
from tests.protocols.secure_sum.helpers import (
    MODES,
    SERVER,
    Recorder,
    as_dense,
    client_ids,
    make_parties,
    random_block,
    run_mode,
    simple_jobs,
    tolerance_for,
)


def _leaks(env: Envelope, block, codec) -> bool:
    """Does ``env`` carry ``block``'s non-zero values in the clear, as fixed-point words or
    as raw float64 bytes inside a blob?"""
    nz = np.unique(as_dense(block)[as_dense(block) != 0])
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
    for i, r in enumerate(client_ids(n)):
        senders = [k for k in client_ids(n) if k != r]
        if i % 2:
            jobs[r] = {k: random_block(rng, (15, 40), True) for k in senders}
            supports[r] = Support.union_of(jobs[r].values())
        else:
            jobs[r] = {k: random_block(rng, (7, 11), False) for k in [*senders, r]}
    return jobs, supports


def _individual_leaks(mode: str) -> tuple[list[tuple[str, str, str]], Recorder, dict]:
    n = 4
    jobs, supports = _transcript_jobs(n)
    protocol, parties = make_parties(mode, n)
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
        expected = sum(as_dense(b) for b in jobs[r].values())
        np.testing.assert_allclose(as_dense(res.total), expected, atol=tolerance_for(mode, n))
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
    for env in rec.parts:  # no plaintext floats anywhere in the round
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
    jobs = {"c00": {k: np.full((3, 5), 0.25) for k in client_ids(n)[1:]}}
    protocol, parties = make_parties("masked", n)
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
    jobs = {"c00": {k: rng.uniform(-1, 1, (3, 4)) for k in client_ids(n)[1:]}}
    protocol, parties = make_parties(mode, n)
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
    assert mask_peers("c00", client_ids(6), None, pair_masks=False) == []
    with pytest.raises(ValueError, match="pair masks"):
        MaskedSum("exp", collusion_threshold=1, pair_masks=False)
    with pytest.raises(ValueError, match="bool"):
        MaskedSum("exp", pair_masks="no")  # type: ignore[arg-type]


def test_masked_pair_stream_masks_each_shared_job_with_its_own_segment() -> None:
    """One pair stream per round is cut into the jobs both senders share: the two ends cut
    it identically (opposite signs) and no keystream word masks two jobs."""
    n = 4
    _, parties = make_parties("masked", n)
    a, b = client_ids(n)[2], client_ids(n)[3]
    requests = {r: SumRequest((a, b), (2, 3 + i)) for i, r in enumerate(client_ids(n)[:2])}
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
    s0 = parties.clients[a]._pair_masks[b, client_ids(n)[0]]  # the segments tile one stream
    assert s0.offset == 0
    assert np.array_equal(words, mask_words(s0.stream._seed, 14))


def test_plain_sparse_blocks_travel_as_coo() -> None:
    jobs = simple_jobs(3, shape=(50, 80), seed=5, sparse=True)
    rec = Recorder()
    run_mode("plain", 3, jobs, rec)
    sent = [(env.sender, r, part) for env in rec.log if env.tag == TAG_CONTRIBUTION
            for r, part in unbundle(env.payload, "test").items()]  # fmt: skip
    delivered = [(env.payload.meta["sender"], env.receiver, env.payload) for env in rec.log
                 if env.tag == TAG_DELIVERY]  # fmt: skip
    for k, r, payload in sent + delivered:
        nnz = sp.coo_array(jobs[r][k]).nnz
        assert set(payload.fields) == {"row", "col", "data"}
        assert all(v.size == nnz for v in payload.fields.values())
    assert len(rec.to("c00", TAG_DELIVERY)) == 2  # one per sender


def test_ckks_secret_keys_stay_with_their_receivers() -> None:
    rec = Recorder()
    protocol, parties = make_parties("ckks", 4, rec)
    assert len(parties.server.contexts) == 4
    assert not any(ctx.is_private() for ctx in parties.server.contexts.values())
    for cid, client in parties.clients.items():
        assert client.own_context is not None and client.own_context.is_private()
        assert set(client.peer_contexts) == set(client_ids(4)) - {cid}
        assert not any(ctx.is_private() for ctx in client.peer_contexts.values())
    for env in rec.log:  # everything on the setup transcript is public-only
        for blob in env.payload.fields.values():
            assert isinstance(blob, bytes)
            ctx = ts.context_from(blob)
            assert not ctx.is_private() and ctx.has_public_key() and not ctx.has_galois_keys()
    run_secure_sums(protocol, parties, simple_jobs(4))  # and rounds keep it that way
    assert not any(ctx.is_private() for ctx in parties.server.contexts.values())


def test_server_refuses_a_published_secret_key() -> None:
    def leak_secret(env: Envelope) -> Envelope:
        if env.tag != TAG_CONTEXT:
            return env
        blob = make_keypair_context(DEFAULT_PARAMS).serialize(save_secret_key=True)
        return Envelope(env.sender, env.receiver, env.tag, Payload({"context": blob}, {}))

    with pytest.raises(ProtocolError, match="secret key"):
        make_parties("ckks", 3, Recorder(leak_secret))


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
        make_parties(mode, 3, faulty)


# ---------------------------------------------------------------------------------- aborts


def test_masked_vectors_of_a_repeated_block_are_fresh_each_round() -> None:
    """The same blocks in two rounds: if the masks repeated, the server would learn every
    block's change (y_1 - y_0 = enc(B_1) - enc(B_0)), here zero in every word."""
    n = 4
    jobs = {"c00": {k: np.full((2, 3), 0.5) for k in client_ids(n)[1:]}}
    protocol, parties = make_parties("masked", n)
    ys = []
    for r in (0, 1):
        rec = Recorder()
        run_secure_sums(protocol, parties, jobs, rec, round_idx=r)
        ys.append({e.sender: e.payload.array("y") for e in rec.to(SERVER, TAG_CONTRIBUTION)})
    for k in jobs["c00"]:
        assert not np.any(ys[0][k] == ys[1][k]), k


def test_mask_seeds_are_bound_to_experiment_round_purpose_receiver_and_pair() -> None:
    _, parties = make_parties("masked", 3)
    client = parties.clients["c01"]

    def seeds() -> list[bytes]:
        return [client._seed("c02", "receiver-mask", "c02", "c01"),
                client._seed("c02", "pair-stream", "c02", "c01"),
                client._seed("c02", "receiver-mask", "c00", "c01"),
                client._seed("c02", "receiver-mask", "c02", "c00")]  # fmt: skip

    client.begin_round(0)
    got = seeds()
    client.begin_round(1)
    got += seeds()
    client.experiment_id = "exp-other"
    got += seeds()
    assert len(set(got)) == len(got) == 12
