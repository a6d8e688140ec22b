"""Active-server attacks on CKKS aggregation (:mod:`protocols.ckks`): forged aggregates.

The server adds ciphertexts under a key-less context, so it cannot read updates; what it
can do is hand the clients something other than the sum. Success means the clients accept
a result that differs from the honest weighted mean (corrupted undetected):

* ``offset``: the true sum plus a plaintext offset on one coordinate (adding a plaintext
  needs no key; the check slots are left alone, so only the secret sketches can tell);
* ``subset``: the sum without one participant, still listing it (a silent drop);
* ``stale``: the previous round's aggregate, with its attestations (a replay).

Under ``threat_model="malicious"`` (:mod:`protocols.ckks_signed`) the signed digests, the
round-bound tags and the secret sketches refuse all three.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attacks.active_server.driver import Outcome, check_threat_model, inputs_for, outcome
from attacks.active_server.driver import run_round as run_one
from protocols.base import Inbox, setup_parties
from protocols.ckks import _chunk_blobs, _chunk_sizes
from protocols.registry import make_transport

SERVER = "server"
FORGERIES = ("offset", "subset", "stale")


def _forger(server: Any, mode: str) -> Callable[[Inbox], tuple[dict, dict, list[str]]]:
    """The server's summing step (``_sum_updates``, which every CKKS server's round runs)
    followed by the forgery ``mode``."""
    honest = server._sum_updates
    memory: dict[str, Any] = {}

    def forged(inbox: Inbox) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        fields, meta, senders = honest(inbox)
        sizes = _chunk_sizes(server.payload_dim, server.params.values_per_ciphertext)
        codec = server.codec
        fields = dict(fields)
        if mode == "offset":
            vec = codec.load(fields["ct00000"], sizes[0], "sum")
            offset = [0.0] * sizes[0]
            offset[0] = 0.25  # one coordinate of w·x: the tag and sketch slots untouched
            fields["ct00000"] = codec.dump(codec.add_plain(vec, offset))
        elif mode == "subset":
            total = None
            for cid in senders[1:]:  # leave the first participant out, keep listing it
                blobs = _chunk_blobs(server._received[cid], len(sizes), cid, server.update_extra)
                vecs = [codec.load(b, n, cid) for b, n in zip(blobs, sizes, strict=True)]
                if total is None:
                    total = vecs
                else:
                    for acc, vec in zip(total, vecs, strict=True):
                        codec.add_(acc, vec)
            assert total is not None
            names = sorted(k for k in fields if k.startswith("ct"))
            fields.update({name: codec.dump(v) for name, v in zip(names, total, strict=True)})
        elif mode == "stale":
            previous = memory.get("fields")
            memory["fields"] = dict(fields)
            if previous is not None:
                fields = previous
        return fields, meta, senders

    return forged


def run_forgery(
    threat_model: str, mode: str = "offset", n: int = 4, dim: int = 64, seed: int = 0
) -> Outcome:
    """Two rounds (``stale`` replays the first round's aggregate in the second)."""
    check_threat_model(threat_model)
    protocol = make_transport("ckks", "active-server-audit/ckks", threat_model=threat_model)
    ids = [f"c{i:02d}" for i in range(n)]
    parties = protocol.create_parties(SERVER, ids, dim)
    setup_parties(protocol, parties, lambda envs: envs)
    server = parties.server
    server._sum_updates = _forger(server, mode)  # type: ignore[method-assign]
    log: list[dict[str, str]] = []
    accepted, worst = False, 0.0
    for r in range(2):
        inputs = inputs_for(ids, dim, seed + r)
        log += run_one(protocol, parties.clients, server, r, inputs).log
        if mode == "stale" and r == 0:
            continue
        truth = sum(v * w for v, w in inputs.values()) / sum(w for _, w in inputs.values())
        results = [c.result() for c in parties.clients.values()]
        got = [res for res in results if res is not None]
        if got and len(got) == len(results):
            worst = max(float(np.max(np.abs(res.mean - truth))) for res in got)
            accepted = worst > 1e-4
    return outcome(
        "forged_aggregate" if mode != "stale" else "share_replay", "ckks", threat_model,
        accepted, "corrupted", log, forgery=mode, clients=n, dim=dim,
        max_abs_error_accepted=worst if accepted else None,
    )  # fmt: skip
