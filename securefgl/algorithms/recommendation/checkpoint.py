"""Checkpoints of a recommendation run, so that a long run can stop and resume.

Each party writes its own state to its own file (``<party id>.npz`` in the checkpoint's
round directory), where it lives: the driver passes only a directory name, never a
party's state, and no process reads another party's file. Files are numpy archives
loaded with ``allow_pickle=False`` (arrays, and JSON text for small records such as RNG
states), written to a temporary name and renamed, so a file is whole or absent.

A party's file holds its secrets (a user group's own embeddings and the state of its
private noise generator): it is as sensitive as the party's memory and belongs on the
party's own storage: files are created readable by their owner only (0600, in 0700
folders).
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np
import torch

from securefgl.data.datasets import private_dir

_META = "__meta__"


def save_arrays(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: Any) -> None:
    """``arrays`` and a JSON ``meta`` record to ``path`` (atomic, owner-only)."""
    path = Path(path)
    private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        np.savez(f, **arrays, **{_META: np.array(json.dumps(meta))})
    os.replace(tmp, path)


def load_arrays(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], Any]:
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files if k != _META}
        return arrays, json.loads(str(data[_META]))


def torch_rng_state(gen: torch.Generator) -> np.ndarray:
    return gen.get_state().numpy().copy()


def set_torch_rng_state(gen: torch.Generator, state: np.ndarray) -> None:
    gen.set_state(torch.from_numpy(np.ascontiguousarray(state, np.uint8)))


def party_file(directory: str | os.PathLike, party_id: str) -> Path:
    return Path(directory) / f"{party_id}.npz"


class Stateful(ABC):
    """A party that saves its own state to its own file and loads it back."""

    @abstractmethod
    def save_state(self, directory: str) -> None:
        """Write this party's state under ``directory`` (its own file)."""

    @abstractmethod
    def load_state(self, directory: str) -> None:
        """Restore this party's state from its own file under ``directory``."""
