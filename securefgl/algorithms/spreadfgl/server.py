"""SpreadFGL's edge server: an edge server that imputes its clients' missing links.

SpreadFGL (Zhong et al., §III-E, Algorithm 1 lines 6-11): every K rounds the server
receives its clients' ``H``, builds potential links and generated features
(:mod:`~securefgl.algorithms.spreadfgl.imputation`) and sends each client its piece; the
rest is the edge runtime's server
(:class:`~securefgl.algorithms.common.edge.server.EdgeServer`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from protocols.base import Envelope
from securefgl.algorithms.common.edge.server import EdgeServer
from securefgl.algorithms.spreadfgl.client import H_TAG
from securefgl.algorithms.spreadfgl.imputation import Imputer, potential_links
from securefgl.algorithms.spreadfgl.patch import PATCH_TAG, build_patch
from securefgl.algorithms.spreadfgl.settings import SpreadFGLSettings


class ImputingServer(EdgeServer):
    """An edge server with SpreadFGL's imputer (module docstring)."""

    def __init__(self, *args: Any, imputer: Imputer, settings: SpreadFGLSettings,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.imputer = imputer
        self.settings = settings
        #: per client: (round, owner client index, upload position) of each generated row
        #: sent in the last imputation (the server built them; ground truth for audits)
        self.sent: dict[str, tuple[int, np.ndarray, np.ndarray]] = {}

    # ----------------------------------------------------------------- imputation
    def impute(self, round_idx: int, inbox: list[Envelope]) -> list[Envelope]:
        """Eq. 9-14 on the H rows of this round: potential links, AE + assessor, and one
        repaired-subgraph message per client (its own nodes only)."""
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
