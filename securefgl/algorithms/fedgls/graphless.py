"""Graphless clients (FedGLS, Fu et al., TMLR, Sec. 3 and 5.1.1): which clients are, and
their views.

"We randomly select half clients as graphless clients": here ``round(fraction · K)``
clients drawn with the run's seed (salted, so the draw is independent of the split and the
partition), or an explicit list. A graphless client's view is its own view with NO edges:
a new :class:`~securefgl.data.ClientGraph` whose ``edge_index`` is empty, so nothing it
holds can reach them. Only the Fed-GNN oracle keeps them (and says so).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from protocols.wire import Payload
from securefgl.algorithms.fedgls.settings import FedGLSSettings
from securefgl.config import ConfigError
from securefgl.data import ClientGraph
from securefgl.federation.builders import view_payload

_SALT = 0x6C5  # the draw is independent of the split / partition streams of the same seed


def graphless_ids(client_ids: list[int], settings: FedGLSSettings, seed: int) -> set[int]:
    """The graphless clients among ``client_ids`` (explicit list, else a seeded draw)."""
    if settings.graphless_clients is not None:
        unknown = sorted(set(settings.graphless_clients) - set(client_ids))
        if unknown:
            raise ConfigError(
                f"graphless_clients {unknown} are not clients of this run (ids "
                f"{min(client_ids)}..{max(client_ids)})"
            )
        return set(settings.graphless_clients)
    count = int(np.floor(settings.graphless_fraction * len(client_ids) + 0.5))
    rng = np.random.default_rng([seed, _SALT])
    return {int(c) for c in rng.choice(sorted(client_ids), size=count, replace=False)}


def without_edges(view: ClientGraph) -> ClientGraph:
    """``view`` with no edges (internal or external): what a graphless client holds."""
    empty = torch.empty(2, 0, dtype=torch.long)
    return dataclasses.replace(
        view,
        edge_index=empty,
        cross_edges="hidden",
        external_edges=empty.clone(),
        external_owner=torch.empty(0, dtype=torch.long),
    )


def view_payload_of(view: ClientGraph, graphless: bool) -> Payload:
    """The view a client's recipe carries: a graphless client's without its edges, so no
    process ever receives them."""
    return view_payload(without_edges(view) if graphless else view)
