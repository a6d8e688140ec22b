"""The repaired-subgraph message ``Ḡ^{ji}`` (SpreadFGL §III-D) and the client's patcher.

Server side (:func:`build_patch`): for each row client ``i`` uploaded, its ``k`` potential
neighbours. A neighbour on another client (or on the same one, with
``local_links="virtual"``) travels as a generated feature row ``x̄_v``; rows are numbered
per message, so the client never learns which node (or client) a row stands for. ``dedup``
sends each distinct neighbour once (a choice §III-D leaves open). With
``local_links="edge"`` a neighbour on the same client travels as its upload position instead
(the client adds the real edge; also open in §III-D). ``links[a, t]``: ``>= 0`` a generated
row, ``-1`` none, ``<= -2`` the client's own upload position ``-(l + 2)``.

Client side (:func:`patch_edges`): the graphic patcher P (named but undefined in
§III-D): one virtual node per generated row, linked to each own node that selected it
(undirected); virtual nodes are unlabelled and never evaluated; ``refresh`` replaces or
accumulates them over imputations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from protocols.wire import Payload
from securefgl.algorithms.common.edge.model import Block, Factored

PATCH_TAG = "spreadfgl/patch"
NONE = -1


@dataclass
class ServerPatch:
    """What an edge server sends one client, and (kept by the server) which of its rows
    each generated row is: ``(owner client, upload position)``."""

    payload: Payload
    owners: np.ndarray
    positions: np.ndarray


def build_patch(
    client: int,
    candidates: np.ndarray,
    owner: np.ndarray,
    position: np.ndarray,
    generate,  # (rows of the server's stacked H) -> Factored | ndarray
    round_idx: int,
    dedup: bool = True,
    local_edges: bool = False,
) -> ServerPatch:
    mine = np.flatnonzero(owner == client)
    links = candidates[mine].copy()  # [m, k] rows of the server's stack, -1 = none
    valid = links >= 0
    out = np.full(links.shape, NONE, dtype=np.int64)
    local = valid & (owner[np.where(valid, links, 0)] == client) if local_edges else None
    if local is not None:
        out[local] = -(position[links[local]] + 2)
        valid &= ~local
    if dedup:
        sent, inverse = np.unique(links[valid], return_inverse=True)
        out[valid] = inverse
    else:
        sent = links[valid]
        out[valid] = np.arange(sent.size)
    generated = generate(sent)
    fields: dict[str, np.ndarray] = {"links": out}
    if isinstance(generated, Factored):
        fields.update({"z": generated.z, "w": generated.w, "b": generated.b})
        encoding = "factored"
    else:
        fields["x"] = np.asarray(generated, dtype=np.float32)
        encoding = "rows"
    payload = Payload(fields, {"round": round_idx, "encoding": encoding})
    return ServerPatch(payload, owner[sent].astype(np.int64), position[sent].astype(np.int64))


def read_patch(payload: Payload) -> tuple[np.ndarray, Block]:
    """``(links, generated block)`` of a received patch."""
    links = payload.array("links").astype(np.int64)
    if payload.meta.get("encoding") == "factored":
        block: Block = Factored(payload.array("z"), payload.array("w"), payload.array("b"))
    else:
        block = payload.array("x")
    return links, block


def patch_edges(uploaded: np.ndarray, links: np.ndarray, offset: int) -> np.ndarray:
    """Directed edges (both directions) ``[2, e]`` the patcher adds: own node ``uploaded[a]``
    to virtual node ``offset + links[a, t]``, or to own node ``uploaded[-(l + 2)]``."""
    links = np.asarray(links, dtype=np.int64)
    rows = np.broadcast_to(np.asarray(uploaded, np.int64)[:, None], links.shape)
    virt = links >= 0
    local = links <= -2
    src = np.concatenate([rows[virt], rows[local]])
    dst = np.concatenate([offset + links[virt], np.asarray(uploaded)[-(links[local] + 2)]])
    return np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])]).astype(np.int64)
