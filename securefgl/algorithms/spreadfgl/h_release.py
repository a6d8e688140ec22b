"""A client's protection of its soft-prediction uploads ``H`` (SpreadFGL Eq. 9).

Every K rounds each client sends its edge server one softmax row per node, test and
unlabelled nodes included: near-labels, a membership signal, and ``H·Hᵀ`` scores the
client's own edges (the family's README.md, "Who learns what"). Protections, applied
by the client before the upload (secret randomness from :func:`protocols.dp.rng.make_rng`,
``None`` seed in real runs):

* ``h_rows < 1``: the client draws, once, a secret random subset of its rows and only ever
  uploads those; the others are never sent (no DP claim for the subset itself, and no
  sampling amplification for the uploaded rows: the server sees which positions arrive);
* ``h_mechanism = "gaussian"``: :class:`~protocols.dp.rows.RowGaussian` per row,
  (ε, δ) from the RDP / PRV accountant composed over the uploads;
* ``h_mechanism = "rr"``: :class:`~protocols.dp.rows.RandomizedResponse` on the top class,
  pure ε per upload, composed by basic composition.

The guarantee is per row (replace one node's released row) against the edge server and
everyone downstream of it (the generated features and potential links are functions of
the released rows: post-processing); a node also moves its neighbours' rows, so
protecting a node's features or edges this way costs group privacy (its 2-hop
neighbourhood). Not covered: the model updates (the protocol stack's ledger).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from protocols.dp.accounting import Accountant
from protocols.dp.rng import make_rng
from protocols.dp.rows import RandomizedResponse, RowGaussian
from securefgl.algorithms.spreadfgl.settings import SpreadFGLSettings

H_ADVERSARY = "edge server (and every receiver of what it derives from H)"


class HRelease:
    """One client's H uploads: its secret subset, its mechanism and its own ledger."""

    def __init__(
        self,
        settings: SpreadFGLSettings,
        num_rows: int,
        party_id: str,
        noise_seed: int | None,
        accountant: str = "rdp",
        delta: float = 1e-5,
    ) -> None:
        self.settings = settings
        coins = make_rng(noise_seed, "spreadfgl-h-rows", party_id)
        keep = max(1, int(round(settings.h_rows * num_rows))) if num_rows else 0
        self.rows = np.sort(coins.choice(num_rows, size=keep, replace=False)).astype(np.int64)
        self.rng = make_rng(noise_seed, "spreadfgl-h-noise", party_id)
        self.mechanism: RowGaussian | RandomizedResponse | None = None
        if settings.h_mechanism == "gaussian":
            self.mechanism = RowGaussian(settings.h_clip, settings.h_noise)
        elif settings.h_mechanism == "rr":
            self.mechanism = RandomizedResponse(settings.h_epsilon)
        self.ledger: Accountant | None = (
            self.mechanism.new_accountant(accountant, delta) if self.mechanism else None  # type: ignore[arg-type]
        )
        self.uploads = 0

    def release(self, probs: np.ndarray) -> np.ndarray:
        """The rows to upload (float32): the subset, perturbed; charges the ledger."""
        h = np.asarray(probs, dtype=np.float64)[self.rows]
        if self.mechanism is not None:
            h = self.mechanism.apply(h, self.rng)
            assert self.ledger is not None
            self.mechanism.charge(self.ledger)
        self.uploads += 1
        return h.astype(np.float32)

    def report(self) -> dict[str, Any]:
        """The guarantee of this client's uploads so far (empty without a mechanism)."""
        out: dict[str, Any] = {
            "h_rows": self.settings.h_rows,
            "h_uploads": self.uploads,
            "h_mechanism": self.settings.h_mechanism,
        }
        if self.ledger is not None:
            report = self.ledger.report()
            out.update({"h_epsilon": report["epsilon"], "h_delta": report["delta"],
                        "h_accountant": report["accountant"]})  # fmt: skip
        return out
