"""Federated training loop for FeSoG / FedGNN: the server samples users, the user groups
compute their users' local gradients (batched) and LDP, the aggregation aggregation sums them,
the server steps (the parties: :mod:`.parties`); validation-based early stopping as
``FeSoG/main.py`` (evaluate every ``eval_every`` rounds, test RMSE/MAE at the best
validation RMSE, stop after ``patience`` evaluations without improvement). With a
checkpoint directory a run saves itself every few evaluations and resumes from there
(:meth:`FedRecTrainer.run`; each party writes its own file, :mod:`.checkpoint`).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from protocols.dp.rng import VOID, make_rng, noise_label
from protocols.names import HONEST_BUT_CURIOUS
from securefgl.algorithms.recommendation.aggregation import (
    ServerView,
    aggregate_uploads,
    sums_from_payload,
    users_transport,
)
from securefgl.algorithms.recommendation.checkpoint import Stateful, load_arrays, save_arrays
from securefgl.algorithms.recommendation.expansion import TAG_REPLY, TAG_UPLOAD, new_token_key
from securefgl.algorithms.recommendation.ldp import UserLedger
from securefgl.algorithms.recommendation.parties import (
    AGGREGATOR,
    MODEL_TAG,
    SUMS_TAG,
    THIRD_PARTY,
    UPLOAD_TAG,
    ExpansionParty,
    RecAggregator,
    RecServer,
    UserGroup,
    group_id,
    group_of,
    recipes,
)
from securefgl.algorithms.recommendation.settings import Method, RecConfig
from securefgl.algorithms.recommendation.uploads import from_payloads
from securefgl.config import ConfigError
from securefgl.data.datasets import private_dir
from securefgl.data.rating_views import ClientViews
from securefgl.federation import SERVER, Call, Executor, LocalExecutor, PartyError, Target
from securefgl.federation.channel import Channel
from securefgl.federation.progress import Progress
from securefgl.federation.transcript import Transcript

__all__ = ["FedRecTrainer", "Method", "RecConfig", "RecResult"]
logger = logging.getLogger(__name__)
R = TypeVar("R")
#: settings that may change between a checkpoint and its resumption (where and how long
#: the run goes on, not what it computes)
#: the users' write-ahead LDP ledger in a checkpoint directory (:meth:`FedRecTrainer.resume`)
LEDGER_JOURNAL = "ledger.jsonl"
RESUMABLE_CHANGES = ("rounds", "time_budget_s", "executor", "workers", "ray_address",
                     "party_timeout", "ray_co_host")  # fmt: skip


def rmse_mae(pred: np.ndarray, label: np.ndarray) -> tuple[float, float]:
    err = pred - label
    return float(np.sqrt(np.mean(err**2))), float(np.mean(np.abs(err)))


def rmse_detail(pred: np.ndarray, label: np.ndarray, warm: np.ndarray) -> dict[str, float]:
    """RMSE / MAE overall and split by warm items (≥ 1 training rating) vs cold items."""
    rmse, mae = rmse_mae(pred, label)
    out = {"rmse": rmse, "mae": mae, "cold_share": float(1.0 - warm.mean())}
    for name, m in (("warm", warm), ("cold", ~warm)):
        out[f"rmse_{name}"] = rmse_mae(pred[m], label[m])[0] if m.any() else float("nan")
    return out


def _warn_counts(cfg: RecConfig) -> None:
    """What the per-row counts of a secure aggregation reveal (the family's README,
    'What the counts reveal'): with FeSoG's weighted averages a single round's weight sums;
    across rounds FeSoG's links unless users upload only their own row, and for both methods
    the users' rating counts and rated items (:mod:`attacks.row_counts`)."""
    if cfg.method == "fesog" and not cfg.uniform_averages:
        logger.warning(
            "fesog under %s with weighted averages: the server learns each user row's "
            "weight sum (FeSoG's aggregator), from which a small cohort's rating counts "
            "and social links can be decoded in a single round; averages = 'uniform' (the "
            "default under a secure aggregation) closes that single-round decoding",
            cfg.aggregation,
        )  # fmt: skip
    if cfg.method == "fesog" and not cfg.own_user_rows:
        logger.warning(
            "fesog under %s with neighbours' user rows: across rounds the server's user-row "
            "counts name who links to whom (every link of FilmTrust and Ciao within 400 "
            "rounds of 256 users: benchmarks.fesog_count_leaks); social_rows = 'own' (the "
            "default under a secure aggregation) takes the links out of the counts",
            cfg.aggregation,
        )  # fmt: skip
    if cfg.row_dp.on:
        logger.info(
            "%s under %s with row DP (z = %g, at most %d item rows a user and round): the "
            "counts and sums the server learns are a Gaussian mechanism of each user's data; "
            "ε in the run's privacy record", cfg.method, cfg.aggregation, cfg.row_dp.noise,
            cfg.row_dp.rows,
        )  # fmt: skip
        return
    logger.warning(
        "%s under %s: across rounds the server's item-row counts give each user's rating "
        "count (a round's item-row counts sum to its cohort's ratings + pseudo items) and "
        "the item support of the rounds a user joined narrows down its rated items "
        "(benchmarks.fesog_count_leaks); row_dp_noise > 0 puts the counts and sums "
        "under user-level DP (the family's README, 'Row DP')",
        cfg.method, cfg.aggregation,
    )  # fmt: skip


def row_dp_summands(cfg: RecConfig, cohort: int) -> int:
    """The fewest noise shares in any sum the server can open: the cohort under an
    honest-but-curious server; under a malicious one (it chooses the cohorts and may claim
    dropouts) the floor the members' transport enforces
    (:meth:`protocols.base.AggregationProtocol.min_summands`)."""
    if cfg.threat_model == HONEST_BUT_CURIOUS:
        return cohort
    floor = users_transport(cfg.transport, "row-dp-floor", cfg.transport_options()
                            ).min_summands(cohort)  # fmt: skip
    return cohort if floor is None else min(floor, cohort)


def row_dp_claim(cfg: RecConfig, releases: int, cohort: int) -> dict[str, Any]:
    """The (ε, δ) of :mod:`.row_dp` for the user who joined the most rounds, stated against
    the run's adversary and the assumptions it rests on (``cohort``: users a round)."""
    m, c = row_dp_summands(cfg, cohort), cfg.row_dp.colluding
    multiplier = cfg.row_dp.multiplier(cfg.row_dp_parts, m, cohort)
    extra = ("; not the token matching of FedGNN's graph expansion (its third party)"
             if cfg.method == "fedgnn" else
             "; a link known to both its ends only at group size 2")  # fmt: skip
    server = ("the server, honest-but-curious" if cfg.threat_model == HONEST_BUT_CURIOUS else
              f"the server, malicious (it may claim dropouts: charged at the {m} of {cohort} "
              "members' shares the transport's members enforce in any sum it opens)")  # fmt: skip
    return {
        "epsilon": cfg.row_dp.epsilon(releases, cfg.row_dp_parts, m, cohort),
        "delta": cfg.row_dp.delta,
        "unit": "user-level: everything the secure aggregation's outputs say of one user's "
                "data (which item rows it uploads, their counts and sums, its user row, the "
                f"model), replacing that user's data, over the {releases} rounds the most "
                f"active user joined{extra}",
        "adversary": f"{server}, choosing the cohorts (no amplification by sampling), with "
                     f"{c} colluding cohort members (Sybils included) whose noise shares it "
                     "knows; each member adds its share of the noise, and all are sent the "
                     "same support",
        "mechanism": f"Gaussian, effective noise multiplier {multiplier:.4g} a round (counts and "
                     f"{cfg.row_dp_parts - 1} parts of sums jointly), RDP accountant",
    }  # fmt: skip


@dataclass
class RecResult:
    config: dict
    test_rmse: float
    test_mae: float
    val_rmse: float
    rounds: int
    seconds: float
    seconds_per_round: float
    privacy: dict
    history: list[dict]
    detail: dict = field(default_factory=dict)  # test metrics split by warm / cold items
    stopped: str = "rounds"  # what ended the run: rounds, patience or time budget
    #: a secure transport's max abs error of any sum against the float64 sums of the users'
    #: inputs (None: plain / ideal, exact)
    aggregate_max_abs_error: float | None = None


class FedRecTrainer:
    """The driver of a run: it orders the parties' calls (:mod:`.parties`) on the executor
    of ``cfg.executor`` and relays every message through its Channel; it also holds the
    evaluation harness (all users' ratings: simulator only) and the users' LDP ledger."""

    def __init__(self, views: ClientViews, cfg: RecConfig) -> None:
        self.views, self.cfg = views, cfg
        most = int(views.train.lengths(np.arange(views.n_users)).max(initial=0))
        if cfg.pseudo_items and most + cfg.pseudo_items > views.n_items:
            raise ConfigError(
                f"pseudo_items = {cfg.pseudo_items}: a user who rated {most} of the "
                f"{views.n_items} items has fewer unrated items to draw them from; lower it"
            )
        if cfg.aggregation != "plain":
            _warn_counts(cfg)
        # the users' shared token key (FedGNN expansion): made by the key authority
        self.token_key = new_token_key() if cfg.method == "fedgnn" else b""
        parties = recipes(views, cfg, self.token_key)
        if cfg.executor == "ray":
            from securefgl.federation.ray_executor import RayExecutor

            self.executor: Executor = RayExecutor(
                parties,
                workers=cfg.workers,
                address=cfg.ray_address,
                party_timeout=cfg.party_timeout,
                clients=[group_id(g) for g in range(cfg.user_groups)],
                co_host=cfg.ray_co_host,
            )
        else:
            self.executor = LocalExecutor(parties)
        self.groups = [group_id(g) for g in range(cfg.user_groups)]
        self.ledger = UserLedger(views.n_users)
        self.server_views: list[ServerView] = []
        self.channel = Channel(Transcript(store_payloads=cfg.store_payloads))
        self.round_seconds: list[float] = []
        self.expanded = False
        self.n_items, self.n_table_users = self._call(SERVER, RecServer.table_sizes)

    def __enter__(self) -> FedRecTrainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the executor's remote workers (if any)."""
        self.executor.shutdown()

    def _call(self, party: str, method: Callable[..., R], *args: Any) -> R:
        return self.executor.call([Call.to(party, method, *args)])[0]

    def live_groups(self) -> list[str]:
        """The user groups still answering (a group whose worker died or timed out is
        silent for the rest of the run: its users have dropped out)."""
        live = [g for g in self.groups if g not in self.executor.silent]
        if not live:
            raise PartyError("every user group went silent: no user is left to train")
        return live

    def _each_group(self, method: Callable[..., Any], args: list[tuple]) -> list[tuple[str, Any]]:
        """``method`` on every live group; (group, answer) of those that answered."""
        groups, target = self.live_groups(), Target.of(method)
        answers = self.executor.call_survivors(
            [Call(g, target, a) for g, a in zip(groups, args, strict=False)]
        )
        got = [(g, a) for g, a in zip(groups, answers, strict=True) if a is not None]
        if not got:
            raise PartyError("every user group went silent: no user is left to train")
        return got

    # ------------------------------------------------------------------ FedGNN expansion
    def run_expansion(self) -> None:
        frames = self._each_group(UserGroup.expansion_upload, [()] * len(self.groups))
        sent = [self.channel.send(g, THIRD_PARTY, TAG_UPLOAD, f).payload for g, f in frames]
        replies = self._call(THIRD_PARTY, ExpansionParty.match, sent)
        back = [self.channel.send(THIRD_PARTY, g, TAG_REPLY, r).payload
                for (g, _), r in zip(frames, replies, strict=True)]  # fmt: skip
        self.executor.call_survivors([Call.to(g, UserGroup.expansion_reply, b)
                                      for (g, _), b in zip(frames, back, strict=True)])  # fmt: skip
        self.expanded = True

    # ------------------------------------------------------------------ one round
    def sample_users(self) -> np.ndarray:
        return self._call(SERVER, RecServer.sample)

    def _local(self, r: int, users: np.ndarray, update_local: bool
               ) -> tuple[list, list, float, np.ndarray]:  # fmt: skip
        """The groups that host a sampled user train them; returns (group ids, uploads as
        sent, sum of losses, the users that trained) and records the users' ε."""
        model = self._call(SERVER, RecServer.model)
        live = set(self.live_groups())
        self.channel.round = r
        calls, cohort = [], []
        for g, pid in enumerate(self.groups):
            mine = users[group_of(users, self.cfg.user_groups) == g]
            if mine.size and pid in live:  # a silent group's users have dropped out
                got = self.channel.send(SERVER, pid, MODEL_TAG, model).payload
                calls.append(Call.to(pid, UserGroup.local_round, mine, got, update_local))
                cohort.append(mine)
        answers = self.executor.call_survivors(calls)
        done = [(c.party, u, a) for c, u, a in zip(calls, cohort, answers, strict=True)
                if a is not None]  # fmt: skip
        if not done:
            raise PartyError(f"round {r}: no sampled user answered")
        if update_local:
            for _, u, (_, eps, _) in done:
                self.ledger.record(u, eps)
        loss = sum(a[2] for _, _, a in done)
        trained = np.concatenate([u for _, u, _ in done])
        return [g for g, _, _ in done], [a[0] for _, _, a in done], loss, trained

    def round(self, r: int, users: np.ndarray | None = None) -> ServerView:
        """One round; returns what the server received (on remote parties its contents
        only for the views kept, ``keep_views``: the payloads stay with the parties)."""
        cfg = self.cfg
        self.channel.round = r  # the expansion's messages belong to this round too
        if cfg.method == "fedgnn" and (not self.expanded or r % cfg.expand_every == 0):
            self.run_expansion()
        users = self.sample_users() if users is None else np.asarray(users, np.int64)
        hosts, uploads, loss, trained = self._local(r, users, update_local=True)
        keep = len(self.server_views) < cfg.keep_views
        # on remote parties reading a payload here would bring its bytes to the driver
        contents = keep or self.executor.held(SERVER) is not None
        if cfg.aggregation == "plain":
            got = [self.channel.send(g, SERVER, UPLOAD_TAG, p).payload
                   for g, p in zip(hosts, uploads, strict=True)]  # fmt: skip
            nbytes = self._call(SERVER, RecServer.apply_uploads, got)
            up = from_payloads(got) if contents else None
            view = ServerView(r, "plain", trained if up is None else up.users, up, None, nbytes)
        else:
            got = [self.channel.send(g, AGGREGATOR, UPLOAD_TAG, p).payload
                   for g, p in zip(hosts, uploads, strict=True)]  # fmt: skip
            sums = self._call(AGGREGATOR, RecAggregator.aggregate, r, got)
            sums = self.channel.send(AGGREGATOR, SERVER, SUMS_TAG, sums).payload
            meta = self._call(SERVER, RecServer.apply_sums, sums)
            view = ServerView(r, cfg.aggregation, users, None,
                              sums_from_payload(sums) if contents else None,
                              int(meta["bytes_up"]))  # fmt: skip
            view.extra.update({k: v for k, v in meta.items() if k == "support_bytes"})
        view.extra["train_loss"] = loss / max(users.size, 1)
        if keep:
            self.server_views.append(view)
        return view

    def observe(self, r: int, aggregation: str | None = None) -> ServerView:
        """What the server would receive in round ``r`` (no update is applied, nothing is
        charged to the ledger): the input of the interaction-inference attack, a measurement
        outside the run's releases (its ε does not cover this round; no deployment sends it)."""
        if self.cfg.method == "fedgnn" and not self.expanded:
            self.run_expansion()
        _, uploads, _, _ = self._local(r, self.sample_users(), update_local=False)
        sizes = (self.n_items, self.n_table_users)
        how = aggregation or self.cfg.aggregation
        dp = None  # under row DP the server's view of the round carries its noise
        if self.cfg.row_dp.on and how != "plain":
            dp = (self.cfg.row_dp, make_rng(self.cfg.noise_seed, "row-dp-observed", r))
        return aggregate_uploads(from_payloads(uploads), how, r, *sizes, dp=dp)[1]

    # ------------------------------------------------------------------ evaluation
    def _predictions(self, part: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(r̂, r, item) of every user's ratings in ``part`` (the evaluation harness)."""
        model = self._call(SERVER, RecServer.model)
        args = [(part, model)] * len(self.groups)
        got = [p for _, p in self._each_group(UserGroup.predict, args)]
        return tuple(np.concatenate([p.array(k) for p in got]) for k in ("pred", "rating", "item"))

    def evaluate(self, part: str) -> tuple[float, float]:
        pred, rating, _ = self._predictions(part)
        return rmse_mae(pred, rating)

    def evaluate_detail(self, part: str) -> dict[str, float]:
        pred, rating, item = self._predictions(part)
        return rmse_detail(pred, rating, self.views.warm_items()[item])

    # ------------------------------------------------------------------ checkpoints
    def _stateful(self) -> list[str]:
        third = [THIRD_PARTY] if self.cfg.method == "fedgnn" else []
        return [SERVER, *self.groups, *third]

    def _aggregate_error(self, saved: dict[str, Any] | None) -> float | None:
        """The run's max abs error of the secure sums (rounds before a resume included)."""
        if self.cfg.aggregation in ("plain", "ideal"):
            return None
        errors = [self._call(AGGREGATOR, RecAggregator.aggregate_error),
                  (saved or {}).get("aggregate_error")]  # fmt: skip
        return max((e for e in errors if e is not None), default=None)

    def _comparable(self) -> dict:
        return {k: v for k, v in self.cfg.to_dict().items() if k not in RESUMABLE_CHANGES}

    def save_checkpoint(self, directory: str | Path, progress: dict[str, Any]) -> None:
        """Every stateful party writes its own state into ``directory/round-N``, then the
        driver its own (the progress record, the users' ledger) and a pointer to it; older
        round directories are removed once the pointer has moved."""
        root = Path(directory)
        here = root / f"round-{progress['round']}"
        self.executor.map(self._stateful(), Stateful.save_state, str(here))
        arrays = {**self.ledger.to_arrays(), "round_seconds": np.asarray(self.round_seconds)}
        save_arrays(here / "driver.npz", arrays, progress)
        save_arrays(root / "latest.npz", {}, {"round": here.name, "config": self._comparable()})
        for old in root.glob("round-*"):
            if old != here:
                shutil.rmtree(old, ignore_errors=True)

    def load_checkpoint(self, directory: str | Path) -> dict[str, Any] | None:
        """Restore every party and the driver from ``directory`` (None: no checkpoint);
        the progress record of the saved run."""
        root = Path(directory)
        if not (root / "latest.npz").exists():
            return None
        _, pointer = load_arrays(root / "latest.npz")
        saved, now = pointer["config"], self._comparable()
        if saved != now:
            keys = sorted(k for k in {*saved, *now} if saved.get(k) != now.get(k))
            changed = ", ".join(f"{k} {saved.get(k)!r} → {now.get(k)!r}" for k in keys)
            raise ConfigError(f"{root} holds a checkpoint of another configuration ({changed}): "
                              "run it as saved, or give another --checkpoint")  # fmt: skip
        here = root / pointer["round"]
        self.executor.map(self._stateful(), Stateful.load_state, str(here))
        arrays, progress = load_arrays(here / "driver.npz")
        self.ledger = UserLedger.from_arrays(self.views.n_users, arrays)
        self.round_seconds = arrays["round_seconds"].tolist()
        self.expanded = False  # the groups' expansion is not kept: expand again
        logger.info("resumed from %s", here)
        return progress

    def resume(self, directory: str | Path) -> dict[str, Any] | None:
        """Attach the run's checkpoint ``directory``: restore its latest checkpoint (None:
        there is none) and the users' ledger from its write-ahead journal, which holds every
        release ever made (the rounds after the checkpoint, replayed now, included); every
        later release is journaled before it is sent."""
        root = Path(directory)
        private_dir(root)
        progress = self.load_checkpoint(root)
        self.ledger = UserLedger.journaled(
            self.views.n_users, root / LEDGER_JOURNAL, {"config": self._comparable()},
            start=self.ledger,
        )  # fmt: skip
        return progress

    def run(
        self, checkpoint: str | Path | None = None, checkpoint_every: int = 10,
        progress: bool = False,
    ) -> RecResult:  # fmt: skip
        """Train until patience, ``rounds`` or the time budget (checked after every round).
        ``checkpoint``: a directory where the run saves itself every ``checkpoint_every``
        evaluations and from which it resumes if it holds a checkpoint of the same
        configuration. ``progress``: a bar on a terminal (else a progress line a minute,
        :mod:`securefgl.federation.progress`)."""
        cfg = self.cfg
        best, detail, bad, history, start, before = np.inf, {}, 0, [], 0, 0.0
        saved = None if checkpoint is None else self.resume(checkpoint)
        if saved is not None:
            best, bad, history = saved["best"], saved["bad"], saved["history"]
            detail, start, before = saved["detail"], saved["round"], saved["seconds"]
        t0 = time.perf_counter() - before
        r, stopped = start - 1, "rounds"
        label = f"{cfg.method} seed={cfg.seed}"
        with Progress(label, cfg.rounds, progress, cap=True) as bar:
            for r in range(start, cfg.rounds):
                t = time.perf_counter()
                view = self.round(r)
                self.round_seconds.append(time.perf_counter() - t)
                if (r + 1) % cfg.eval_every == 0:
                    val = self.evaluate("val")
                    if val[0] < best:
                        best, bad = val[0], 0
                        detail = self.evaluate_detail("test")
                    else:
                        bad += 1
                    history.append(
                        {
                            "round": r + 1,
                            "val_rmse": val[0],
                            "val_mae": val[1],
                            "train_loss": view.extra["train_loss"],
                        }
                    )
                    logger.info("round %d val rmse %.4f mae %.4f", r + 1, *val)
                    if bad > cfg.patience:
                        stopped = "patience"
                        break
                    if checkpoint is not None and len(history) % checkpoint_every == 0:
                        progress_record = {"round": r + 1, "best": float(best), "bad": bad,
                                           "history": history, "detail": detail,
                                           "seconds": time.perf_counter() - t0,
                                           "aggregate_error": self._aggregate_error(
                                               saved)}  # fmt: skip
                        self.save_checkpoint(checkpoint, progress_record)
                bar.step(best_val_rmse=None if not np.isfinite(best) else float(best))
                if cfg.time_budget_s and time.perf_counter() - t0 > cfg.time_budget_s:
                    logger.info("time budget reached at round %d", r + 1)
                    stopped = "time budget"
                    break
        if not np.isfinite(best):
            best = self.evaluate("val")[0]
            detail = self.evaluate_detail("test")
        secs = time.perf_counter() - t0
        lost = sorted(set(self.groups) & self.executor.silent)
        if lost:  # their users dropped out: metrics cover the surviving users only
            logger.warning("user groups %s went silent; metrics cover the others", lost)
            detail = {**detail, "silent_user_groups": lost}
        spent = self.ledger.summary()
        claims = []
        if cfg.ldp.mode == "laplace" and self.ledger.guaranteed:  # none / heuristic: no claim
            rows, extra = "item rows", (
                "; nor the exact embedding graph expansion sends the third party (and, "
                "through it, the co-raters)" if cfg.method == "fedgnn" else ""
            )  # fmt: skip
            if cfg.method == "fesog":
                rows, extra = "item and user rows", (
                    "; nor whom it is linked to (its user rows name its social neighbours) "
                    "or how many ratings it holds (its weight)")  # fmt: skip
            claims.append({"epsilon": spent["epsilon_max_user"], "delta": 0.0,
                           "unit": f"user-level: the values of a user's uploads, given the {rows} "
                                   "it uploads (local DP, the worst user); not which items "
                                   "it rated, which the rows show (pseudo-items only blur "
                                   f"them: interaction inference measures it){extra}",
                           "adversary": "everyone (local DP)"})  # fmt: skip
        if cfg.row_dp.on:
            cohort = min(cfg.users_per_round, self.views.active_users().size)
            claims.append(row_dp_claim(cfg, int(spent["max_releases"]), cohort))
        if cfg.seeded_noise:  # each claim says so itself, for whoever reads one claim alone
            claims = [{**g, "void": VOID} for g in claims]
        # FeSoG's user-row and model averages (what a secure aggregation's counts reveal)
        averages = {"averages": "uniform" if cfg.uniform_averages else "weighted",
                    "social_rows": "own" if cfg.own_user_rows else "neighbours"}  # fmt: skip
        privacy = {
            "mode": cfg.ldp.mode,
            "clip": cfg.ldp.clip,
            "lam": cfg.ldp.lam,
            "paper_epsilon_per_coordinate": cfg.ldp.paper_epsilon,
            **spent,
            "guarantees": claims,
            "noise": noise_label(cfg.seeded_noise, cfg.ldp.mode != "none" or cfg.pseudo_items > 0
                                 or cfg.row_dp.on),  # fmt: skip
            "row_dp": asdict(cfg.row_dp)
            if cfg.row_dp.on else None,
            **(averages if cfg.method == "fesog" else {}),
            **({"void": VOID} if cfg.seeded_noise else {}),  # the bare ε figures above too
        }
        return RecResult(
            cfg.to_dict(),
            detail["rmse"],
            detail["mae"],
            float(best),
            r + 1,
            secs,
            float(np.mean(self.round_seconds)),
            privacy,
            history,
            detail,
            stopped,
            self._aggregate_error(saved),
        )
