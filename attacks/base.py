"""What every attack returns, and who runs it.

An attack names its adversary (``server``, ``client-i``, ``colluding clients``, ``third
party``, ``model holder``) and consumes only that adversary's view: the messages it
received (:class:`~securefgl.federation.transcript.PartyView`), what it sent, its own data
and released artifacts. The simulator's global graph is used only as ground truth to
score the attack. An attack that does not apply to the view (e.g. inverting one client's
update when the server only saw a secure-aggregation sum) returns a result with
``applicable=False`` and a ``reason`` instead of a number.

Every metric comes with its naive baseline (what the adversary could guess without the
attack, :mod:`attacks.naive`): ``advantage = value − baseline``, and a metric counts as
leakage (``leaks``) only when its advantage exceeds the stated ``margin``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SERVER = "server"
MODEL_HOLDER = "model holder"  # anyone with query access to a released / deployed model
THIRD_PARTY = "third party"

#: metrics where smaller is better for the adversary (leakage = advantage < −margin)
LOWER_IS_BETTER = frozenset({"mse", "label_tv"})
#: margin of a metric whose attack states none (absolute, in the metric's unit)
DEFAULT_MARGIN = 0.05


@dataclass
class AttackResult:
    """Leakage metrics of one attack run (``metrics`` empty when not applicable).

    ``primary`` names the headline metric (e.g. ``"auc"``); ``details`` holds secondary
    numbers and settings (JSON-serialisable). ``baselines[m]`` is metric ``m``'s naive
    baseline; ``margins[m]`` how far it must be beaten to count as leakage (default
    :data:`DEFAULT_MARGIN`). A metric without a baseline (e.g. the accountant's ε beside a
    DP audit) has no advantage and no verdict.
    """

    attack: str
    adversary: str
    metrics: dict[str, float] = field(default_factory=dict)
    primary: str | None = None
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    baselines: dict[str, float] = field(default_factory=dict)
    margins: dict[str, float] = field(default_factory=dict)

    @property
    def applicable(self) -> bool:
        return self.reason is None

    @property
    def value(self) -> float | None:
        """The headline metric, ``None`` when the attack does not apply."""
        if not self.applicable or self.primary is None:
            return None
        return self.metrics.get(self.primary)

    def baseline(self, metric: str | None = None) -> float | None:
        metric = metric or self.primary
        if not self.applicable or metric is None:
            return None
        return self.baselines.get(metric)

    def margin(self, metric: str | None = None) -> float | None:
        if self.baseline(metric) is None:
            return None
        return self.margins.get(metric or self.primary or "", DEFAULT_MARGIN)

    def advantage(self, metric: str | None = None) -> float | None:
        """``value − baseline`` (``None`` without a baseline or a finite value)."""
        metric = metric or self.primary
        base = self.baseline(metric)
        value = self.metrics.get(metric) if metric else None
        if base is None or value is None or value != value or base != base:
            return None
        return float(value) - float(base)

    def leaks(self, metric: str | None = None) -> bool | None:
        """Does ``metric`` beat its baseline by more than its margin (``None``: no baseline)?"""
        metric = metric or self.primary
        adv, margin = self.advantage(metric), self.margin(metric)
        if adv is None or margin is None:
            return None
        return -adv > margin if metric in LOWER_IS_BETTER else adv > margin

    def to_dict(self) -> dict[str, Any]:
        return {
            "attack": self.attack,
            "adversary": self.adversary,
            "applicable": self.applicable,
            "primary": self.primary,
            "value": self.value,
            "baseline": self.baseline(),
            "advantage": self.advantage(),
            "margin": self.margin(),
            "leaks": self.leaks(),
            "metrics": dict(self.metrics),
            "baselines": dict(self.baselines),
            "margins": {m: self.margin(m) for m in self.baselines},
            "reason": self.reason,
            "details": dict(self.details),
        }


def not_applicable(attack: str, adversary: str, reason: str, **details: Any) -> AttackResult:
    """A structured "this attack does not apply to this view" result."""
    return AttackResult(attack, adversary, reason=reason, details=details)
