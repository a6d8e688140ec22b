"""Rating + trust datasets for federated recommendation, read offline from the data root.

Layouts under the root (resolved like the node datasets: argument, else
``$SECUREFGL_DATA``): ``SocialRec/FilmTrust/{ratings.txt, trust.txt}`` (Guo et al. 2013),
``SocialRec/{Ciao,Epinions}/{rating.mat, trustnetwork.mat}`` (Tang et al. 2012; Ciao's few
0 ratings dropped), ``MovieLens100K/raw/u.data`` (Harper & Konstan 2015; no trust links).
Read-only, no cache copy; each file is read once and checked against the SHA-256 claimed
for it (:mod:`securefgl.data.integrity`) before it is parsed. Ids are remapped to
``0..n-1``; duplicate (user, item) ratings keep the last; trust links are kept between
kept users, without self-loops; ``max_users`` keeps a seeded subset of users.
``variant="fesog"`` reproduces the FeSoG authors' FilmTrust preprocessing (874 users in
its file, 740 with ratings; 1957 items, 18,662 ratings: users in the trust file,
r ↦ 2r − 1, the doubled scale of FeSoG's Table 4); for Ciao / Epinions it is the raw data.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from securefgl.data.catalog import ENV_DATA, RATING_DATASETS, data_root, resolve_rating_name
from securefgl.data.integrity import (
    DatasetCorruptError,
    DatasetError,
    DatasetNotAvailableError,
    read_verified,
)


@dataclass(frozen=True)
class RatingData:
    """All ratings and trust links of a dataset (simulator-only: no client holds this)."""

    name: str
    n_users: int
    n_items: int
    user: np.ndarray  # int64 [R]
    item: np.ndarray  # int64 [R]
    rating: np.ndarray  # float32 [R]
    trust: np.ndarray  # int64 [2, E], directed trustor -> trustee
    rating_min: float
    rating_max: float
    #: the raw ids of user / item index 0..n-1 (empty for generated data)
    user_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    item_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def n_ratings(self) -> int:
        return int(self.user.size)

    def summary(self) -> dict[str, float | int | str]:
        return {
            "dataset": self.name,
            "users": self.n_users,
            "items": self.n_items,
            "ratings": self.n_ratings,
            "trust_links": int(self.trust.shape[1]),
            "rating_min": self.rating_min,
            "rating_max": self.rating_max,
        }


def _columns(name: str, root: Path, relpath: str, verify: bool) -> np.ndarray:
    """One file's rows as an array (text files with ``>= 3`` / ``>= 2`` columns, ``.mat``)."""
    data = read_verified(root, relpath, verify)
    path = root / relpath
    try:
        if relpath.endswith(".mat"):
            from scipy.io import loadmat

            key = Path(relpath).stem
            rows = loadmat(io.BytesIO(data))[key]
        else:
            rows = np.loadtxt(io.BytesIO(data), dtype=np.float64, ndmin=2)
    except Exception as err:  # numpy / scipy parse errors have no common base class
        raise DatasetCorruptError(f"{name}: {path} cannot be parsed: {err}") from err
    width = 2 if Path(relpath).name.startswith("trust") else 3
    if rows.ndim != 2 or rows.shape[0] == 0 or rows.shape[1] < width:
        raise DatasetCorruptError(
            f"{name}: {path} must hold rows of at least {width} numbers, got shape {rows.shape}"
        )
    if not np.isfinite(rows).all():
        raise DatasetCorruptError(f"{name}: {path} holds non-finite values")
    return rows


def _read_raw(
    name: str, root: Path, verify: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    files = RATING_DATASETS[name]
    r = _columns(name, root, files[0], verify)
    t = np.zeros((0, 2)) if len(files) == 1 else _columns(name, root, files[1], verify)
    col = 3 if files[0].endswith(".mat") else 2  # .mat: [user, item, category, rating, ...]
    if files[0].endswith(".mat") and r.shape[1] < 4:
        raise DatasetCorruptError(f"{name}: {root / files[0]} has no rating column")
    ids = r[:, :2].astype(np.int64)
    return ids[:, 0], ids[:, 1], r[:, col].astype(np.float64), t[:, :2].astype(np.int64).T


def load_ratings(
    name: str,
    root: str | Path | None = None,
    *,
    max_users: int | None = None,
    min_ratings: int = 1,
    seed: int = 0,
    variant: str = "raw",
    verify: bool = True,
) -> RatingData:
    """Load a rating dataset by name (FilmTrust, Ciao, Epinions, MovieLens100K);
    ``verify=False`` skips the SHA-256 checks (your own modified copies)."""
    if variant not in ("raw", "fesog"):
        raise ValueError(f"variant must be 'raw' or 'fesog', got {variant!r}")
    name = resolve_rating_name(name)
    base = data_root(root)
    missing = [f for f in RATING_DATASETS[name] if base is None or not (base / f).is_file()]
    if missing:
        if base is None:
            where = f"no data root is set (--data-root, or the {ENV_DATA} environment variable)"
        elif not base.is_dir():
            where = f"the data root {base} does not exist or is not a folder"
        else:
            where = f"{base} lacks {', '.join(missing)}"
        raise DatasetNotAvailableError(
            f"rating dataset {name!r} is not available: {where}. To fix: export "
            f"{ENV_DATA}=/path/to/datasets (with {RATING_DATASETS[name][0]} under it)"
        )
    u, i, r, t = _read_raw(name, base, verify)
    keep = r > 0
    if variant == "fesog" and name == "FilmTrust":
        keep &= np.isin(u, t)
        r = 2.0 * r - 1.0
    u, i, r = u[keep], i[keep], r[keep]
    if u.size == 0 or u.min() < 0 or i.min() < 0:
        raise DatasetError(f"{name}: no usable ratings (or negative ids) under {base}")
    # dedupe (user, item): keep the last occurrence
    key = u * (int(i.max()) + 1) + i
    _, last = np.unique(key[::-1], return_index=True)
    sel = np.sort(u.size - 1 - last)
    u, i, r = u[sel], i[sel], r[sel]
    users, counts = np.unique(u, return_counts=True)
    users = users[counts >= min_ratings]
    if max_users is not None and users.size > max_users:
        rng = np.random.default_rng([seed, 7])
        users = np.sort(rng.choice(users, size=max_users, replace=False))
    mask = np.isin(u, users)
    u, i, r = u[mask], i[mask], r[mask]
    uid = np.searchsorted(users, u)
    items = np.unique(i)
    iid = np.searchsorted(items, i)
    # trust between kept users, remapped, no self-loops, deduplicated
    tm = np.isin(t[0], users) & np.isin(t[1], users) & (t[0] != t[1])
    tt = np.searchsorted(users, t[:, tm])
    if tt.size:
        tt = np.unique(tt, axis=1)
    return RatingData(
        name=name,
        n_users=int(users.size),
        n_items=int(items.size),
        user=uid.astype(np.int64),
        item=iid.astype(np.int64),
        rating=r.astype(np.float32),
        trust=tt.astype(np.int64).reshape(2, -1),
        rating_min=float(r.min()),
        rating_max=float(r.max()),
        user_ids=users.astype(np.int64),
        item_ids=items.astype(np.int64),
    )


def synthetic_ratings(
    n_users: int = 200,
    n_items: int = 150,
    per_user: int = 12,
    dim: int = 4,
    n_trust: int = 400,
    seed: int = 0,
) -> RatingData:
    """A small low-rank rating dataset with trust links among similar users (tests)."""
    rng = np.random.default_rng(seed)
    U = rng.normal(size=(n_users, dim))
    V = rng.normal(size=(n_items, dim))
    user = np.repeat(np.arange(n_users), per_user)
    item = np.concatenate([rng.choice(n_items, per_user, replace=False) for _ in range(n_users)])
    score = (U[user] * V[item]).sum(1)
    rating = np.clip(np.round(3.0 + score / np.sqrt(dim) * 1.2), 1, 5)
    a = rng.integers(0, n_users, n_trust)
    b = (a + rng.integers(1, 5, n_trust)) % n_users
    t = np.unique(np.stack([a, b]), axis=1)
    return RatingData(
        "synthetic",
        n_users,
        n_items,
        user.astype(np.int64),
        item.astype(np.int64),
        rating.astype(np.float32),
        t.astype(np.int64),
        1.0,
        5.0,
    )
