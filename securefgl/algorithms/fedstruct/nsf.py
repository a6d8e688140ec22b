"""Node structure features (NSFs) of FedStruct (Aliakbari et al., ICLR 2025, Sec. 5.1, App. A).

Each client computes the rows ``S_i`` of its own nodes from its own view (internal edges and,
in the ``known`` setting, its cross edges). Generators (``NSF_KINDS``): ``degree`` (DEG: a
one-hot of the full degree, clipped to ``dim - 1`` as in the official code); ``fedstar``
(FED*: ``rw_steps`` random-walk return probabilities + a one-hot degree); ``random`` (a fixed
N(0, 1) control); ``hop2vec`` (H2V, Sec. 5.5: the N(0, init_std²) initialisation of the
learnable NSFs, trained by :mod:`~securefgl.algorithms.fedstruct.algorithm`).

Deviation (FED*): the paper takes ``diag(Â^k)`` during the federated Ā build, which returns
only the client's rows; here step k is ``diag(P_i^k)`` with ``P_i = D̃_i^{-1}(A_ii + I)``, the
client's own block of Â (FedStar's construction, Tan et al. 2023, with global degrees):
exact when the k-step return walks stay inside the client, a lower bound otherwise. Every
generator returns float32 ``[n_i, dim]``; draws depend only on ``(seed, client_id, kind)``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from securefgl.algorithms.fedstruct.settings import NSF_KINDS
from securefgl.data import ClientGraph

__all__ = [
    "NSF_KINDS",
    "degree_one_hot",
    "full_degree",
    "node_structure_features",
    "return_probabilities",
]

_KIND_TAG = {kind: k for k, kind in enumerate(NSF_KINDS)}


def full_degree(view: ClientGraph) -> np.ndarray:
    """Degree of each own node: internal neighbours plus external ones (known mode).

    In ``hidden`` mode cross edges are unknown and this is the internal degree only.
    """
    n = view.num_nodes
    internal = np.bincount(view.edge_index[0].numpy(), minlength=n)
    external = np.bincount(view.external_edges[0].numpy(), minlength=n)
    return (internal + external).astype(np.int64)


def degree_one_hot(degree: np.ndarray, width: int) -> np.ndarray:
    """One-hot rows of ``min(degree, width - 1)``."""
    if width < 1:
        raise ValueError(f"one-hot width must be >= 1, got {width}")
    out = np.zeros((degree.shape[0], width), dtype=np.float32)
    out[np.arange(degree.shape[0]), np.minimum(degree, width - 1)] = 1.0
    return out


def _own_block(view: ClientGraph) -> sp.csr_matrix:
    """``P_i = D̃_i^{-1}(A_ii + I)`` with the full degree in ``D̃_i`` (see module doc)."""
    n = view.num_nodes
    ei = view.edge_index.numpy()
    a = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n))
    a.data[:] = 1.0  # duplicates collapse to one edge
    inv = 1.0 / (full_degree(view) + 1.0)
    return (sp.diags(inv) @ (a + sp.identity(n, format="csr"))).tocsr()


def return_probabilities(p: sp.spmatrix, steps: int, block: int = 512) -> np.ndarray:
    """``[diag(P^1), ..., diag(P^steps)]`` as ``[n, steps]``, never forming a dense ``P^k``.

    Columns are processed in blocks of ``block``: ``X <- P X`` starting from the identity
    columns, so the cost is ``steps * nnz(P) * n`` and memory ``n * block``.
    """
    n = p.shape[0]
    out = np.zeros((n, steps))
    p = sp.csr_matrix(p)
    for start in range(0, n, block):
        cols = np.arange(start, min(start + block, n))
        x = np.zeros((n, cols.size))
        x[cols, np.arange(cols.size)] = 1.0
        for k in range(steps):
            x = p @ x
            out[cols, k] = x[cols, np.arange(cols.size)]
    return out


def node_structure_features(
    view: ClientGraph,
    kind: str,
    dim: int,
    seed: int = 0,
    rw_steps: int = 50,
    init_std: float = 0.05,
) -> np.ndarray:
    """The NSF rows ``S_i`` of ``view``'s own nodes (local order), float32 ``[n_i, dim]``."""
    if kind not in NSF_KINDS:
        raise ValueError(f"unknown NSF {kind!r}; choose from {list(NSF_KINDS)}")
    if dim < 1:
        raise ValueError(f"NSF dimension must be >= 1, got {dim}")
    n = view.num_nodes
    rng = np.random.default_rng([seed, view.client_id, _KIND_TAG[kind], 0x4E5F])
    if kind == "degree":
        return degree_one_hot(full_degree(view), dim)
    if kind == "fedstar":
        steps = min(rw_steps, dim - 1)
        if steps < 1:
            raise ValueError(f"fedstar needs dim >= 2 (random-walk steps + degree), got {dim}")
        rw = return_probabilities(_own_block(view), steps).astype(np.float32)
        return np.hstack([rw, degree_one_hot(full_degree(view), dim - steps)])
    if kind == "random":
        return rng.standard_normal((n, dim)).astype(np.float32)
    return (init_std * rng.standard_normal((n, dim))).astype(np.float32)
