"""What every attack returns, and who runs it.

An attack names its adversary (``server``, ``client-i``, ``colluding clients``, ``third
party``, ``model holder``) and consumes only that adversary's view: the messages it
received (:class:`~securefgl.federation.transcript.PartyView`), what it sent, its own data
and released artifacts. The simulator's global graph is used only as ground truth to
score the attack. An attack that does not apply to the view (e.g. inverting one client's
update when the server only saw a secure-aggregation sum) returns a result with
``applicable=False`` and a ``reason`` instead of a number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SERVER = "server"
MODEL_HOLDER = "model holder"  # anyone with query access to a released / deployed model
THIRD_PARTY = "third party"


@dataclass
class AttackResult:
    """Leakage metrics of one attack run (``metrics`` empty when not applicable).

    ``primary`` names the headline metric (e.g. ``"auc"``); ``details`` holds secondary
    numbers and settings (JSON-serialisable).
    """

    attack: str
    adversary: str
    metrics: dict[str, float] = field(default_factory=dict)
    primary: str | None = None
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def applicable(self) -> bool:
        return self.reason is None

    @property
    def value(self) -> float | None:
        """The headline metric, ``None`` when the attack does not apply."""
        if not self.applicable or self.primary is None:
            return None
        return self.metrics.get(self.primary)

    def to_dict(self) -> dict[str, Any]:
        return {
            "attack": self.attack,
            "adversary": self.adversary,
            "applicable": self.applicable,
            "primary": self.primary,
            "value": self.value,
            "metrics": dict(self.metrics),
            "reason": self.reason,
            "details": dict(self.details),
        }


def not_applicable(attack: str, adversary: str, reason: str, **details: Any) -> AttackResult:
    """A structured "this attack does not apply to this view" result."""
    return AttackResult(attack, adversary, reason=reason, details=details)
