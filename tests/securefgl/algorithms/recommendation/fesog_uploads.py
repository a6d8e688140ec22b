"""One FeSoG cohort's uploads from a fixed initial model (shared by the recommendation tests)."""

from __future__ import annotations

import numpy as np
import torch

from securefgl.algorithms.recommendation import fesog
from securefgl.algorithms.recommendation.uploads import Uploads
from securefgl.data.rating_views import ClientViews


def fesog_uploads(
    views: ClientViews, users: np.ndarray, dim: int = 4, uniform: bool = True,
    neighbour_rows: bool = True, seed: int = 0,
) -> Uploads:  # fmt: skip
    """``users``' uploads (2 pseudo items each) from the model initialised with seed 0."""
    state = fesog.init_fesog(views.n_users, views.n_items, dim, torch.Generator().manual_seed(0))
    cfg = fesog.FeSoGConfig(dim, 2, uniform_averages=uniform, neighbour_rows=neighbour_rows)
    return fesog.local_gradients(state, views, users, cfg, np.random.default_rng(seed))
