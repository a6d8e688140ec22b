"""An edge server: a party of its own, with its clients, its neighbours and its imputer.

SpreadFGL (Zhong et al., §III-A, §III-E, Algorithm 1): server ``S_j`` holds the global
classifier ``W_j``, aggregates its ``M_j`` clients uniformly every round (line 13), and
every K rounds (lines 6-11) receives their ``H``, builds potential links and generated
features (:mod:`~securefgl.algorithms.spreadfgl.imputation`) and sends each client its piece, and
mixes models with its neighbour servers (Eq. 16).

Hardening (docs/algorithms/spreadfgl.md, "Hardening"): neighbours exchange their
**per-server aggregates** ``W̄_r`` with ``M_r`` (public: the topology), not individual
client models; Eq. 16 is ``W_j = Σ_{r ∈ N(j) ∪ {j}} M_r W̄_r / Σ M_r``, the same mean
(``a_jj = 1``). The within-server aggregate comes from the configured protocol stack, so
under ``secagg`` a server learns only its own clients' mean.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from protocols.base import AggregationServer, Envelope
from protocols.wire import Payload
from securefgl.algorithms.spreadfgl.client import H_TAG, MODEL_TAG
from securefgl.algorithms.spreadfgl.imputation import Imputer, potential_links
from securefgl.algorithms.spreadfgl.patch import PATCH_TAG, build_patch
from securefgl.algorithms.spreadfgl.settings import SpreadFGLSettings
from securefgl.federation import Party

SERVER_MODEL_TAG = "spreadfgl/server-model"


class EdgeServer(Party):
    """An edge server (module docstring)."""

    def __init__(
        self,
        party_id: str,
        params: np.ndarray | None,
        agg: AggregationServer,
        clients: list[str],
        neighbours: dict[str, int],
        imputer: Imputer | None = None,
        settings: SpreadFGLSettings | None = None,
        holds_model: bool = True,
    ) -> None:
        self.party_id = party_id
        self.params = params  # None when the protocol leaves the aggregate with the clients
        self.agg = agg
        self.clients = list(clients)
        self.neighbours = dict(neighbours)  # neighbour server id -> its number of clients
        self.imputer = imputer
        self.settings = settings
        self.holds_model = holds_model  # False: the protocol gives the mean to the clients
        #: per client: (round, owner client index, upload position) of each generated row
        #: sent in the last imputation (the server built them; ground truth for audits)
        self.sent: dict[str, tuple[int, np.ndarray, np.ndarray]] = {}

    def roles(self) -> Iterable[object | None]:
        return (self, self.agg)

    # ----------------------------------------------------------------- models
    def broadcast(self, round_idx: int) -> list[Envelope]:
        if self.params is None:
            return []
        payload = Payload({"params": self.params}, {"round": round_idx})
        if not self.holds_model:
            self.params = None  # sent once (the initial model); its clients hold it from now on
        return [Envelope(self.party_id, c, MODEL_TAG, payload) for c in self.clients]

    def begin_aggregation(self, round_idx: int) -> None:
        self.agg.begin_round(round_idx, self.clients)

    def apply_result(self, round_idx: int) -> None:
        """``W̄_j = W_j + mean delta`` (the uniform mean of the clients' models)."""
        result = self.agg.result()
        if result is not None and self.params is not None:
            self.params = (self.params + result.mean).astype(np.float32)

    def share_model(self, round_idx: int) -> list[Envelope]:
        """Eq. 16, sending side: ``(W̄_j, M_j)`` to every neighbour server."""
        if self.params is None:
            return []
        payload = Payload(
            {"params": self.params}, {"round": round_idx, "clients": len(self.clients)}
        )
        return [Envelope(self.party_id, r, SERVER_MODEL_TAG, payload) for r in self.neighbours]

    def mix_models(self, inbox: list[Envelope]) -> None:
        """Eq. 16: the ``M_r``-weighted mean of the neighbours' aggregates and its own."""
        if self.params is None:
            return
        total = float(len(self.clients))
        acc = total * self.params.astype(np.float64)
        for env in inbox:
            if env.tag == SERVER_MODEL_TAG and env.sender in self.neighbours:
                m = float(self.neighbours[env.sender])  # public topology, not the sender's claim
                acc += m * env.payload.array("params").astype(np.float64)
                total += m
        self.params = (acc / total).astype(np.float32)

    # ----------------------------------------------------------------- imputation
    def impute(self, round_idx: int, inbox: list[Envelope]) -> list[Envelope]:
        """Eq. 9-14 on the H rows of this round: potential links, AE + assessor, and one
        repaired-subgraph message per client (its own nodes only)."""
        if self.imputer is None or self.settings is None:
            return []
        st = self.settings
        rows = {e.sender: e.payload.array("h") for e in inbox if e.tag == H_TAG}
        senders = [c for c in self.clients if c in rows and len(rows[c])]
        if not senders:
            return []
        h = np.concatenate([rows[c] for c in senders]).astype(np.float32)
        owner = np.concatenate([np.full(len(rows[c]), i) for i, c in enumerate(senders)])
        position = np.concatenate([np.arange(len(rows[c])) for c in senders])
        candidates = potential_links(h, owner, st.top_k, st.candidates, rng=self.imputer.tie_rng)
        self.imputer.fit(h)
        n = len(h)
        out = []
        for i, c in enumerate(senders):
            patch = build_patch(
                i, candidates, owner, position, lambda sent: self.imputer.generate(n, sent),
                round_idx, dedup=st.dedup, local_edges=st.local_links == "edge",
            )  # fmt: skip
            owners = np.array([self.clients.index(senders[o]) for o in patch.owners], np.int64)
            self.sent[c] = (round_idx, owners, patch.positions)
            out.append(Envelope(self.party_id, c, PATCH_TAG, patch.payload))
        return out
