"""SpreadFGL's client: an edge client that uploads ``H`` and patches its graph.

SpreadFGL (Zhong et al., §III-E, Algorithm 1 lines 6, 11): every K rounds the client
uploads ``H`` (its softmax rows, through
:class:`~securefgl.algorithms.spreadfgl.h_release.HRelease`) and patches its graph with
what its server sends back (:mod:`~securefgl.algorithms.spreadfgl.patch`); the rest is the
edge runtime's client (:class:`~securefgl.algorithms.common.edge.client.EdgeClient`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from protocols.base import AggregationClient, Envelope
from protocols.wire import Payload
from securefgl.algorithms.common.edge.client import EdgeClient, LocalTraining
from securefgl.algorithms.common.edge.model import Block, Factored
from securefgl.algorithms.spreadfgl.h_release import HRelease
from securefgl.algorithms.spreadfgl.patch import PATCH_TAG, patch_edges, read_patch
from securefgl.data import ClientGraph

H_TAG = "spreadfgl/h"


class PatchingClient(EdgeClient):
    """An edge client with SpreadFGL's H uploads and patches (module docstring)."""

    def __init__(
        self,
        view: ClientGraph,
        training: LocalTraining,
        agg: AggregationClient | None,
        server_id: str | None,
        h_release: HRelease,
        refresh: str = "replace",
        generated_scale: str = "none",
        seed: int = 0,
    ) -> None:
        super().__init__(view, training, agg, server_id, seed=seed)
        self.h_release = h_release
        self.refresh = refresh
        self.generated_scale = generated_scale

    def receive_patch(self, inbox: list[Envelope]) -> int:
        """Patch the graph with the server's message; returns the virtual nodes held."""
        for env in inbox:
            if env.tag != PATCH_TAG:
                continue
            links, block = read_patch(env.payload)
            if self.generated_scale == "own-norm":
                block = scale_to_own_norm(block, self.x_own)
            elif self.generated_scale == "zero":
                block = np.zeros((_rows(block), self.x_own.shape[1]), dtype=np.float32)
            if self.refresh == "replace":
                self.blocks, self.patch = [], np.zeros((2, 0), dtype=np.int64)
            offset = self.num_own + sum(_rows(b) for b in self.blocks)
            new = patch_edges(self.h_release.rows, links, offset)
            self.blocks.append(block)
            self.patch = np.concatenate([self.patch, new], axis=1)
            self._rebuild()
        return sum(_rows(b) for b in self.blocks)

    def upload_h(self, round_idx: int) -> list[Envelope]:
        """Eq. 9: this client's (protected) softmax rows to its server."""
        if self.server_id is None:
            return []
        h = self.h_release.release(self.probabilities())
        payload = Payload({"h": h}, {"round": round_idx})
        return [Envelope(self.party_id, self.server_id, H_TAG, payload)]

    def h_privacy(self) -> dict:
        return self.h_release.report()


def _rows(block: Block) -> int:
    return block.rows if hasattr(block, "rows") else len(block)


def scale_to_own_norm(block: Block, own: sp.csr_matrix) -> np.ndarray:
    """Generated rows, each rescaled to the mean L2 norm of the client's own non-empty rows
    (SpreadFGL ties X̄ to the data only through its decoder, so its scale is arbitrary)."""
    rows = block.dense() if isinstance(block, Factored) else np.asarray(block, np.float32)
    norms_own = np.sqrt(np.asarray(own.multiply(own).sum(axis=1))).ravel()
    target = float(norms_own[norms_own > 0].mean()) if (norms_own > 0).any() else 1.0
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows * (target / np.maximum(norms, 1e-12))).astype(np.float32)
