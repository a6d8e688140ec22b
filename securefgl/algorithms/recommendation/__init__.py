"""User-level federated graph recommendation: FeSoG and FedGNN.

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

from typing import Any

_EXPORTS = {
    "RATING_DATASETS": "data",
    "RatingData": "data",
    "load_ratings": "data",
    "ClientViews": "views",
    "UserView": "views",
    "split_per_user": "views",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Lazy exports, so ``securefgl --help`` does not import torch_geometric."""
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
