"""The rating datasets as the recommendation benchmarks load them."""

from __future__ import annotations

from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import load_ratings


def load_views(name: str, seed: int = 0) -> ClientViews:
    """``name``'s client views, split with ``seed``: FilmTrust with FeSoG's preprocessing
    (users in the trust network, ratings 2r − 1), the others raw."""
    variant = "fesog" if name == "FilmTrust" else "raw"
    return ClientViews.from_data(load_ratings(name, variant=variant, seed=seed), seed=seed)
