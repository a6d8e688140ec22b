"""Shared test setup: tiny graphs gain nothing from intra-op threads, and CI has 2 cores.

Hypothesis: on a shared, loaded machine data generation can be slow through no fault of the
code, so the timing health check and the per-example deadline are off (every property is
still checked on every example).
"""

import torch
from hypothesis import HealthCheck, settings

torch.set_num_threads(1)
settings.register_profile("securefgl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("securefgl")

from benchmarks.harness.checkout_families import register_checkout_families  # noqa: E402

register_checkout_families()  # families this checkout adds before it is re-installed
