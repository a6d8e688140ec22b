"""Uniform random train/val/test node splits.

FedStruct (Sec. 6, and its official code) splits the *global* node set uniformly at
random into 10% / 10% / 80%, not stratified, before partitioning into clients; the
label-rate study uses x% / 10% / (90 - x)%. Sizes are ``round(frac * n)`` (half up),
taken in the order train, val, test, each capped by what is left, so the three masks
are disjoint and never exceed n.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["random_split"]

_EPS = 1e-9


_SPLIT_SALT = 0x5B117  # independent of the partitioners' streams for the same seed


def _size(frac: float, n: int, left: int) -> int:
    return min(int(math.floor(frac * n + 0.5)), left)


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
    fracs = {"train": train, "val": val, "test": test}
    for key, f in fracs.items():
        if not math.isfinite(f) or f < 0:
            raise ValueError(f"{key} fraction must be a finite number >= 0, got {f!r}")
    if train + val + test > 1 + _EPS:
        raise ValueError(
            f"train + val + test must be <= 1, got {train} + {val} + {test} = {train + val + test}"
        )

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
