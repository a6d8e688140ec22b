"""What a batch of users uploads in one round, stored flat (one row per user per entry).

Row ``j`` of ``item_grad`` is the gradient of item ``item_idx[j]``'s embedding computed by
user ``users[item_slot[j]]`` from its own data; likewise for ``user_grad`` (FeSoG uploads
gradients of its own and its social neighbours' embeddings) and ``model`` (per-user copies
of every model-parameter gradient, leading dimension = batch slot). ``item_pseudo`` marks
pseudo items: it is the client's private knowledge, never part of what is sent, and is kept
only as the ground truth for the interaction-inference attack.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from protocols.wire import Payload


@dataclass
class Uploads:
    users: np.ndarray  # int64 [B]
    weight: torch.Tensor  # [B] item-row weight w_u (FeSoG: #returned items; FedGNN: 1)
    model: dict[str, torch.Tensor]  # name -> [B, *shape]
    item_slot: torch.Tensor  # int64 [K]
    item_idx: torch.Tensor  # int64 [K]
    item_grad: torch.Tensor  # [K, d]
    item_pseudo: torch.Tensor  # bool [K]  (private; attack ground truth only)
    user_slot: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    user_idx: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    user_grad: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0))
    loss: torch.Tensor | None = None  # [B] local training loss (diagnostics, not sent)
    #: [B] weight of the user-row and model averages (None: ``weight``, FeSoG's aggregator;
    #: ones: uniform averages, whose sums decode no user's weight within a round; across
    #: rounds the counts still reveal it: :mod:`.aggregation`)
    average_weight: torch.Tensor | None = None

    def averaging_weight(self) -> torch.Tensor:
        """The weight of the user-row and model averages."""
        return self.weight if self.average_weight is None else self.average_weight

    @property
    def n(self) -> int:
        return int(self.users.size)

    def dims(self) -> np.ndarray:
        """Number of uploaded coordinates per user (for LDP accounting)."""
        d = self.item_grad.shape[1] if self.item_grad.numel() else 0
        b = self.n
        model_dim = sum(int(np.prod(v.shape[1:])) for v in self.model.values())
        rows = torch.bincount(self.item_slot, minlength=b).numpy() * d
        if self.user_grad.numel():
            rows = rows + torch.bincount(self.user_slot, minlength=b).numpy() * d
        return rows + model_dim

    def with_grads(self, **kw: object) -> Uploads:
        return replace(self, **kw)

    def nbytes_per_user(self) -> np.ndarray:
        """Plaintext upload size per user: float32 values + int64 row ids."""
        d = self.item_grad.shape[1] if self.item_grad.numel() else 0
        b = self.n
        rows = torch.bincount(self.item_slot, minlength=b).numpy()
        if self.user_grad.numel():
            rows = rows + torch.bincount(self.user_slot, minlength=b).numpy()
        model_dim = sum(int(np.prod(v.shape[1:])) for v in self.model.values())
        return rows * (4 * d + 8) + 4 * model_dim


def to_payload(up: Uploads) -> Payload:
    """What the users send: everything but ``item_pseudo`` (private) and ``loss``."""
    fields = {
        "users": np.asarray(up.users, np.int64),
        "weight": up.weight.numpy(),
        "average_weight": up.averaging_weight().numpy(),
        "item_slot": up.item_slot.numpy(),
        "item_idx": up.item_idx.numpy(),
        "item_grad": up.item_grad.numpy(),
        "user_slot": up.user_slot.numpy(),
        "user_idx": up.user_idx.numpy(),
        "user_grad": up.user_grad.numpy(),
    }
    fields |= {f"model/{k}": v.numpy() for k, v in up.model.items()}
    return Payload(fields)


def from_payloads(payloads: list[Payload]) -> Uploads:
    """The uploads of several senders as one batch, slots re-based in payload order; the
    receiver does not know which rows are pseudo items (``item_pseudo`` is all False)."""

    def cat(name: str, offsets: list[int] | None = None) -> torch.Tensor:
        parts = [p.array(name) for p in payloads]
        if offsets is not None:
            parts = [a + o for a, o in zip(parts, offsets, strict=True)]
        return torch.from_numpy(np.concatenate(parts)) if parts else torch.zeros(0)

    sizes = [p.array("users").size for p in payloads]
    offsets = list(np.cumsum([0, *sizes[:-1]]))
    keys = [k.removeprefix("model/") for k in payloads[0].fields if k.startswith("model/")]
    item_idx = cat("item_idx")
    user_grad = cat("user_grad")
    if user_grad.numel() == 0:
        user_grad = torch.zeros(0, 0)
    return Uploads(
        users=np.concatenate([p.array("users") for p in payloads]),
        weight=cat("weight"),
        average_weight=cat("average_weight"),
        model={k: cat(f"model/{k}") for k in keys},
        item_slot=cat("item_slot", offsets),
        item_idx=item_idx,
        item_grad=cat("item_grad"),
        item_pseudo=torch.zeros(item_idx.numel(), dtype=torch.bool),
        user_slot=cat("user_slot", offsets),
        user_idx=cat("user_idx"),
        user_grad=user_grad,
    )
