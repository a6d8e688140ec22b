"""Per-user LDP on uploaded gradients, vectorised over a batch of users, with a ledger.

Modes (the scalar mechanisms are in :mod:`protocols.dp.ldp`): ``"heuristic"`` is FeSoG's
rule (scale λ·|mean(g)| per uploaded tensor, computed before clipping to δ; an independent
draw per coordinate, not the reference's one scalar per tensor): data-dependent, **no** DP
guarantee, the ledger records ``None``. ``"laplace"`` clips to δ in L∞ and adds Laplace noise
scaled from the clip bound (:class:`protocols.dp.ldp.LaplaceLDP`; ``per="coordinate"`` as
FedGNN's ε = 2δ/λ, or ``per="vector"``), composed per user over rounds by a
:class:`protocols.dp.accounting.PureDPAccountant`. LDP does not hide which rows a user
uploads (noise goes on those rows only, as in both papers); pseudo items or secure
aggregation must (measured by :mod:`attacks.interaction_inference`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from protocols.dp.accounting import PureDPAccountant
from securefgl.algorithms.recommendation.segment import segment_mean
from securefgl.algorithms.recommendation.settings import LDPConfig
from securefgl.algorithms.recommendation.uploads import Uploads


def _laplace(shape: torch.Size, scale: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """Laplace(0, scale) by inverse CDF; ``scale`` broadcasts against ``shape`` (in place:
    the M = 1000 pseudo rows of FedGNN's setting are tens of millions of draws)."""
    u = torch.rand(shape, generator=gen, dtype=torch.float64).sub_(0.5)
    u.clamp_(-0.5 + 1e-16, 0.5 - 1e-16)
    magnitude = u.abs().mul_(-2.0).log1p_().mul_(-scale.double())
    return torch.copysign(magnitude, u, out=magnitude).float()


def _heuristic_rows(
    g: torch.Tensor, slot: torch.Tensor, b: int, cfg: LDPConfig, gen: torch.Generator | None
) -> torch.Tensor:
    if g.numel() == 0:
        return g
    scale = cfg.lam * segment_mean(g.mean(1), slot, b).abs()
    return g.clamp(-cfg.clip, cfg.clip) + _laplace(g.shape, scale[slot].unsqueeze(1), gen)


def apply_ldp(
    up: Uploads, cfg: LDPConfig, gen: torch.Generator | None = None
) -> tuple[Uploads, np.ndarray | None]:
    """Perturb every user's upload locally. Returns the noisy uploads and per-user ε
    of this release (``None`` when there is no guarantee; zeros for ``mode='none'``)."""
    b = up.n
    if cfg.mode == "none":
        return up, np.zeros(b)
    if cfg.mode == "heuristic":
        model = {}
        for k, v in up.model.items():
            flat = v.reshape(b, -1)
            s = cfg.lam * flat.mean(1).abs()
            noisy = flat.clamp(-cfg.clip, cfg.clip) + _laplace(flat.shape, s.unsqueeze(1), gen)
            model[k] = noisy.reshape(v.shape)
        item = _heuristic_rows(up.item_grad, up.item_slot, b, cfg, gen)
        user = _heuristic_rows(up.user_grad, up.user_slot, b, cfg, gen)
        return up.with_grads(model=model, item_grad=item, user_grad=user), None
    if cfg.mode != "laplace":
        raise ValueError(f"unknown LDP mode {cfg.mode!r}")
    mech = cfg.mechanism()
    dims = up.dims().astype(np.float64)
    # LaplaceLDP.scale(D): 2δ/ε per coordinate, or 2δ·D/ε for a whole-vector budget
    scale_u = torch.as_tensor(
        np.full(b, mech.scale(1)) if cfg.per == "coordinate" else mech.scale(1) * dims,
        dtype=torch.float64,
    )

    def noisy(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return x.clamp(-cfg.clip, cfg.clip) + _laplace(x.shape, s, gen)

    model = {k: noisy(v, scale_u.view(-1, *([1] * (v.dim() - 1)))) for k, v in up.model.items()}
    item = (
        noisy(up.item_grad, scale_u[up.item_slot].unsqueeze(1))
        if up.item_grad.numel()
        else (up.item_grad)
    )
    user = (
        noisy(up.user_grad, scale_u[up.user_slot].unsqueeze(1))
        if up.user_grad.numel()
        else (up.user_grad)
    )
    # LaplaceLDP.epsilon_per_release(D): D·ε per coordinate, ε per vector
    eps = mech.epsilon * (dims if cfg.per == "coordinate" else np.ones(b))
    return up.with_grads(model=model, item_grad=item, user_grad=user), eps


class UserLedger:
    """Per-user record of LDP releases; ε per user comes from a PureDPAccountant.

    With a journal (:meth:`journaled`), every release is appended to a file and synced
    before :meth:`record` returns, and so before the caller sends it: a run that stops and
    resumes from an older checkpoint still charges every release it ever made, the rounds
    it replays included (write-ahead)."""

    def __init__(self, n_users: int) -> None:
        self.n_users = n_users
        self._log: list[tuple[np.ndarray, np.ndarray | None]] = []
        self._releases = np.zeros(n_users, np.int64)
        self._upper = np.zeros(n_users)  # only to pick the worst-case user to account
        self._journal: Path | None = None

    def record(self, users: np.ndarray, eps: np.ndarray | None) -> None:
        users = np.asarray(users, np.int64)
        eps = None if eps is None else np.asarray(eps, float)
        if self._journal is not None:
            line = {"users": users.tolist(), "eps": None if eps is None else eps.tolist()}
            _append_synced(self._journal, json.dumps(line))
        self._remember(users, eps)

    def _remember(self, users: np.ndarray, eps: np.ndarray | None) -> None:
        self._log.append((users, eps))
        self._releases[users] += 1
        if eps is not None:
            self._upper[users] += eps

    @classmethod
    def journaled(
        cls, n_users: int, path: str | os.PathLike, header: dict[str, Any],
        start: UserLedger | None = None,
    ) -> UserLedger:  # fmt: skip
        """The ledger of the journal at ``path`` (every release recorded there), appending
        to it from now on; a new journal starts with ``header`` and the releases of
        ``start``. Refuses a journal whose header differs (another run's ledger). A last
        line cut short by a crash is dropped: it was being written before its release."""
        path = Path(path)
        ledger = cls(n_users)
        if path.exists():
            content = path.read_bytes()
            whole = content.rfind(b"\n") + 1  # every whole record ends its line
            if whole < len(content):  # cut short before its release was sent
                os.truncate(path, whole)
            lines = content[:whole].decode().splitlines()
            if not lines or json.loads(lines[0]) != json.loads(json.dumps(header)):
                raise ValueError(f"{path} is the ledger of another run or configuration")
            for i, text in enumerate(lines[1:], start=2):
                try:
                    rec = json.loads(text)
                except json.JSONDecodeError:
                    raise ValueError(f"{path}: line {i} is not a ledger record") from None
                eps = rec["eps"]
                ledger._remember(np.asarray(rec["users"], np.int64),
                                 None if eps is None else np.asarray(eps, float))  # fmt: skip
        else:
            _append_synced(path, json.dumps(header), create=True)
            ledger._journal = path
            for users, eps in (start._log if start is not None else []):
                ledger.record(users, eps)
        ledger._journal = path
        return ledger

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The releases as arrays (a checkpoint); :meth:`from_arrays` reads them back."""
        users = [u for u, _ in self._log]
        eps = [np.full(u.size, np.nan) if e is None else e for u, e in self._log]
        return {
            "ledger_users": np.concatenate(users) if users else np.zeros(0, np.int64),
            "ledger_lengths": np.array([u.size for u in users], np.int64),
            "ledger_eps": np.concatenate(eps) if eps else np.zeros(0),
            "ledger_guaranteed": np.array([e is not None for _, e in self._log], bool),
        }

    @classmethod
    def from_arrays(cls, n_users: int, arrays: dict[str, np.ndarray]) -> UserLedger:
        ledger = cls(n_users)
        ends = np.cumsum(arrays["ledger_lengths"])
        for end, n, ok in zip(ends, arrays["ledger_lengths"], arrays["ledger_guaranteed"],
                              strict=True):  # fmt: skip
            eps = arrays["ledger_eps"][end - n : end]
            ledger.record(arrays["ledger_users"][end - n : end], eps if ok else None)
        return ledger

    @property
    def guaranteed(self) -> bool:
        return all(e is not None for _, e in self._log)

    def accountant(self, user: int) -> PureDPAccountant:
        acc = PureDPAccountant()
        for users, eps in self._log:
            hit = np.flatnonzero(users == user)
            for j in hit:
                acc.step(None if eps is None else float(eps[j]))
        return acc

    def summary(self) -> dict[str, float | int | None]:
        """Worst-case user's ε (accountant) and release counts."""
        if not self._log:
            return {"epsilon_max_user": 0.0, "max_releases": 0}
        worst = int(np.argmax(self._upper)) if self.guaranteed else int(np.argmax(self._releases))
        return {
            "epsilon_max_user": self.accountant(worst).epsilon(),
            "worst_user": worst,
            "max_releases": int(self._releases.max()),
        }


def _append_synced(path: Path, line: str, create: bool = False) -> None:
    """Append one line to ``path`` and sync it to disk (owner-only file)."""
    flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
