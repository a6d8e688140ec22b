"""How a process that hosts parties sets up torch: its intra-op threads, and subnormal
floats flushed to zero.

Late in training, confident softmax outputs make gradients underflow below float32's
smallest normal number (about 1.2e-38); x86 CPUs compute on such subnormal numbers many
times more slowly, so the last rounds of a long run can cost several times the first ones.
Flushing them to zero changes values only below that magnitude. The CPU flag is per thread
(threads inherit it when they start), so it is set wherever party calls run: at the start
of a simulated run, and at each call batch of a Ray worker or request of a party daemon.
"""

from __future__ import annotations

import torch


def configure_torch(threads: int | None = None) -> None:
    """Flush subnormal floats to zero in this thread (and the threads it starts later);
    with ``threads``, also set torch's intra-op thread count."""
    if threads is not None:
        torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
