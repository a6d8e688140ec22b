"""Uniform random train/val/test node splits.

FedStruct (Sec. 6, and its official code) splits the *global* node set uniformly at
random into 10% / 10% / 80%, not stratified, before partitioning into clients; the
label-rate study uses x% / 10% / (90 - x)%. Sizes are ``round(frac * n)`` (half up),
taken in the order train, val, test, each capped by what is left, so the three masks
are disjoint and never exceed n.

:func:`client_split` draws the same fractions inside each client instead (FedSage+, Zhang
et al. 2021, and FedGLS, Fu et al., TMLR, Sec. 5.1.1: 60 / 20 / 20 of each client's nodes).
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["client_split", "random_split"]

_EPS = 1e-9


_SPLIT_SALT = 0x5B117  # independent of the partitioners' streams for the same seed
_CLIENT_SALT = 0xC5B117


def _size(frac: float, n: int, left: int) -> int:
    return min(int(math.floor(frac * n + 0.5)), left)


def _check_fractions(train: float, val: float, test: float) -> None:
    for key, f in {"train": train, "val": val, "test": test}.items():
        if not math.isfinite(f) or f < 0:
            raise ValueError(f"{key} fraction must be a finite number >= 0, got {f!r}")
    if train + val + test > 1 + _EPS:
        raise ValueError(
            f"train + val + test must be <= 1, got {train} + {val} + {test} = {train + val + test}"
        )


def random_split(
    num_nodes: int,
    train: float = 0.1,
    val: float = 0.1,
    test: float = 0.8,
    seed: int = 0,
    label_rate: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Disjoint boolean ``(train_mask, val_mask, test_mask)`` of length ``num_nodes``.

    ``label_rate`` (if given) replaces ``train`` and sets ``test = 1 - val - label_rate``.
    Nodes not in any split (fractions summing below 1) are in no mask.

    Raises:
        ValueError: negative or non-finite fractions, fractions summing above 1,
            or a negative node count.
    """
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int | np.integer):
        raise ValueError(f"num_nodes must be an integer, got {num_nodes!r}")
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be >= 0, got {num_nodes}")
    if label_rate is not None:
        if not (math.isfinite(label_rate) and 0 <= label_rate <= 1):
            raise ValueError(f"label_rate must be in [0, 1], got {label_rate!r}")
        train, test = label_rate, 1.0 - val - label_rate
        if test < -_EPS:
            raise ValueError(f"label_rate ({label_rate}) + val ({val}) exceeds 1")
        test = max(test, 0.0)
    _check_fractions(train, val, test)

    n = int(num_nodes)
    n_train = _size(train, n, n)
    n_val = _size(val, n, n - n_train)
    n_test = _size(test, n, n - n_train - n_val)
    perm = torch.from_numpy(np.random.default_rng([seed, _SPLIT_SALT]).permutation(n))
    masks = []
    for lo, hi in (
        (0, n_train),
        (n_train, n_train + n_val),
        (n_train + n_val, n_train + n_val + n_test),
    ):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[perm[lo:hi]] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]


def client_split(
    assignment: np.ndarray,
    train: float = 0.6,
    val: float = 0.2,
    test: float = 0.2,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`random_split`'s sizes and order inside each client of ``assignment`` (one
    uniform permutation per client, vectorised); nodes with a negative client (in no
    client) are in no mask."""
    _check_fractions(train, val, test)
    a = np.asarray(assignment, dtype=np.int64)
    n = a.size
    keys = np.random.default_rng([seed, _CLIENT_SALT]).random(n)
    order = np.lexsort((keys, a))
    order = order[a[order] >= 0]
    owner = a[order]
    sizes = np.bincount(owner, minlength=int(owner.max()) + 1 if owner.size else 0)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    rank = np.arange(order.size) - starts[owner]
    n_train = np.minimum(np.floor(train * sizes + 0.5), sizes)
    n_val = np.minimum(np.floor(val * sizes + 0.5), sizes - n_train)
    n_test = np.minimum(np.floor(test * sizes + 0.5), sizes - n_train - n_val)
    bounds = np.cumsum(np.stack([0 * sizes, n_train, n_val, n_test]), axis=0)[:, owner]
    masks = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[torch.from_numpy(order[(rank >= lo) & (rank < hi)])] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]
