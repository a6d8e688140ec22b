"""A party's own data on disk, and the public facts about it that it announces.

In a deployment every client organisation already holds its subgraph; it writes it once
as a *view file* (:func:`write_view`: the wire payload of a
:class:`~securefgl.data.ClientGraph`, mode 0600) and its daemon reads that file only. The
driver never sees a view: each party announces the public facts the algorithms need
(:data:`PUBLIC_FACTS`, signed in its hello) and the driver works with a *stub* view built
from them (:func:`stub_view`: no node, no edge). A recipe's ``view`` argument is therefore
the stub; the party's host puts its own view in its place.

:func:`split_for_deployment` plays the organisations for tests and demos: it draws the
simulator's world (split, partition, client views) from the experiment's seed exactly as
``securefgl run`` does and writes each client's view to its own file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from protocols.wire import Payload
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.experiment.runner import draw_world, load_graph
from securefgl.federation.builders import view_from_payload, view_payload
from securefgl.federation.party import client_party_id

#: what a client announces about its view (the sizes every party must agree on)
PUBLIC_FACTS = ("client_id", "num_features", "num_classes", "num_global_nodes", "cross_edges")


def public_facts(view: ClientGraph) -> dict[str, Any]:
    return {name: getattr(view, name) for name in PUBLIC_FACTS}


def stub_view(facts: dict[str, Any]) -> ClientGraph:
    """A view with the announced facts and no node, edge, feature or label."""
    empty = torch.zeros(0, dtype=torch.long)
    return ClientGraph(
        client_id=int(facts["client_id"]),
        x=torch.zeros(0, int(facts["num_features"])),
        y=empty, train_mask=empty.bool(), val_mask=empty.bool(), test_mask=empty.bool(),
        edge_index=torch.zeros(2, 0, dtype=torch.long), node_ids=empty,
        cross_edges=str(facts["cross_edges"]),
        external_edges=torch.zeros(2, 0, dtype=torch.long), external_owner=empty,
        num_classes=int(facts["num_classes"]),
        num_global_nodes=int(facts["num_global_nodes"]),
    )  # fmt: skip


def write_view(view: ClientGraph, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(view_payload(view).to_bytes())
    return path


def read_view(path: Path) -> ClientGraph:
    return view_from_payload(Payload.from_bytes(Path(path).read_bytes(), max_bytes=1 << 34))


def split_for_deployment(config: ExperimentConfig, seed: int) -> dict[str, ClientGraph]:
    """The client views ``securefgl run`` would draw for ``seed`` (same RNG steps), by
    party id: what each organisation would hold."""
    data = load_graph(config)
    torch.manual_seed(seed)
    np.random.seed(seed)
    _, _, views, _ = draw_world(config, seed, data)
    return {client_party_id(v.client_id): v for v in views}
