"""User-level federated graph recommendation (survey §4.1–4.2): FeSoG and FedGNN.

One client is one user holding only its own ratings (and, for FeSoG, its own social
links). The server holds item embeddings, model parameters and (FeSoG) user embeddings and
aggregates the users' gradients; LDP, pseudo items, secure aggregation and FedGNN's
third-party graph expansion protect which items a user rated.

Modules: :mod:`.data` (loaders), :mod:`.views` (per-user split and client views, batch
gathering), :mod:`.ldp` (per-user LDP and privacy ledger), :mod:`.pseudo` (pseudo items),
:mod:`.fesog` / :mod:`.fedgnn` (models and per-user gradients), :mod:`.expansion` (FedGNN
graph expansion), :mod:`.aggregation` (uploads and secure sums), :mod:`.trainer` (rounds),
:mod:`.central` (the non-federated upper reference).
"""

from securefgl.recommendation.data import RATING_DATASETS, RatingData, load_ratings
from securefgl.recommendation.views import ClientViews, UserView, split_per_user

__all__ = [
    "RATING_DATASETS",
    "ClientViews",
    "RatingData",
    "UserView",
    "load_ratings",
    "split_per_user",
]
