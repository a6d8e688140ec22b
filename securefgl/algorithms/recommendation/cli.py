"""``securefgl recommend``: train FeSoG / FedGNN (or the central reference) on a rating
dataset and print test RMSE / MAE, privacy spent and the reports of installed plug-ins
(the ``attacks`` package adds the interaction-inference attack)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

RATING_DATASETS = ("FilmTrust", "Ciao", "Epinions", "MovieLens100K")


def _dataset(text: str) -> str:
    from securefgl.data.ratings import resolve_rating_name

    try:
        return resolve_rating_name(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _positive(kind: type) -> Callable[[str], Any]:
    """An argparse type: a ``kind`` number > 0 (finite)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {_KIND[kind]}") from None
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return value

    parse.__name__ = _KIND[kind]
    return parse


_KIND = {int: "an integer", float: "a number"}


def add_recommend_parser(sub: argparse._SubParsersAction) -> None:
    from securefgl.algorithms.recommendation.fedgnn import ARCHS, LOSSES, OFFSETS

    p = sub.add_parser("recommend", help="federated recommendation (FeSoG / FedGNN) + attack")
    p.add_argument("--method", choices=("fesog", "fedgnn", "central"), default="fesog")
    p.add_argument("--dataset", type=_dataset, default="FilmTrust", help=", ".join(RATING_DATASETS))
    p.add_argument("--root", help="data root (default: $SECUREFGL_DATA)")
    p.add_argument(
        "--variant",
        choices=("raw", "fesog"),
        default="fesog",
        help="fesog: FeSoG's FilmTrust preprocessing (ratings 2r-1)",
    )
    p.add_argument("--max-users", type=_positive(int), help="seeded user subsample")
    p.add_argument(
        "--split",
        default="per-user",
        help="per-user (60/20/20 of each user's ratings, the default) or a published fold "
        "(MovieLens100K: u1..u5, ua, ub; 20 %% of its base file for validation)",
    )
    p.add_argument(
        "--ldp",
        choices=("none", "heuristic", "laplace"),
        default=None,
        help="default: heuristic for fesog, laplace for fedgnn",
    )
    p.add_argument("--clip", type=_positive(float), default=None, help="δ (default 0.3 / 0.1)")
    p.add_argument("--lam", type=_positive(float), default=0.1, help="λ")
    p.add_argument("--pseudo-items", type=_nonnegative_int, default=10)
    p.add_argument(
        "--backend", default="plain", choices=("plain", "ideal", "ckks", "secagg", "secagg+")
    )
    p.add_argument("--users-per-round", type=_positive(int), default=256)
    p.add_argument("--rounds", type=_positive(int), default=2000)
    p.add_argument("--lr", type=_positive(float), default=0.1)
    p.add_argument("--seed", type=_nonnegative_int, default=0)
    p.add_argument(
        "--seeded-noise",
        action="store_true",
        help="NOT PRIVATE: LDP noise and pseudo items from --seed (reproducible debugging)",
    )
    p.add_argument("--budget", type=_positive(float), help="time budget in seconds")
    p.add_argument("--dim", type=_positive(int), default=8, help="embedding dimension")
    p.add_argument(
        "--offset",
        choices=OFFSETS,
        default="none",
        help="fedgnn: predict the user's own mean rating + h·e (a flagged deviation)",
    )
    p.add_argument(
        "--arch",
        choices=ARCHS,
        default="two-level",
        help="fedgnn: our two-level GAT or the paper's star graph",
    )
    p.add_argument(
        "--loss",
        choices=LOSSES,
        default="rmse",
        help="fedgnn's local loss: per-user RMSE, MSE, or the sum over the user's ratings",
    )
    p.add_argument(
        "--user-groups",
        type=_positive(int),
        default=2,
        help="parties hosting the users (user u in group u mod G); results depend on it",
    )
    p.add_argument("--executor", choices=("local", "ray"), default="local")
    p.add_argument("--workers", type=_positive(int), default=2, help="ray: worker processes")
    p.add_argument("--ray-address", help="ray: a running cluster (default: start a local Ray)")
    p.add_argument(
        "--party-timeout", type=_positive(float), help="ray: seconds before a party is dropped"
    )
    p.add_argument(
        "--checkpoint",
        help="directory where the run saves itself every 10 evaluations and from which it "
        "resumes (each party writes its own file)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _nonnegative_int(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return int(text)


def cmd_recommend(
    args: argparse.Namespace, reports: Sequence[Callable[..., dict[str, Any]]] = ()
) -> int:
    """Train, then run every ``report(trainer, views, backend) -> {name: result}`` on the
    trained federated model; results go into the JSON, their ``summary`` lines are printed."""
    import torch

    from securefgl.algorithms.recommendation.central import train_central
    from securefgl.algorithms.recommendation.ldp import LDPConfig
    from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
    from securefgl.data.rating_splits import published_split
    from securefgl.data.rating_views import ClientViews
    from securefgl.data.ratings import load_ratings

    if args.method == "central" and args.checkpoint:
        raise SystemExit("securefgl recommend: --checkpoint is for fesog / fedgnn runs")
    torch.set_num_threads(1)
    data = load_ratings(
        args.dataset, args.root, max_users=args.max_users, seed=args.seed, variant=args.variant
    )
    if args.split == "per-user":
        views = ClientViews.from_data(data, seed=args.seed)
    else:
        views = ClientViews(data, published_split(data, args.split, args.root, seed=args.seed))
    out: dict = {"dataset": data.summary()}
    reported: dict[str, Any] = {}
    if args.method == "central":
        res = train_central(views, seed=args.seed, time_budget_s=args.budget)
    else:
        mode = args.ldp or ("heuristic" if args.method == "fesog" else "laplace")
        clip = args.clip if args.clip is not None else (0.3 if args.method == "fesog" else 0.1)
        cfg = RecConfig(
            method=args.method,
            rounds=args.rounds,
            lr=args.lr,
            users_per_round=args.users_per_round,
            pseudo_items=args.pseudo_items,
            ldp=LDPConfig(mode, clip, args.lam),
            backend=args.backend,
            seed=args.seed,
            seeded_noise=args.seeded_noise,
            time_budget_s=args.budget,
            dim=args.dim,
            offset=args.offset,
            arch=args.arch,
            loss=args.loss,
            user_groups=args.user_groups,
            executor=args.executor,
            workers=args.workers,
            ray_address=args.ray_address,
            party_timeout=args.party_timeout,
        )
        with FedRecTrainer(views, cfg) as tr:
            res = tr.run(checkpoint=args.checkpoint)
            for report in reports:
                reported.update(report(tr, views, args.backend))
        out.update(reported)
    out |= {
        "method": args.method,
        "test_rmse": res.test_rmse,
        "test_mae": res.test_mae,
        "val_rmse": res.val_rmse,
        "rounds": res.rounds,
        "seconds": res.seconds,
        "privacy": res.privacy,
    }
    if args.json:
        print(json.dumps(out, indent=1, default=str))
    else:
        print(
            f"{args.method} on {data.name}: test RMSE {res.test_rmse:.4f}  "
            f"MAE {res.test_mae:.4f}  ({res.rounds} rounds, {res.seconds:.0f}s)"
        )
        print(f"privacy: {res.privacy}")
        for value in reported.values():
            if isinstance(value, dict) and "summary" in value:
                print(value["summary"])
    return 0
