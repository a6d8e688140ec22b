"""The minimum cohort every SecAgg / SecAgg+ client enforces itself, and the threshold floor.

A server that chooses the participant list (e.g. one protocol state per pair of clients)
must not learn sums of fewer clients than the experiment set: the clients refuse such a
list from public parameters the server does not choose.
"""

from __future__ import annotations

import numpy as np
import pytest

from protocols.base import Envelope, ProtocolError
from protocols.secagg import TAG_KEYLIST, SecAggPlus, SecAggregation
from protocols.secagg.consistency import pack_signatures
from protocols.secagg.rounds import RoundInfo
from protocols.wire import Payload

SERVER = "server"
HBC, MAL = "honest-but-curious", "malicious"


def _ids(n: int) -> list[str]:
    return [f"c{i:02d}" for i in range(n)]


def _pair_round(protocol: SecAggregation, n: int = 10) -> list[Envelope]:
    """Client c00 of an n-client federation receives a key list naming only {c00, c01}
    (a well-formed message, the peer's real signed keys): what it answers."""
    parties = protocol.create_parties(SERVER, _ids(n), 3)
    adverts = {}
    for cid in ("c00", "c01"):
        client = parties.clients[cid]
        client.begin_round(0, np.zeros(3), 1.0)
        (env,) = client.advertise_keys([])
        adverts[cid] = env.payload.fields
    peer = adverts["c01"]
    fields = {k: np.frombuffer(peer[k], np.uint8).reshape(1, 32) for k in ("c_pk", "s_pk")}
    if "sig" in peer:
        fields["sig"] = pack_signatures([peer["sig"]])
    meta = {"round": 0, "participants": ["c00", "c01"], "ids": ["c01"]}
    keylist = Envelope(SERVER, "c00", TAG_KEYLIST, Payload(fields, meta))
    return parties.clients["c00"].share_keys([keylist])


@pytest.mark.parametrize("cls", [SecAggregation, SecAggPlus])
def test_a_malicious_mode_client_refuses_a_cohort_below_the_minimum(cls) -> None:
    assert _pair_round(cls("exp-pair")), "honest-but-curious: the server's cohort is trusted"
    with pytest.raises(ProtocolError, match="minimum cohort"):
        _pair_round(cls("exp-pair", threat_model=MAL))
    with pytest.raises(ProtocolError, match="minimum cohort of 3"):
        _pair_round(cls("exp-pair", min_cohort=3))  # explicit: enforced in either model


@pytest.mark.parametrize(("cls", "floor"), [(SecAggregation, 6), (SecAggPlus, 5)])
def test_the_threshold_never_falls_with_the_servers_list(cls, floor) -> None:
    ids = _ids(10)
    protocol = cls("exp-floor", threat_model=MAL)
    config = protocol.config_for(10)
    for m in range(2, 10):  # default: the whole registered federation
        with pytest.raises(ProtocolError, match="minimum cohort"):
            RoundInfo.build(config, 0, ids[:m])
    assert config.min_cohort == 10
    assert protocol.min_summands(10) == config.threshold_floor == floor
    sampled = cls("exp-floor", threat_model=MAL, min_cohort=6).config_for(10)
    ts = [RoundInfo.build(sampled, 0, ids[:m]).t for m in range(6, 11)]
    assert min(ts) == sampled.threshold_floor == ts[0]
    assert ts == sorted(ts)


def test_min_cohort_defaults_and_validation() -> None:
    assert SecAggregation("e").config_for(10).min_cohort == 2
    assert SecAggregation("e", threshold=7).config_for(10).min_cohort == 7
    assert SecAggregation("e", threshold=0.8, threat_model=MAL, min_cohort=5).min_summands(10) == 4
    for bad in (1, 0, True, 2.5):
        with pytest.raises(ValueError, match="min_cohort"):
            SecAggregation("e", min_cohort=bad)
    with pytest.raises(ValueError, match="exceeds the 4 clients"):
        SecAggregation("e", min_cohort=5).create_parties(SERVER, _ids(4), 2)
