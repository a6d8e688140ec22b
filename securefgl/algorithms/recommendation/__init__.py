"""User-level federated graph recommendation: FeSoG and FedGNN.

One client is one user holding only its own ratings (and, for FeSoG, its own social
links). The server holds item embeddings, model parameters and (FeSoG) user embeddings and
aggregates the users' gradients; LDP, pseudo items, secure aggregation and FedGNN's
third-party graph expansion protect which items a user rated.

Modules: :mod:`.settings` (the ``[experiment.recommendation]`` section, a run's settings),
:mod:`.ldp` (per-user LDP and privacy ledger), :mod:`.pseudo` (pseudo items),
:mod:`.fesog` / :mod:`.fedgnn` (models and per-user gradients), :mod:`.expansion` (FedGNN
graph expansion), :mod:`.aggregation` (uploads and secure sums), :mod:`.parties`,
:mod:`.trainer` (rounds), :mod:`.central` (the non-federated upper reference),
:mod:`.runner` (an experiment). The rating data and its per-user views are in
:mod:`securefgl.data.ratings` and :mod:`securefgl.data.rating_views`.
"""

from collections.abc import Sequence
from typing import ClassVar

from securefgl.algorithms.recommendation.settings import RecommendationSettings
from securefgl.config.families import Family, Section


class RecommendationMethod:
    """A recommendation method by name (run by :func:`.runner.run_recommendation`)."""

    name: ClassVar[str]
    task: ClassVar[str] = "recommendation"


class FeSoG(RecommendationMethod):
    name = "fesog"


class FedGNN(RecommendationMethod):
    name = "fedgnn"


class CentralReference(RecommendationMethod):
    name = "central"


def _classes() -> Sequence[type]:
    return (FeSoG, FedGNN, CentralReference)


def _run(*args: object, **kwargs: object) -> object:
    from securefgl.algorithms.recommendation.runner import run_recommendation

    return run_recommendation(*args, **kwargs)  # type: ignore[arg-type]


FAMILY = Family(
    name="recommendation",
    algorithms=("fesog", "fedgnn", "central"),
    load=_classes,
    task="recommendation",
    section=Section(
        "recommendation", RecommendationSettings, "recommendation (FeSoG, FedGNN)", ""
    ),
    defaults=("fesog",),
    task_defaults={"dataset": "FilmTrust", "rounds": 2000, "lr": 0.1, "weight_decay": 1e-3,
                   "eval_every": 20},  # fmt: skip
    run=_run,
)
