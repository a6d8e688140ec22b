"""Active-server attack on masked secure sums (FedStruct's Ā hop sums, FedGCN's sums).

**Message substitution** (:func:`run_substitution`): at set-up the relaying server hands
every client its own X25519 keys in place of the other clients' (one fresh key per
ordered pair). Every pairwise and receiver seed is then a secret the server shares with
the client, so it rebuilds each sender's masks with the sender's own encoding code and
reads every block in the clear. Under ``threat_model="malicious"`` the keys are signed
(:mod:`protocols.secure_sum.parties`) and every client refuses the substituted list.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attacks.active_server.driver import Outcome, Refusals, check_threat_model, outcome
from protocols.base import ProtocolError, run_phases
from protocols.bundles import unbundle
from protocols.crypto.keyagreement import KeyPair, shared_secret
from protocols.secure_sum import MaskedSum, SumRequest
from protocols.secure_sum.masked import MaskedSumClient
from protocols.secure_sum.parties import TAG_CONTRIBUTION
from protocols.wire import Payload

SERVER = "server"


class _Substitution:
    """The lying relay's memory: the fake key it showed each client for each peer."""

    def __init__(self, server: Any, clients: dict[str, MaskedSumClient]) -> None:
        self.server, self.clients = server, clients
        self.fake: dict[tuple[str, str], KeyPair] = {}
        self.real: dict[str, bytes] = {}
        self.recovered: dict[tuple[str, str], np.ndarray] = {}
        honest_forward, honest_deliver = server.setup_forward, server.deliver

        def setup_forward(inbox: Any) -> Any:
            self.real = {e.sender: e.payload.blob("x25519_public") for e in inbox}
            out = honest_forward(inbox)
            for env in out:
                keys = env.payload.fields["keys"].copy()
                for i, v in enumerate(env.payload.meta["ids"]):
                    pair = self.fake[env.receiver, v] = KeyPair.generate()
                    keys[i] = np.frombuffer(pair.public, np.uint8)
                env.payload.fields["keys"] = keys
            return out

        def deliver(inbox: Any) -> Any:
            self._read(inbox)
            return honest_deliver(inbox)

        server.setup_forward, server.deliver = setup_forward, deliver

    def _shadow(self, k: str, requests: dict[str, SumRequest]) -> MaskedSumClient:
        """Sender k's encoder, seeded with the secrets the server shares with it."""
        real = self.clients[k]
        shadow = MaskedSumClient(
            k, SERVER, sorted(real.federation), real.min_senders, real.experiment_id,
            real.codec, real.collusion_threshold, real.pair_masks,
        )  # fmt: skip
        shadow.begin_round(self.server._r)
        shadow._keys = self.fake[k, next(iter(self.real.keys() - {k}))]  # any non-None pair
        shadow._peer_keys = {v: b"" for v in real.federation - {k}}
        shadow._shared = {
            v: shared_secret(self.fake[k, v], self.real[k]) for v in real.federation - {k}
        }
        shadow._start_encoding(requests)
        return shadow

    def _read(self, inbox: Any) -> None:
        requests = self.server._requests
        by_sender: dict[str, dict[str, Payload]] = {}
        for env in inbox:
            if env.tag == TAG_CONTRIBUTION:
                by_sender[env.sender] = unbundle(env.payload, "audit")
        for k, sent in by_sender.items():
            mine = {r: q for r, q in requests.items() if k in q.senders}
            shadow = self._shadow(k, mine)
            for r in sorted(mine):
                zero = np.zeros(mine[r].shape)
                mask = shadow._encode(r, mine[r], zero).fields["y"]
                y = sent[r].fields["y"]
                self.recovered[k, r] = shadow.codec.decode(y - mask)


def run_substitution(threat_model: str, n: int = 5, shape: tuple[int, int] = (4, 6),
                     seed: int = 0) -> Outcome:  # fmt: skip
    """One batch of masked sums (every client receives from all others) under the lie."""
    check_threat_model(threat_model)
    protocol = MaskedSum("active-server-audit/masked", threat_model=threat_model)
    ids = [f"c{i:02d}" for i in range(n)]
    parties = protocol.create_parties(SERVER, ids)
    lie = _Substitution(parties.server, parties.clients)
    refusals = Refusals(parties.clients, parties.server)
    roles = parties.roles()
    rng = np.random.default_rng(seed)
    blocks = {r: {k: rng.random(shape) for k in ids if k != r} for r in ids}
    try:
        run_phases(protocol.setup_phases, roles, refusals.invoke, lambda e: e)
        for client in parties.clients.values():
            client.begin_round(0)
        parties.server.begin_round(0)
        for r, job in blocks.items():
            if r in refusals.silent:
                continue
            parties.clients[r].expect_sum(SumRequest(tuple(job), shape, None, False))
            for k in job:
                parties.clients[k].add_contribution(r, job[k])
        run_phases(protocol.round_phases, roles, refusals.invoke, lambda e: e)
    except ProtocolError as err:
        refusals.log.append({"party": SERVER, "phase": "-", "error": str(err)[:300]})
    victim = ids[0]
    got = [(r, est) for (k, r), est in lie.recovered.items() if k == victim]
    ok = bool(got) and all(np.max(np.abs(est - blocks[r][victim].ravel())) < 1e-6 for r, est in got)
    return outcome(
        "message_substitution", "masked (secure sum)", threat_model, ok, "recovered",
        refusals, clients=n, shape=list(shape), blocks_read=len(got),
    )  # fmt: skip
