"""Federated recommendation's settings: the ``[experiment.recommendation]`` section the user
sets (FeSoG / FedGNN specifics; the generic settings, the protocol stack and the run are
the experiment's, as for every other task), and :class:`RecConfig`, the settings of one
run as they travel to the parties (JSON), resolved from an experiment."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from protocols.fixedpoint import DEFAULT_PRECISION_BITS
from protocols.names import HONEST_BUT_CURIOUS
from protocols.names import TRANSPORT_NAMES as TRANSPORTS
from securefgl.config import ConfigError

if TYPE_CHECKING:
    from protocols.dp.ldp import LaplaceLDP

Method = Literal["fesog", "fedgnn"]
LDP_MODES = ("none", "heuristic", "laplace")
SPLITS = ("per-user", "u1", "u2", "u3", "u4", "u5", "ua", "ub")
VARIANTS = ("raw", "fesog")
ARCHS = ("two-level", "star")  # FedGNN's local graph: ours, or the paper's star
LOSSES = ("rmse", "mse", "sse")
OFFSETS = ("none", "user-mean")
#: FeSoG's user-row and model averages: weighted by w_u (its code), uniform, or auto
#: (weighted in the clear, uniform under a secure aggregation: :mod:`.aggregation`)
AVERAGES = ("auto", "weighted", "uniform")
#: the user rows a FeSoG user uploads: its own and its neighbours' (FeSoG), its own only
#: (neighbours' embeddings enter its representation as constants: :mod:`.fesog`), or auto
#: (neighbours' in the clear, own only under a secure aggregation, whose per-row counts
#: across rounds would name every link: :mod:`attacks.row_counts`)
SOCIAL_ROWS = ("auto", "neighbours", "own")

Mode = Literal["none", "heuristic", "laplace"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LDPConfig:
    """``clip`` = δ (L∞ clip bound); ``lam`` = λ (heuristic factor, or Laplace scale)."""

    mode: Mode = "none"
    clip: float = 0.3
    lam: float = 0.1
    per: Literal["coordinate", "vector"] = "coordinate"

    def mechanism(self) -> LaplaceLDP:
        """The formal mechanism: ε_coordinate = 2δ/λ (FedGNN) unless ``per='vector'``."""
        from protocols.dp.ldp import LaplaceLDP, fedgnn_epsilon

        return LaplaceLDP(clip=self.clip, epsilon=fedgnn_epsilon(self.clip, self.lam), per=self.per)

    @property
    def paper_epsilon(self) -> float | None:
        """FedGNN's reported per-coordinate ε = 2δ/λ (``None`` for the heuristic)."""
        from protocols.dp.ldp import fedgnn_epsilon

        return fedgnn_epsilon(self.clip, self.lam) if self.mode == "laplace" else None


@dataclass(frozen=True)
class RowDPConfig:
    """Row DP's settings (the mechanism: :mod:`.row_dp`): ``noise`` z (0: off), the
    per-part L2 bounds, ``rows`` m, ``threshold`` (count-noise stds), ``delta`` (of the
    reported (ε, δ)). The default bounds are 0.2 × the median norm of each part in FeSoG's
    first round on FilmTrust (items 25, w_u ≈ 21 included; users 0.5; model 2.5): the
    scale of the best validation RMSE (benchmarks/results/fesog_row_dp.md)."""

    noise: float = 0.0
    clip_items: float = 5.0
    clip_users: float = 0.1
    clip_model: float = 0.5
    rows: int = 32
    threshold: float = 3.0
    delta: float = 1e-5
    colluding: int = 0  # cohort members colluding with the server (their shares known)

    def __post_init__(self) -> None:
        if self.colluding < 0:
            raise ValueError(f"row_dp_colluding must be >= 0, got {self.colluding}")
        if not (self.noise >= 0 and math.isfinite(self.noise)):
            raise ValueError(f"row_dp_noise must be finite and >= 0, got {self.noise}")
        for part in ("items", "users", "model"):
            bound = getattr(self, f"clip_{part}")
            if not (bound > 0 and math.isfinite(bound)):
                raise ValueError(f"row_dp_clip_{part} must be finite and > 0, got {bound}")
        if self.rows < 1:
            raise ValueError(f"row_dp_rows must be >= 1, got {self.rows}")
        if not math.isfinite(self.threshold):
            raise ValueError(f"row_dp_threshold must be finite, got {self.threshold}")
        if not 0 < self.delta < 1:
            raise ValueError(f"row_dp_delta must be in (0, 1), got {self.delta}")

    @property
    def on(self) -> bool:
        return self.noise > 0

    @property
    def count_std(self) -> float:
        """Std of the noise on each item row's count: z·√(2m)."""
        return self.noise * math.sqrt(2 * self.rows)

    def sum_std(self, part: str) -> float:
        """Std of the noise on each coordinate of a part's sums (items, users, model)."""
        return self.noise * 2 * getattr(self, f"clip_{part}")

    def multiplier(self, parts: int, summands: int, cohort: int) -> float:
        """The noise multiplier of a round's joint Gaussian mechanism over ``parts`` released
        parts (counts included) when the opened sum holds at least ``summands`` of the
        ``cohort``'s noise shares, ``colluding`` of them known to the server:
        z·√(max(m − c, 0)/B)/√k (:func:`protocols.dp.clip_noise.enforced_noise_multiplier`)."""
        from protocols.dp.clip_noise import enforced_noise_multiplier

        z = enforced_noise_multiplier(self.noise, summands, cohort, self.colluding)
        return z / math.sqrt(parts)

    def epsilon(self, releases: int, parts: int, summands: int, cohort: int) -> float:
        """ε at ``delta`` of a user who joined ``releases`` rounds (RDP accountant)."""
        from protocols.dp.accounting import PrivacyAccountant

        acc = PrivacyAccountant("rdp", self.delta)
        acc.step(self.multiplier(parts, summands, cohort), 1.0, releases)
        return acc.epsilon()


def aggregating(aggregation: str) -> dict[str, Any]:
    """The :class:`RecConfig` fields of an aggregation (``"ideal"``: secagg's ideal
    functionality)."""
    if aggregation == "ideal":
        return {"transport": "secagg", "ideal_sums": True}
    return {"transport": aggregation, "ideal_sums": False}


def _option(default: Any, help: str, choices: tuple[Any, ...] | None = None, **extra: Any) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices, **extra})


@dataclass(frozen=True)
class RecommendationSettings:
    """FeSoG's and FedGNN's settings (defaults: FeSoG's code; FedGNN's where it differs)."""

    dim: int = _option(8, "embedding dimension")
    users_per_round: int = _option(256, "users sampled per round")
    pseudo_items: int = _option(10, "pseudo items per user (hide which items it rated)")
    ldp: str | None = _option(
        None, "the users' LDP (default: heuristic for fesog, laplace for fedgnn)", LDP_MODES
    )
    ldp_clip: float | None = _option(None, "δ, the L∞ clip of an upload (default 0.3 / 0.1)")
    ldp_lambda: float = _option(0.1, "λ, the heuristic factor or the Laplace scale")
    patience: int = _option(
        5, "evaluations without a better validation RMSE a run tolerates (the next one stops it)"
    )
    max_neighbors: int = _option(
        5, "FedGNN: users the graph expansion returns per item (FeSoG uses every social "
        "neighbour)",
    )  # fmt: skip
    expand_every: int = _option(20, "FedGNN: rounds between graph expansions")
    time_budget: float | None = _option(None, "seconds a run may train (default: no limit)")
    offset: str = _option(
        "none", "fedgnn: predict the user's own mean rating + h·e (a flagged deviation)",
        OFFSETS,
    )  # fmt: skip
    item_std: float = _option(1.0, "fedgnn: std of items without training ratings")
    arch: str = _option("two-level", "fedgnn: our two-level GAT or the paper's star", ARCHS)
    loss: str = _option(
        "rmse", "fedgnn's local loss: per-user RMSE, MSE or the sum over its ratings", LOSSES
    )
    user_groups: int = _option(
        2, "parties hosting the users (user u in group u mod G); results depend on it"
    )
    ideal_sums: bool = _option(
        False, "run the secure transport's ideal functionality (the same sums in one tensor "
        "program, checked against the protocols) instead of the protocol: for long runs",
    )  # fmt: skip
    averages: str = _option(
        "auto", "fesog: user-row and model averages weighted by each user's ratings + pseudo "
        "items (its code; a secure aggregation's per-row weight sums then name who links to "
        "whom) or uniform; auto: weighted in the clear, uniform under a secure aggregation",
        AVERAGES,
    )  # fmt: skip
    social_rows: str = _option(
        "auto", "fesog: the user rows each user uploads gradients for: its own and its "
        "neighbours' (FeSoG; under a secure aggregation the per-row counts across rounds name "
        "who links to whom) or its own only (neighbours' embeddings used as constants); auto: "
        "neighbours' in the clear, own only under a secure aggregation",
        SOCIAL_ROWS,
    )  # fmt: skip
    row_dp_noise: float = _option(
        0.0, "user-level DP of a secure aggregation's counts and sums: noise multiplier z "
        "(0: off; needs a secure transport; the family's README, 'Row DP')",
    )  # fmt: skip
    row_dp_clip_items: float = _option(
        5.0, "row DP: L2 bound of a user's item rows (times its weight w_u) a round"
    )
    row_dp_clip_users: float = _option(0.1, "row DP: L2 bound of a user's user rows a round")
    row_dp_clip_model: float = _option(
        0.5, "row DP: L2 bound of a user's model gradients a round"
    )
    row_dp_rows: int = _option(32, "row DP: item rows a user uploads a round, at most")
    row_dp_threshold: float = _option(
        3.0, "row DP: an item row is aggregated when its noisy count reaches this many stds"
    )
    row_dp_delta: float = _option(1e-5, "row DP: the δ of the reported (ε, δ)")
    row_dp_colluding: int = _option(
        0, "row DP: cohort members assumed to collude with the server (their noise shares "
        "known to it; charged in ε)",
    )  # fmt: skip
    variant: str = _option("fesog", "fesog: FeSoG's FilmTrust preprocessing (2r-1)", VARIANTS)
    max_users: int | None = _option(None, "seeded user subsample")
    split: str = _option(
        "per-user", "per-user (60/20/20 of each user's ratings) or a published MovieLens100K "
        "fold (u1..u5, ua, ub; 20 % of its base for validation)", SPLITS,
    )  # fmt: skip
    keep_views: int = field(default=0, metadata={"internal": True})  # attacks: server views

    def __post_init__(self) -> None:
        for key in ("dim", "users_per_round", "patience", "max_neighbors", "expand_every",
                    "user_groups"):  # fmt: skip
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be ≥ 1, got {getattr(self, key)}")
        if self.pseudo_items < 0:
            raise ValueError(f"pseudo_items must be ≥ 0, got {self.pseudo_items}")
        for key in ("ldp_clip", "ldp_lambda", "time_budget", "item_std"):
            value = getattr(self, key)
            if value is not None and not value > 0:
                raise ValueError(f"{key} must be > 0, got {value}")
        for key in ("ldp_clip", "ldp_lambda", "item_std"):  # a time budget may be unlimited
            value = getattr(self, key)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{key} must be finite, got {value}")
            if value is not None and value < sys.float_info.min:  # a subnormal is flushed to 0
                raise ValueError(f"{key} must be a normal float ≥ {sys.float_info.min:g}, "
                                 f"got {value}")  # fmt: skip
        if not math.isfinite(2 * (self.ldp_clip or 0.3) / self.ldp_lambda):
            raise ValueError(f"ldp_clip / ldp_lambda overflows: {self.ldp_clip} / "
                             f"{self.ldp_lambda}")  # fmt: skip
        if self.max_users is not None and self.max_users < 1:
            raise ValueError(f"max_users must be ≥ 1, got {self.max_users}")
        self.row_dp()  # its bounds
        choices = (("ldp", LDP_MODES), ("offset", OFFSETS), ("arch", ARCHS), ("loss", LOSSES),
                   ("split", SPLITS), ("variant", VARIANTS), ("averages", AVERAGES),
                   ("social_rows", SOCIAL_ROWS))  # fmt: skip
        for key, allowed in choices:
            value = getattr(self, key)
            if value is not None and value not in allowed:
                raise ValueError(f"unknown {key} {value!r}; choose from {list(allowed)}")

    def check(self, config: Any) -> None:
        """Checks that need the experiment (run when the configuration is built)."""
        if config.task != "recommendation":
            return
        if config.protocol.mechanism is not None:
            raise ValueError(
                "recommendation takes no update mechanism in the protocol stack: its users' "
                "LDP is the section's ldp / ldp_clip / ldp_lambda"
            )
        unused = [
            f.name
            for f in dataclasses.fields(config.protocol)
            if f.name.startswith("dp_") and getattr(config.protocol, f.name) != f.default
        ]
        if unused:
            raise ValueError(
                f"{', '.join(unused)} set, but the dp_* fields configure the protocol stack's "
                "DP mechanism, which recommendation does not take: its users' LDP is the "
                "section's ldp / ldp_clip / ldp_lambda"
            )
        if self.row_dp_noise > 0 and config.protocol.transport == "plain":
            raise ValueError("row_dp_noise noises a secure aggregation's counts and sums; in "
                             "the clear the server sees every upload: name a secure transport "
                             "(e.g. secagg)")  # fmt: skip
        if self.ideal_sums and config.protocol.transport == "plain":
            raise ValueError("ideal_sums simulates a secure transport: name one (e.g. secagg)")
        if config.protocol.transport == "plain" and config.protocol.threat_model != (
                HONEST_BUT_CURIOUS):  # fmt: skip
            raise ValueError("threat_model 'malicious' signs the users' secure transport; the "
                             "plain transport has nothing to sign: name secagg, secagg+ or "
                             "ckks, or drop it")  # fmt: skip

    def row_dp(self) -> RowDPConfig:
        """The row DP mechanism of these settings (:mod:`.row_dp`)."""
        return RowDPConfig(self.row_dp_noise, self.row_dp_clip_items, self.row_dp_clip_users,
                           self.row_dp_clip_model, self.row_dp_rows, self.row_dp_threshold,
                           self.row_dp_delta, self.row_dp_colluding)  # fmt: skip

    def replace(self, **changes: Any) -> RecommendationSettings:
        return dataclasses.replace(self, **changes)


@dataclass
class RecConfig:
    """One run's settings as its parties need them (built by :meth:`from_experiment`)."""

    method: Method = "fesog"
    dim: int = 8
    rounds: int = 400
    users_per_round: int = 256
    lr: float = 0.1
    weight_decay: float = 1e-3
    pseudo_items: int = 10
    ldp: LDPConfig = field(default_factory=LDPConfig)
    #: user-level DP of the secure aggregation's counts and sums (:mod:`.row_dp`)
    row_dp: RowDPConfig = field(default_factory=RowDPConfig)
    transport: str = "plain"  # the protocol stack's transport
    ideal_sums: bool = False  # the transport's ideal functionality instead of the protocol
    eval_every: int = 20
    patience: int = 5
    max_neighbors: int = 5
    expand_every: int = 20
    seed: int = 0
    seeded_noise: bool = False  # NOT PRIVATE: LDP noise and pseudo items from ``seed``
    #: the secure transport's threat model and SecAgg parameters (``[experiment.protocol]``)
    threat_model: str = HONEST_BUT_CURIOUS
    secagg_threshold: float | None = None
    secagg_k: int | None = None
    min_cohort: int | None = None
    #: the masked ring (:meth:`protocols.settings.ProtocolSettings.secagg_options`)
    secagg_value_bound: float | None = None
    secagg_ring_bits: int | None = None
    secagg_precision_bits: int = DEFAULT_PRECISION_BITS
    keep_views: int = 0  # keep the server's views of the first k rounds (attacks)
    #: keep every message's payload in the trainer's transcript (e.g. what FedGNN's third
    #: party received, for attacks.interaction_inference's expansion attacks)
    store_payloads: bool = False
    time_budget_s: float | None = None
    #: FeSoG only: its user-row and model averages (:data:`AVERAGES`, :attr:`uniform_averages`)
    averages: str = "auto"
    #: FeSoG only: the user rows each user uploads (:data:`SOCIAL_ROWS`)
    social_rows: str = "auto"
    #: FedGNN only, flagged deviations for items without training ratings (:mod:`.fedgnn`)
    offset: str = "none"
    item_std: float = 1.0
    #: FedGNN's local graph and loss: ours (two-level, per-user RMSE) or the paper's (star,
    #: MSE; :mod:`.fedgnn`)
    arch: str = "two-level"
    loss: str = "rmse"
    #: parties that host the users (user u in group u mod G); each group's private
    #: randomness is its own, so results depend on this, not on the executor
    user_groups: int = 2
    executor: Literal["local", "ray"] = "local"
    workers: int = 2  # ray: worker processes
    ray_address: str | None = None  # ray: a running cluster (None: start a local Ray)
    party_timeout: float | None = None  # ray: seconds before a silent party is dropped
    ray_co_host: bool = False  # ray: the server and third parties on the users' workers

    def __post_init__(self) -> None:
        if self.method not in ("fesog", "fedgnn"):
            raise ConfigError(f"unknown recommendation method {self.method!r}")
        if self.user_groups < 1:
            raise ConfigError(f"user_groups must be >= 1, got {self.user_groups}")
        if self.executor not in ("local", "ray"):
            raise ConfigError(f"unknown executor {self.executor!r}; expected 'local' or 'ray'")
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"unknown transport {self.transport!r}; {list(TRANSPORTS)}")
        fedgnn_only = (self.offset, self.item_std, self.arch, self.loss)
        if self.method == "fesog" and fedgnn_only != ("none", 1.0, "two-level", "rmse"):
            raise ConfigError(
                "offset, item_std, arch and loss are FedGNN's options (FeSoG keeps its code's)"
            )
        if self.arch not in ARCHS or self.loss not in LOSSES:
            raise ConfigError(f"unknown FedGNN arch / loss {self.arch!r} / {self.loss!r}")
        if self.offset not in OFFSETS:
            raise ConfigError(f"unknown offset {self.offset!r}; expected one of {OFFSETS}")
        if not self.item_std > 0:
            raise ConfigError(f"item_std must be > 0, got {self.item_std}")
        if self.averages not in AVERAGES:
            raise ConfigError(f"unknown averages {self.averages!r}; expected one of {AVERAGES}")
        if self.method == "fedgnn" and self.averages != "auto":
            raise ConfigError("averages is FeSoG's option (FedGNN's users all weigh 1)")
        if self.social_rows not in SOCIAL_ROWS:
            raise ConfigError(
                f"unknown social_rows {self.social_rows!r}; expected one of {SOCIAL_ROWS}"
            )
        if self.method == "fedgnn" and self.social_rows != "auto":
            raise ConfigError("social_rows is FeSoG's option (FedGNN uploads no user rows)")
        if self.row_dp.on and self.aggregation == "plain":
            raise ConfigError("row DP noises a secure aggregation's sums: name a secure "
                              "transport (in the clear the server sees every upload)")  # fmt: skip
        if self.row_dp.on and self.method == "fesog" and not (
                self.own_user_rows and self.uniform_averages):  # fmt: skip
            raise ConfigError(
                "row DP takes FeSoG's user rows and averages as counts of cohort members: "
                "social_rows 'own' and averages 'uniform' (the secure defaults)"
            )

    @property
    def aggregation(self) -> str:
        """How the server aggregates (:data:`AGGREGATIONS`)."""
        return "ideal" if self.ideal_sums else self.transport

    def _secure_choice(self, value: str, secure: str) -> bool:
        """Whether ``value`` is ``secure``; ``auto``: exactly under a secure aggregation."""
        return self.aggregation != "plain" if value == "auto" else value == secure

    @property
    def uniform_averages(self) -> bool:
        """FeSoG averages user rows and model parameters uniformly (not by w_u)."""
        return self._secure_choice(self.averages, "uniform")

    @property
    def own_user_rows(self) -> bool:
        """FeSoG users upload only their own user row (not their neighbours')."""
        return self._secure_choice(self.social_rows, "own")

    def transport_options(self) -> dict[str, Any]:
        """The secure transport's options (:func:`protocols.registry.make_transport`)."""
        t = self.secagg_threshold
        threshold = int(t) if t is not None and t > 1 else t
        return {"threat_model": self.threat_model, "threshold": threshold,
                "neighbours": self.secagg_k, "min_cohort": self.min_cohort,
                "value_bound": self.secagg_value_bound, "ring_bits": self.secagg_ring_bits,
                "precision_bits": self.secagg_precision_bits}  # fmt: skip

    @property
    def row_dp_parts(self) -> int:
        """The parts row DP releases: counts, item rows, FeSoG's user rows, model."""
        return 4 if self.method == "fesog" else 3

    @property
    def noise_seed(self) -> int | None:
        """The seed of privacy randomness: None (secret) unless ``seeded_noise``."""
        return self.seed if self.seeded_noise else None

    @classmethod
    def from_experiment(cls, config: Any, method: str, seed: int) -> RecConfig:
        """The settings of one ``method`` run with ``seed`` of the experiment ``config``."""
        s: RecommendationSettings = config.section(RecommendationSettings)
        fedgnn = method == "fedgnn"
        mode = s.ldp or ("laplace" if fedgnn else "heuristic")
        clip = s.ldp_clip if s.ldp_clip is not None else (0.1 if fedgnn else 0.3)
        own = {"offset": s.offset, "item_std": s.item_std, "arch": s.arch, "loss": s.loss}
        defaults = {f.name: f.default for f in dataclasses.fields(RecommendationSettings)}
        if unread := [k for k, v in own.items() if not fedgnn and v != defaults[k]]:
            log.warning("%s does not read %s (FedGNN's settings)", method, ", ".join(unread))
        if fedgnn and (fesogs := [k for k in ("averages", "social_rows")
                                  if getattr(s, k) != defaults[k]]):  # fmt: skip
            log.warning("fedgnn does not read %s (FeSoG's settings)", ", ".join(fesogs))
        ring = config.protocol.secagg_options()  # FeSoG's / FedGNN's LDP is their own
        return cls(
            method=method, dim=s.dim, rounds=config.rounds, users_per_round=s.users_per_round,
            lr=config.lr, weight_decay=config.weight_decay, pseudo_items=s.pseudo_items,
            ldp=LDPConfig(mode, clip, s.ldp_lambda), row_dp=s.row_dp(),
            transport=config.protocol.transport,
            ideal_sums=s.ideal_sums, eval_every=config.eval_every, patience=s.patience,
            max_neighbors=s.max_neighbors, expand_every=s.expand_every, seed=seed,
            seeded_noise=config.protocol.seeded_noise, keep_views=s.keep_views,
            threat_model=config.protocol.threat_model,
            secagg_threshold=config.protocol.secagg_threshold, secagg_k=config.protocol.secagg_k,
            min_cohort=config.protocol.min_cohort, secagg_value_bound=ring["value_bound"],
            secagg_ring_bits=ring["ring_bits"], secagg_precision_bits=ring["precision_bits"],
            time_budget_s=s.time_budget, user_groups=s.user_groups, executor=config.executor,
            workers=config.workers, ray_address=config.ray_address,
            party_timeout=config.party_timeout, ray_co_host=config.ray_co_host,
            **(own if fedgnn else {"averages": s.averages, "social_rows": s.social_rows}),
        )  # fmt: skip

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> RecConfig:
        raw = json.loads(text)
        return cls(**{**raw, "ldp": LDPConfig(**raw["ldp"]),
                      "row_dp": RowDPConfig(**raw["row_dp"])})  # fmt: skip
