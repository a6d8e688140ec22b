"""The rating datasets as the recommendation benchmarks load them."""

from __future__ import annotations

from securefgl.data.rating_splits import published_split
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import load_ratings


def load_views(name: str, seed: int = 0) -> ClientViews:
    """``name``'s client views, split with ``seed``: FilmTrust with FeSoG's preprocessing
    (users in the trust network, ratings 2r − 1), the others raw; MovieLens-100K on its
    published u1 fold (``seed`` draws the 20 % of u1.base kept for validation), the others
    per user 60/20/20."""
    if name == "MovieLens100K":
        data = load_ratings(name)
        return ClientViews(data, published_split(data, "u1", seed=seed))
    variant = "fesog" if name == "FilmTrust" else "raw"
    return ClientViews.from_data(load_ratings(name, variant=variant, seed=seed), seed=seed)
