"""Subnormal floats flushed to zero while party calls run.

Late in training, confident softmax outputs make gradients underflow below float32's
smallest normal number (about 1.2e-38); x86 CPUs compute on such subnormal numbers many
times more slowly, so the last rounds of a long run can cost several times the first ones.
Flushing them to zero changes values only below that magnitude. The CPU flag is per thread
and global to it, so it is set only around party work (a simulated run, a Ray worker's call
batch, a party daemon's request) and restored afterwards: code that runs after an
experiment in the same thread keeps IEEE subnormals.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

_TINY = torch.finfo(torch.float32).tiny


def subnormals_flushed_now() -> bool:
    """Whether this thread flushes subnormal results to zero."""
    return float(torch.tensor([_TINY]) * torch.tensor([1e-3])) == 0.0


@contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Flush subnormal floats to zero in this thread inside the block (also usable as a
    decorator); the thread's previous mode is restored on exit."""
    before = subnormals_flushed_now()
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if not before:
            torch.set_flush_denormal(False)
