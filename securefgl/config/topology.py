"""Edge servers as parties: which clients each covers, and which servers are neighbours.

SpreadFGL (Zhong et al., §III-A): N edge servers ``S_1..S_N``, server ``S_j`` covering
``M_j`` clients (``Σ_j M_j = M``); a client talks only to its own server; servers ``i`` and
``j`` may exchange parameters iff ``a_ij = 1`` in the server adjacency ``A``. The paper
uses a ring of 3 (which is the complete graph K₃) and does not say how clients are
assigned; here contiguous equal blocks of client ids (the first ``M mod N`` servers get
one more). Party ids: ``edge-0`` … ``edge-{N-1}``.

Topology specs: ``ring`` (default), ``line``, ``complete``, ``star`` (server 0 in the
middle), ``none`` (no server exchanges), or an explicit undirected edge list
``"0-1,1-2"``. Self-loops are implicit (Eq. 16 includes the server's own clients).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = ["NAMED_TOPOLOGIES", "EdgeTopology", "edge_server_id", "parse_topology"]

NAMED_TOPOLOGIES = ("ring", "line", "complete", "star", "none")
_EDGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def edge_server_id(j: int) -> str:
    """Party id of edge server ``j`` (``"edge-2"``)."""
    return f"edge-{int(j)}"


def parse_topology(spec: str, servers: int) -> np.ndarray:
    """The ``servers × servers`` 0/1 symmetric adjacency of ``spec`` (no self-loops).

    Raises ``ValueError`` for an unknown name, a malformed edge list, an endpoint out of
    range or a self-loop."""
    n = int(servers)
    if n < 1:
        raise ValueError(f"edge servers must be >= 1, got {servers}")
    a = np.zeros((n, n), dtype=np.int64)
    name = spec.strip().lower()
    if name in ("ring", "line"):
        for j in range(n - 1):
            a[j, j + 1] = a[j + 1, j] = 1
        if name == "ring" and n > 2:
            a[0, n - 1] = a[n - 1, 0] = 1
    elif name == "complete":
        a[:] = 1
        np.fill_diagonal(a, 0)
    elif name == "star":
        a[0, 1:] = a[1:, 0] = 1
    elif name != "none":
        for part in filter(None, (p.strip() for p in name.split(","))):
            match = _EDGE.match(part)
            if match is None:
                raise ValueError(
                    f"server_topology {spec!r}: expected one of {list(NAMED_TOPOLOGIES)} or "
                    "an edge list like '0-1,1-2'"
                )
            i, j = int(match.group(1)), int(match.group(2))
            if i >= n or j >= n or i == j:
                raise ValueError(
                    f"server_topology {spec!r}: edge {i}-{j} needs two distinct servers in [0, {n})"
                )
            a[i, j] = a[j, i] = 1
    return a


@dataclass(frozen=True)
class EdgeTopology:
    """Client → server assignment and the server adjacency (public to every party)."""

    servers: int
    server_of: tuple[int, ...]  # client index → server index
    adjacency: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, clients: int, servers: int, spec: str = "ring") -> EdgeTopology:
        if not 1 <= servers <= clients:
            raise ValueError(f"edge servers must lie in [1, clients = {clients}], got {servers}")
        blocks = np.array_split(np.arange(clients), servers)
        server_of = np.empty(clients, dtype=np.int64)
        for j, block in enumerate(blocks):
            server_of[block] = j
        adj = parse_topology(spec, servers)
        return cls(servers, tuple(int(s) for s in server_of), tuple(map(tuple, adj.tolist())))

    def clients_of(self, server: int) -> list[int]:
        return [c for c, s in enumerate(self.server_of) if s == server]

    def neighbours(self, server: int) -> list[int]:
        """Servers adjacent to ``server`` (itself excluded)."""
        return [r for r, linked in enumerate(self.adjacency[server]) if linked]

    def sizes(self) -> list[int]:
        """``M_j`` per server."""
        return [len(self.clients_of(j)) for j in range(self.servers)]
