"""An edge server: a party of its own, with its clients and its neighbour servers.

SpreadFGL (Zhong et al., §III-A, Algorithm 1): server ``S_j`` holds the global classifier
``W_j``, aggregates its ``M_j`` clients uniformly every round (line 13) and mixes models
with its neighbour servers (Eq. 16).

Hardening (docs: SpreadFGL's page, "Hardening"): neighbours exchange their **per-server
aggregates** ``W̄_r`` with ``M_r`` (public: the topology), not individual client models;
Eq. 16 is ``W_j = Σ_{r ∈ N(j) ∪ {j}} M_r W̄_r / Σ M_r``, the same mean (``a_jj = 1``). The
within-server aggregate comes from the configured protocol stack, so under ``secagg`` a
server learns only its own clients' mean.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from protocols.base import AggregationServer, Envelope
from protocols.wire import Payload
from securefgl.algorithms.common.edge.client import MODEL_TAG
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
        holds_model: bool = True,
    ) -> None:
        self.party_id = party_id
        self.params = params  # None when the protocol leaves the aggregate with the clients
        self.agg = agg
        self.clients = list(clients)
        self.neighbours = dict(neighbours)  # neighbour server id -> its number of clients
        self.holds_model = holds_model  # False: the protocol gives the mean to the clients

    def roles(self) -> Iterable[object | None]:
        return (self, self.agg)

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
