"""Shared test setup: tiny graphs gain nothing from intra-op threads, and CI has 2 cores."""

import torch

torch.set_num_threads(1)
