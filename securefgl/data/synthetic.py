"""Contextual stochastic block model (CSBM), the default generated graph.

CSBM as in Deshpande et al. 2018 ("Contextual stochastic block models"): labels
from a block model, Gaussian features whose mean depends on the class. This variant
fixes the expected *edge homophily* (fraction of same-class edges) instead of the
within/between block probabilities, and samples edges in O(n * avg_degree) time and
memory (never an n x n matrix):

* ``m = round(n * avg_degree / 2)`` candidate undirected edges; each picks a uniform
  source node, then with probability ``homophily`` a uniform target of the same class,
  otherwise a uniform target among the nodes of all other classes. Nodes are sorted
  by class into contiguous blocks, so both draws are one vectorised index computation.
* Candidates are symmetrised, deduplicated and self-loops removed, so the realised
  degree and homophily are slightly below the requested values on small graphs
  (duplicates are likelier inside a class); the gap vanishes as n grows.
* Labels: a random permutation of ``arange(n) % C`` (class sizes differ by at most 1).
* Features: ``x_v = mu_{y_v} + eps_v`` with ``mu_c ~ N(0, feature_signal^2 I)`` and
  ``eps_v ~ N(0, I)``, float32.
"""

from __future__ import annotations

import inspect
import logging
import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch is imported by csbm() itself: checking options needs none
    import torch
    from torch_geometric.data import Data

__all__ = ["check_csbm_options", "csbm", "edge_homophily"]

logger = logging.getLogger(__name__)


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def _check_args(
    num_nodes: int,
    num_classes: int,
    num_features: int,
    avg_degree: float,
    homophily: float,
    feature_signal: float,
) -> None:
    _check(
        isinstance(num_nodes, int | np.integer) and num_nodes >= 2,
        f"num_nodes must be an integer >= 2, got {num_nodes!r}",
    )
    _check(
        isinstance(num_classes, int | np.integer) and num_classes >= 2,
        f"num_classes must be an integer >= 2, got {num_classes!r}",
    )
    _check(
        num_classes <= num_nodes,
        f"num_classes ({num_classes}) must not exceed num_nodes ({num_nodes})",
    )
    _check(
        isinstance(num_features, int | np.integer) and num_features >= 1,
        f"num_features must be an integer >= 1, got {num_features!r}",
    )
    _check(
        math.isfinite(avg_degree) and 0 < avg_degree <= num_nodes - 1,
        f"avg_degree must be in (0, num_nodes - 1], got {avg_degree!r}",
    )
    _check(
        math.isfinite(homophily) and 0.0 <= homophily <= 1.0,
        f"homophily must be in [0, 1], got {homophily!r}",
    )
    _check(
        math.isfinite(feature_signal) and feature_signal >= 0,
        f"feature_signal must be a finite number >= 0, got {feature_signal!r}",
    )


def check_csbm_options(options: dict[str, Any]) -> None:
    """Check ``csbm(**options)``'s arguments without generating: names against the
    signature, types against the defaults' (ints for floats accepted), then the values."""
    if not isinstance(options, dict):
        raise TypeError(f"give a table of csbm() arguments, got {options!r}")
    params = inspect.signature(csbm).parameters
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise ValueError(f"unknown csbm option(s) {unknown}; known: {list(params)}")
    for key, value in options.items():
        kind = type(params[key].default)
        ok = isinstance(value, numbers.Integral if kind is int else numbers.Real)
        if not ok or isinstance(value, bool):
            what = "an integer" if kind is int else "a number"
            raise TypeError(f"{key} must be {what}, got {value!r}")
    _check(options.get("seed", 0) >= 0, f"seed must be >= 0, got {options.get('seed')!r}")
    args = {k: p.default for k, p in params.items() if k != "seed"}
    args.update((k, v) for k, v in options.items() if k != "seed")
    _check_args(**args)


def csbm(
    num_nodes: int = 3000,
    num_classes: int = 5,
    num_features: int = 64,
    avg_degree: float = 8.0,
    homophily: float = 0.8,
    feature_signal: float = 1.0,
    seed: int = 0,
) -> Data:
    """Generate a CSBM graph (see module docstring); deterministic in ``seed``.

    Returns a ``Data`` with ``x`` [n, F] float32, ``y`` [n] int64, an undirected,
    coalesced ``edge_index`` without self-loops, ``name="csbm"`` and ``num_classes``.
    """
    _check_args(num_nodes, num_classes, num_features, avg_degree, homophily, feature_signal)
    n, C = int(num_nodes), int(num_classes)
    rng = np.random.default_rng(seed)

    y = rng.permutation(np.arange(n, dtype=np.int64) % C)
    order = np.argsort(y, kind="stable")  # nodes grouped by class
    counts = np.bincount(y, minlength=C)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])

    m = max(1, round(n * avg_degree / 2))
    src = rng.integers(0, n, size=m)
    c = y[src]
    same = rng.random(m) < homophily
    u = rng.random(m)
    # same class: uniform position inside the class block
    pos_same = starts[c] + np.minimum((u * counts[c]).astype(np.int64), counts[c] - 1)
    # other classes: uniform position among the n - |c| others, skipping c's block
    others = n - counts[c]
    r = np.minimum((u * others).astype(np.int64), others - 1)
    pos_diff = np.where(r < starts[c], r, r + counts[c])
    dst = order[np.where(same, pos_same, pos_diff)]
    del c, same, u, pos_same, others, r, pos_diff

    keep = src != dst
    lo = np.minimum(src[keep], dst[keep])
    hi = np.maximum(src[keep], dst[keep])
    key = np.sort(lo * n + hi)  # undirected; sort + diff beats np.unique's hash path
    key = key[np.concatenate([key[:1] == key[:1], key[1:] != key[:-1]])]
    lo, hi = key // n, key % n
    directed = np.sort(np.concatenate([lo * n + hi, hi * n + lo]))  # coalesced order
    import torch
    from torch_geometric.data import Data

    edge_index = torch.from_numpy(np.stack([directed // n, directed % n]))

    means = rng.standard_normal((C, num_features), dtype=np.float32) * np.float32(feature_signal)
    x = rng.standard_normal((n, num_features), dtype=np.float32)
    x += means[y]

    data = Data(x=torch.from_numpy(x), y=torch.from_numpy(y), edge_index=edge_index, num_nodes=n)
    data.name = "csbm"
    data.num_classes = C
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "csbm: n=%d, %d undirected edges, homophily=%.3f",
            n,
            key.size,
            edge_homophily(edge_index, data.y),
        )
    return data


def edge_homophily(edge_index: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of (directed) edges whose endpoints share a label (Zhu et al. 2020)."""
    if edge_index.size(1) == 0:
        return float("nan")
    return float((y[edge_index[0]] == y[edge_index[1]]).double().mean())
