"""The protocol settings of a run: its stack (transport and DP mechanism), SecAgg's
parameters, the DP parameters and the threat model of the server.

One dataclass for every caller: the federation's protocol stack, the recommendation path,
the attack suite and the benchmarks read the same fields (``[experiment.protocol]`` in a
TOML file; flags ``--protocol``, ``--dp-noise``, … on the command line). Each field's
``metadata`` gives its command-line help and choices. Values are checked on construction
(``ValueError`` naming the field); checks that need the rest of an experiment (e.g. the
number of clients) are the experiment's.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from protocols.dp.accounting import KINDS as ACCOUNTANT_KINDS
from protocols.names import (
    HONEST_BUT_CURIOUS,
    MECHANISM_NAMES,
    MULTI_PARTY_TRANSPORTS,
    THREAT_MODELS,
    TRANSPORT_NAMES,
    parse_stack,
    secure_sum_for_stack,
)

#: the rings and default precision of ``protocols.fixedpoint`` (``WORD_BITS``,
#: ``DEFAULT_PRECISION_BITS``), named here so that reading the settings loads no numpy
WORD_BITS = (32, 64)
DEFAULT_PRECISION_BITS = 20

DP_MODES = ("auto", "central", "distributed")


def _option(default: Any, help: str, choices: tuple[Any, ...] | None = None, **extra: Any) -> Any:
    meta = {"help": help, "choices": choices, **extra}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ProtocolSettings:
    """How every aggregation of a run is protected, and against whom."""

    stack: list[str] = _option(
        [], f"aggregation stack: at most one transport ({', '.join(TRANSPORT_NAMES)}) and one "
        f"DP mechanism ({', '.join(MECHANISM_NAMES)}), e.g. secagg,clip_noise (empty: plain)",
        flag="protocol", metavar="NAME",
    )  # fmt: skip
    secagg_k: int | None = _option(None, "secagg+ neighbours (default 2⌈log2 n⌉)")
    secagg_threshold: float | None = _option(
        None, "Shamir t: a count (≥ 2) or a fraction in (0.5, 1] of the share holders"
    )
    secagg_ring_bits: int | None = _option(
        None, "secagg / secagg+: the ring Z_2^w of the masked values, 32 or 64 bits (default: "
        "the smallest that holds the sum of a round's clients at the value bound; 64 when no "
        "bound is known)", (32, 64),
    )  # fmt: skip
    secagg_value_bound: float | None = _option(
        None, "secagg / secagg+: the largest |x_i| of an update entry a client masks (a larger "
        "one is refused, never wrapped); default: under clip_noise the clip (plus 10 σ of a "
        "noise share), else unknown",
    )  # fmt: skip
    secagg_weight_bound: float | None = _option(
        None, "secagg / secagg+: the largest client weight (FedAvg: training nodes); default: "
        "clip_noise's weight, else 1",
    )  # fmt: skip
    secagg_precision_bits: int = _option(
        DEFAULT_PRECISION_BITS, "secagg / secagg+: resolve every masked entry to (bound × "
        "2^-bits) or finer; with the number of clients, this picks the ring",
    )  # fmt: skip
    min_cohort: int | None = _option(
        None, "the fewest clients in a round (secagg, secagg+) or an aggregate (malicious "
        "ckks) that every client accepts, whatever the server sends (default: 2 when "
        "honest-but-curious; malicious: the clients per round for secagg / secagg+, a "
        "majority of them for ckks)",
    )  # fmt: skip
    threat_model: str = _option(
        HONEST_BUT_CURIOUS,
        "the server's threat model: malicious adds signed messages (Ed25519 PKI set up by the "
        "experiment) and consistency checks to secagg, secagg+, ckks and the masked / ckks "
        "secure sums (docs/protocols.md)",
        THREAT_MODELS,
    )
    dp_clip: float = _option(1.0, "clip_noise: L2 clip of an update; ldp_*: clip")
    dp_noise: float = _option(1.0, "noise multiplier σ (clip_noise, ldp_gaussian)")
    dp_epsilon: float = _option(1.0, "ldp_laplace: ε per released update")
    dp_delta: float = _option(1e-5, "δ of the reported (ε, δ)")
    dp_mode: str = _option(
        "auto", "clip_noise: noise at the server (central) or as client shares (distributed)",
        DP_MODES,
    )  # fmt: skip
    dp_accountant: str = _option("rdp", "Opacus accountant", ACCOUNTANT_KINDS)
    dp_colluding_clients: int = _option(
        0, "distributed noise: clients assumed to collude with the server (accounted)"
    )
    seeded_noise: bool = _option(
        False,
        "NOT PRIVATE: draw all privacy noise from the public experiment seed (reproducible "
        "debugging runs; results are marked not private)",
    )

    def __post_init__(self) -> None:
        transport, mechanism = parse_stack(self.stack)  # ValueError naming the unknown
        if self.threat_model not in THREAT_MODELS:
            raise ValueError(f"threat_model must be one of {list(THREAT_MODELS)}, "
                             f"got {self.threat_model!r}")  # fmt: skip
        t, k = self.secagg_threshold, self.secagg_k
        if t is not None and (
            not math.isfinite(t) or t <= 0.5 or 1 < t < 2 or (t > 1 and t != int(t))
        ):
            raise ValueError(
                f"secagg_threshold must be a fraction in (0.5, 1] or a whole count ≥ 2 (Shamir "
                f"t must exceed half of the share holders), got {t}"
            )
        if self.min_cohort is not None and self.min_cohort < 2:
            raise ValueError(f"min_cohort must be an integer ≥ 2, got {self.min_cohort}")
        if k is not None and (k < 2 or k % 2):
            raise ValueError(f"secagg_k must be an even integer ≥ 2, got {k}")
        for name in ("secagg_value_bound", "secagg_weight_bound"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value}")
        if self.secagg_ring_bits not in (None, *WORD_BITS):
            raise ValueError(f"secagg_ring_bits must be 32 or 64, got {self.secagg_ring_bits}")
        if not 0 <= self.secagg_precision_bits <= 62:
            raise ValueError(
                f"secagg_precision_bits must lie in [0, 62], got {self.secagg_precision_bits}"
            )
        for name in ("dp_clip", "dp_epsilon"):
            if not 0 < getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be a finite number > 0, got {getattr(self, name)}")
        if not 0 <= self.dp_noise < math.inf:
            raise ValueError(f"dp_noise must be a finite number ≥ 0, got {self.dp_noise}")
        if not 0 < self.dp_delta < 1:
            raise ValueError(f"dp_delta must lie in (0, 1), got {self.dp_delta}")
        if self.dp_mode not in DP_MODES:
            raise ValueError(f"dp_mode must be one of {list(DP_MODES)}, got {self.dp_mode!r}")
        if self.dp_accountant not in ACCOUNTANT_KINDS:
            raise ValueError(f"dp_accountant must be one of {list(ACCOUNTANT_KINDS)}, "
                             f"got {self.dp_accountant!r}")  # fmt: skip
        if self.dp_colluding_clients < 0:
            raise ValueError(f"dp_colluding_clients must be ≥ 0, got {self.dp_colluding_clients}")
        if mechanism == "clip_noise" and self.dp_mode == "distributed" and transport == "plain":
            raise ValueError(
                "dp_mode = 'distributed' over the plain transport: the server would see each "
                "client's update with only its 1/√n share of the noise, so no ε against it "
                "holds; use a secure transport (secagg, secagg+, ckks) or dp_mode = 'central'"
            )
        if (transport in ("secagg", "secagg+") and self.secagg_ring_bits == 32
                and self.secagg_value_bound is None and mechanism != "clip_noise"):
            raise ValueError(
                "secagg_ring_bits = 32 needs a value bound: declare secagg_value_bound (the "
                "largest |x| of an update entry) or use clip_noise, whose clip bounds it"
            )
        if self.clip_noise_mode == "central" and self.threat_model != HONEST_BUT_CURIOUS:
            raise ValueError(
                "clip_noise in central mode under threat_model = 'malicious': the server adds "
                "the noise, so a malicious server can leave it out and nothing can be claimed; "
                "use distributed noise over a secure transport (e.g. secagg+,clip_noise) or an "
                "LDP mechanism"
            )
        if mechanism == "clip_noise" and self.dp_mode == "central":
            from protocols.base import Role
            from protocols.registry import TRANSPORTS

            role = TRANSPORTS[transport].output_role
            if role is not Role.SERVER:
                raise ValueError(
                    f"dp_mode = 'central' cannot be used with protocol {transport!r}: central "
                    f"noise is added by the server to the aggregate, but {transport!r} "
                    f"delivers the aggregate to the {role.value}s and the server never sees it; "
                    "use dp_mode = 'distributed' (or 'auto')"
                )

    @property
    def transport(self) -> str:
        """The stack's transport (``plain`` when it names none)."""
        return parse_stack(self.stack)[0]

    @property
    def mechanism(self) -> str | None:
        """The stack's DP mechanism, if any."""
        return parse_stack(self.stack)[1]

    def ignored_settings(self) -> list[str]:
        """The fields set away from their defaults that this stack never reads, each with
        who reads it (a run refuses them rather than record them as applied)."""
        transport, mechanism = parse_stack(self.stack)
        defaults = ProtocolSettings()
        changed = [f.name for f in dataclasses.fields(self)
                   if getattr(self, f.name) != getattr(defaults, f.name)]  # fmt: skip
        readers = {
            "dp_clip": ("clip_noise", "ldp_laplace", "ldp_gaussian"),
            "dp_noise": ("clip_noise", "ldp_gaussian"),
            "dp_epsilon": ("ldp_laplace",),
            "dp_mode": ("clip_noise",),
        }
        out = [
            f"{name} (read by {', '.join(users)} only)"
            for name, users in readers.items() if name in changed and mechanism not in users
        ]
        if "dp_colluding_clients" in changed and self.clip_noise_mode != "distributed":
            out.append("dp_colluding_clients (distributed clip_noise only)")
        if "min_cohort" in changed and (transport == "plain" or (
                transport == "ckks" and self.threat_model == HONEST_BUT_CURIOUS)):
            out.append("min_cohort (secagg, secagg+, and ckks under a malicious server)")
        masked = transport in ("secagg", "secagg+")
        for name in changed:
            if name.startswith("secagg_") and not masked:
                out.append(f"{name} (secagg and secagg+ only)")
        if masked and "secagg_k" in changed and transport != "secagg+":
            out.append("secagg_k (secagg+ only: secagg masks with every client)")
        unbounded = self.secagg_value_bound is None and mechanism != "clip_noise"
        if masked and "secagg_precision_bits" in changed and unbounded:
            out.append("secagg_precision_bits (needs a value bound: secagg_value_bound, or "
                       "clip_noise's clip; without one the 64-bit ring keeps 24 bits)")  # fmt: skip
        return out

    @property
    def clip_noise_mode(self) -> str | None:
        """Where clip_noise's noise is added (``central``: by the server, the default over
        ``plain``; ``distributed``: as client shares, the default over a secure transport);
        None without clip_noise."""
        transport, mechanism = parse_stack(self.stack)
        if mechanism != "clip_noise":
            return None
        if self.dp_mode != "auto":
            return self.dp_mode
        return "central" if transport == "plain" else "distributed"

    @property
    def label(self) -> str:
        """The stack as written in result tables and on the command line
        (``secagg+,clip_noise``, ``plain``)."""
        return ",".join(self.stack) or "plain"

    def masked_value_bound(self, mechanism: Any = None) -> float | None:
        """The bound a secagg / secagg+ client checks before masking: max ``|w·x_i|`` and
        ``w`` (:class:`~protocols.secagg.SecAggregation`'s ``value_bound``), from

        * a declared ``secagg_value_bound`` B and weight bound W: ``max(W·B, W)``;
        * else the DP clip when ``mechanism`` is a :class:`ClipNoiseMechanism`:
          ``max(w_max·C + 10 σ_share, w_max)`` (:meth:`ClipNoiseMechanism.entry_bound`);
        * else None: nothing is known (the 64-bit ring and its headroom).

        W is ``secagg_weight_bound``, else the mechanism's weight bound, else 1."""
        from protocols.dp.clip_noise import ClipNoiseMechanism

        clip = mechanism if isinstance(mechanism, ClipNoiseMechanism) else None
        weight = self.secagg_weight_bound
        if weight is None:
            weight = clip.max_client_weight if clip is not None else 1.0
        if self.secagg_value_bound is not None:
            return max(weight * self.secagg_value_bound, weight)
        if clip is not None:
            return max(clip.entry_bound(), weight)
        return None

    def secagg_options(self, mechanism: Any = None) -> dict[str, Any]:
        """The ring options of a secagg / secagg+ transport
        (:func:`protocols.registry.make_transport`): ``value_bound`` (
        :meth:`masked_value_bound`), ``ring_bits`` and ``precision_bits``."""
        return {
            "value_bound": self.masked_value_bound(mechanism),
            "ring_bits": self.secagg_ring_bits,
            "precision_bits": self.secagg_precision_bits,
        }

    def secure_sum_mode(self) -> str:
        """The secure-sum mode that gives sums to one receiver this stack's guarantee
        (``secagg`` → ``masked``)."""
        return secure_sum_for_stack(self.stack)

    def check_sampling(self, sampling: str) -> None:
        """``ValueError`` for Poisson sampling with central noise over a transport that
        needs two or more clients a sum: a round too few joined is emptied, so one client's
        coin decides whether the others' updates are released, which the subsampled
        Gaussian charged does not cover."""
        if sampling == "poisson" and self.clip_noise_mode == "central" and (
            self.transport != "plain"
        ):
            raise ValueError(
                f"Poisson sampling with central noise over {self.transport}: a round fewer "
                "clients join than the transport sums is emptied, which the subsampled "
                "Gaussian charged does not cover; use fixed sampling, dp_mode = distributed, "
                "or the plain transport"
            )

    def cohort_floor(self, clients_per_round: int, sampling: str = "fixed") -> int | None:
        """The ``min_cohort`` the transport's clients enforce in rounds of ``clients_per_round``
        clients drawn by ``sampling`` (``fixed`` or ``poisson``); None: the transport's own
        default (no floor beyond 2 when honest-but-curious). ``ValueError`` when no round
        could run, or when a malicious server's Poisson rounds leave the floor to the user."""
        transport, m = self.transport, self.min_cohort
        if m is None and (self.threat_model == HONEST_BUT_CURIOUS or transport == "plain"):
            return None
        if m is None and sampling == "poisson":
            raise ValueError(
                "threat_model = 'malicious' with Poisson sampling: the cohort size varies, so "
                "set min_cohort, the fewest clients a round may have (rounds below it are "
                "refused by the clients)"
            )
        if m is None:
            m = clients_per_round if transport != "ckks" else clients_per_round // 2 + 1
        m = max(m, 2)
        if transport != "plain" and m > clients_per_round and sampling == "fixed":
            raise ValueError(
                f"min_cohort = {m} exceeds the {clients_per_round} clients of a round: every "
                "round would be refused"
            )
        return m

    def check_cohort(self, clients_per_round: int) -> None:
        """``ValueError`` when the transport cannot run rounds of ``clients_per_round``
        clients (secagg and secagg+ need two: one client's masked "sum" is its update)."""
        transport = self.transport
        if transport in MULTI_PARTY_TRANSPORTS and clients_per_round < 2:
            raise ValueError(
                f"{transport} needs at least 2 clients per round (a sum of one client's update "
                f"is that update), got {clients_per_round}: raise clients (or "
                "client_fraction), or use the plain transport"
            )

    def check_full_round(self, clients_per_round: int) -> None:
        """``ValueError`` when secagg / secagg+ could not set up a full round of
        ``clients_per_round`` clients (its Shamir count, minimum cohort and ring), as its
        parties would refuse it when made: for a run with one server (edge servers' rounds
        are smaller, and checked when their parties are made)."""
        if self.transport not in MULTI_PARTY_TRANSPORTS:
            return
        from protocols.registry import make_transport  # the transport's own check

        transport = make_transport(
            self.transport, "check", threshold=self.threshold(), neighbours=self.secagg_k,
            min_cohort=self.min_cohort, **self.secagg_options(),
        )  # fmt: skip
        try:
            transport.config_for(clients_per_round)  # type: ignore[attr-defined]
        except OverflowError as err:  # the ring: a configuration error here
            raise ValueError(str(err)) from None

    def threshold(self) -> int | float | None:
        """Shamir t as the transport takes it: a count (> 1) or a fraction (≤ 1)."""
        t = self.secagg_threshold
        return int(t) if t is not None and t > 1 else t

    def replace(self, **changes: Any) -> ProtocolSettings:
        return dataclasses.replace(self, **changes)
