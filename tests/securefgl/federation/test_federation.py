"""Channel, transcript and executor: every byte is counted and every receiver gets a copy."""

import numpy as np
import pytest

from protocols import Envelope, Payload, PlainAggregation, Role, aggregate
from securefgl.federation import (
    Call,
    Channel,
    LocalExecutor,
    Party,
    PartyError,
    ProtocolHost,
    Target,
    Transcript,
)


def _envelopes(rng, n=5):
    return [
        Envelope(
            f"client-{i}",
            "server",
            "update",
            Payload(
                {
                    "v": rng.normal(size=rng.integers(1, 50)).astype(np.float32),
                    "b": rng.bytes(int(rng.integers(0, 9))),
                },
                {"i": i},
            ),
        )
        for i in range(n)
    ]


def test_transcript_byte_counts_equal_serialized_sizes():
    rng = np.random.default_rng(0)
    channel = Channel()
    envs = _envelopes(rng)
    channel.round = 3
    delivered = channel.transmit(envs)
    entries = channel.transcript.entries
    assert [e.nbytes for e in entries] == [len(e.payload.to_bytes()) for e in envs]
    assert all(e.round == 3 for e in entries)
    assert channel.transcript.total_bytes() == sum(len(e.payload.to_bytes()) for e in envs)
    for sent, got in zip(envs, delivered, strict=True):
        np.testing.assert_array_equal(sent.payload["v"], got.payload["v"])
        assert got.payload["v"] is not sent.payload["v"]


def test_broadcast_receivers_do_not_share_arrays():
    channel = Channel()
    payload = Payload({"params": np.zeros(4, np.float32)}, {"senders": ["c0", "c1"]})
    a, b = channel.transmit([Envelope("server", r, "model", payload) for r in ("c0", "c1")])
    a.payload["params"][0] = 1.0
    a.payload.meta["senders"].append("evil")  # nested meta is not shared either
    assert b.payload["params"][0] == 0.0 and payload["params"][0] == 0.0
    assert b.payload.meta["senders"] == ["c0", "c1"]
    assert channel.transcript.bytes_by_direction({"server"}) == {
        "up": 0,
        "down": 2 * len(payload.to_bytes()),
        "p2p": 0,
    }


def test_channel_overlaps_the_serialisation_of_distinct_senders_and_receivers():
    """Each clock call ticks 1: every fresh message costs its sender 1 (encoding) and its
    receiver 1 (decoding); only the busiest sender and receiver stay on the critical path."""
    ticks = iter(range(10**6))
    rng = np.random.default_rng(0)
    channel = Channel(clock=lambda: float(next(ticks)))
    channel.transmit(_envelopes(rng, 3))  # 3 senders, 1 receiver (the server decodes all)
    assert channel.overlap_seconds == 6 - 1 - 3
    spread = [Envelope("c0", f"r{i}", "x", Payload({"v": np.ones(2)})) for i in range(3)]
    channel.transmit(spread)  # 1 sender encodes three messages; 3 receivers decode one each
    assert channel.overlap_seconds == 2 + (6 - 3 - 1)
    untimed = Channel()
    untimed.transmit(_envelopes(rng, 3))
    assert untimed.overlap_seconds == 0.0


def test_party_view_holds_only_what_the_party_received(tmp_path):
    channel = Channel()
    channel.transmit(_envelopes(np.random.default_rng(1), 3))
    channel.send("server", "client-1", "model", Payload({"w": np.ones(2)}))
    view = channel.transcript.view("client-1")
    assert [m.tag for m in view.messages()] == ["model"]
    assert channel.transcript.view("server").tags() == {"update"}
    loaded = Transcript.load(channel.transcript.save(tmp_path / "t"))
    assert [e.nbytes for e in loaded.entries] == [e.nbytes for e in channel.transcript.entries]
    np.testing.assert_array_equal(next(loaded.view("client-1").messages()).payload["w"], 1.0)


def test_a_saved_transcript_is_readable_by_its_owner_only(tmp_path):
    channel = Channel()
    channel.transmit(_envelopes(np.random.default_rng(3), 2))
    (tmp_path / "old").mkdir()
    for name in ("index.jsonl", "payloads.bin"):  # files of an earlier save, world-readable
        (tmp_path / "old" / name).write_bytes(b"")
        (tmp_path / "old" / name).chmod(0o644)
    for folder in (tmp_path / "new" / "t", tmp_path / "old"):
        saved = channel.transcript.save(folder)
        for name in ("index.jsonl", "payloads.bin"):
            assert (saved / name).stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "new" / "t").stat().st_mode & 0o777 == 0o700
    assert len(Transcript.load(tmp_path / "old").entries) == 2


def test_payload_storage_off_still_counts_bytes():
    channel = Channel(Transcript(store_payloads=False))
    envs = _envelopes(np.random.default_rng(2), 2)
    channel.transmit(envs)
    assert channel.transcript.total_bytes() == sum(len(e.payload.to_bytes()) for e in envs)
    with pytest.raises(LookupError, match="switched off"):
        channel.transcript.entries[0].payload()


def test_plain_aggregation_over_the_channel_through_an_executor():
    rng = np.random.default_rng(3)
    protocol = PlainAggregation()
    ids = [f"c{i}" for i in range(4)]
    parties = protocol.create_parties("server", ids, 6)

    executor = LocalExecutor({pid: ProtocolHost(pid, p) for pid, p in parties.by_id().items()})
    channel = Channel()
    inputs = {c: (rng.normal(size=6), float(rng.integers(1, 5))) for c in ids}
    result = aggregate(
        protocol,
        parties,
        0,
        inputs,
        channel.transmit,
        dropped={"c3": "send_update"},
        invoke=executor.phases(protocol),
    )
    kept = ids[:3]
    expected = sum(inputs[c][0] * inputs[c][1] for c in kept) / sum(inputs[c][1] for c in kept)
    np.testing.assert_allclose(result.mean, expected)
    assert result.participants == tuple(kept)
    assert {e.sender for e in channel.transcript.view("server").entries} == set(kept)
    assert protocol.output_role is Role.SERVER


class _Inner:
    def take(self, *args):
        return -len(args)


class _Probe(Party):
    def __init__(self) -> None:
        self.party_id = "p"
        self.inner: _Inner | None = None
        self.seen: list = []

    def roles(self):
        return (self, self.inner)

    def take(self, *args):
        self.seen.append(args)
        return len(args)

    def _secret(self):
        return "no"


class _Twin(_Probe):
    def roles(self):
        return (self, _Probe())


def test_executor_calls_methods_by_reference_on_the_party_s_roles_with_wire_arguments():
    probe = _Probe()
    ex = LocalExecutor({"p": probe, "t": _Twin()})
    ok = (1, 2.5, "s", b"b", None, np.arange(3), [1, {"k": (2, 3)}], Payload({"a": np.ones(2)}))
    assert ex.call([Call.to("p", _Probe.take, *ok)]) == [len(ok)]
    with pytest.raises(TypeError, match="not wire-serialisable"):
        ex.call([Call.to("p", _Probe.take, object())])
    with pytest.raises(TypeError, match="dict key"):
        ex.call([Call.to("p", _Probe.take, {1: 2})])
    with pytest.raises(PartyError, match="no role answers _Inner.take"):
        ex.call([Call.to("p", _Inner.take)])  # the role is not set up
    probe.inner = _Inner()
    assert ex.call([Call.to("p", _Inner.take, 1, 2)]) == [-2]  # the role that declares it
    with pytest.raises(TypeError, match="public method"):
        Call.to("p", _Probe._secret)
    with pytest.raises(PartyError, match="2 roles answer"):
        ex.call([Call.to("t", _Probe.take)])
    with pytest.raises(PartyError, match="no party 'q'"):
        ex.call([Call.to("q", _Probe.take)])
    with pytest.raises(TypeError, match="not a Party"):
        LocalExecutor({"x": object()})  # type: ignore[dict-item]
    assert len(probe.seen) == 1


def test_executor_accounts_seconds_per_call_and_party():
    ticks = iter(range(0, 1000, 5))  # every call lasts 5 clock units
    probe, other = _Probe(), _Probe()
    other.party_id = "q"
    ex = LocalExecutor({"p": probe, "q": other}, clock=lambda: next(ticks))
    ex.call([Call.to("p", _Probe.take, 1), Call.to("q", _Probe.take)])
    take = Target.of(_Probe.take)
    ex.invoke("p", take, [])
    ex.invoke("q", take, [])
    assert ex.seconds_by_call == {("p", "_Probe", "take"): 10, ("q", "_Probe", "take"): 10}
    assert ex.seconds_by_party() == {"p": 10, "q": 10}
    assert ex.overlap_seconds == 10  # the batch and the phase each overlap one 5-unit call
    assert set(ex.seconds_by_party(wall=True)) == {"p", "q"}
    assert all(s >= 0 for s in ex.wall_seconds_by_call.values())


def test_message_families_mark_entries_and_sum_to_the_total(tmp_path):
    from securefgl.federation.transcript import FAMILIES, ROUNDS, SETUP, STRUCTURE

    channel = Channel()
    transcript = channel.transcript
    with transcript.family_scope(SETUP):
        channel.transmit(_envelopes(np.random.default_rng(4), 2))
        with transcript.family_scope(STRUCTURE):
            channel.send("c0", "c1", "sums", Payload({"s": np.ones(7)}))
        channel.send("server", "c0", "key", Payload({"k": b"x" * 5}))
    channel.transmit(_envelopes(np.random.default_rng(5), 3))
    families = [e.family for e in transcript.entries]
    assert families == [SETUP, SETUP, STRUCTURE, SETUP, ROUNDS, ROUNDS, ROUNDS]
    by_family = transcript.bytes_by_family()
    assert set(by_family) == set(FAMILIES) and by_family["evaluation"] == 0
    assert sum(by_family.values()) == transcript.total_bytes()
    assert by_family[STRUCTURE] == transcript.entries[2].nbytes
    loaded = Transcript.load(transcript.save(tmp_path / "t"))
    assert [e.family for e in loaded.entries] == families
    with pytest.raises(ValueError, match="family"), transcript.family_scope("model"):
        pass
    assert transcript.family == ROUNDS
