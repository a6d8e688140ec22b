"""Every named dataset the library knows, without loading one: node-classification
datasets (PyG's raw layout), TU graph-classification datasets and rating datasets, their
aliases and where each lives under the data root. It imports no torch, so the command
line's help and ``securefgl datasets`` stay fast; :mod:`securefgl.data.datasets`,
:mod:`securefgl.data.graph_datasets` and :mod:`securefgl.data.ratings` load them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# --------------------------------------------------------------------------- node datasets

ENV_DATA = "SECUREFGL_DATA"
ENV_CACHE = "SECUREFGL_CACHE"
_DEFAULT_CACHE = Path("~/.cache/securefgl/datasets")


@dataclass(frozen=True)
class DatasetSpec:
    """Where a named dataset lives in the PyG raw layout and how PyG builds it."""

    name: str  # canonical name, e.g. "Cora"
    pyg_class: str  # e.g. "Planetoid"
    raw_subdir: str  # raw folder relative to ``<root>/<pyg_class>``
    raw_files: tuple[str, ...]  # files PyG 2.8 needs in the raw folder
    num_classes: int
    factory: Callable[[str], object]  # family root -> PyG dataset

    def raw_dir(self, root: str | Path) -> Path:
        return Path(root) / self.pyg_class / self.raw_subdir

    def present(self, root: str | Path) -> bool:
        raw = self.raw_dir(root)
        return all((raw / f).is_file() for f in self.raw_files)


def _planetoid(name: str) -> Callable[[str], object]:
    def make(family_root: str) -> object:
        from torch_geometric.datasets import Planetoid

        return Planetoid(family_root, name)

    return make


def _amazon(name: str) -> Callable[[str], object]:
    def make(family_root: str) -> object:
        from torch_geometric.datasets import Amazon

        return Amazon(family_root, name)

    return make


def _coauthor(name: str) -> Callable[[str], object]:
    def make(family_root: str) -> object:
        from torch_geometric.datasets import Coauthor

        return Coauthor(family_root, name)

    return make


def _wiki(name: str) -> Callable[[str], object]:
    def make(family_root: str) -> object:
        from torch_geometric.datasets import WikipediaNetwork

        return WikipediaNetwork(family_root, name, geom_gcn_preprocess=True)

    return make


def _planetoid_files(name: str) -> tuple[str, ...]:
    parts = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
    return tuple(f"ind.{name.lower()}.{p}" for p in parts)


def _wiki_files(name: str) -> tuple[str, ...]:
    splits = tuple(f"{name}_split_0.6_0.2_{i}.npz" for i in range(10))
    return ("out1_node_feature_label.txt", "out1_graph_edges.txt", *splits)


DATASETS: dict[str, DatasetSpec] = {
    s.name.lower(): s
    for s in (
        DatasetSpec(
            "Cora", "Planetoid", "Cora/raw", _planetoid_files("Cora"), 7, _planetoid("Cora")
        ),
        DatasetSpec(
            "CiteSeer",
            "Planetoid",
            "CiteSeer/raw",
            _planetoid_files("CiteSeer"),
            6,
            _planetoid("CiteSeer"),
        ),
        DatasetSpec(
            "PubMed", "Planetoid", "PubMed/raw", _planetoid_files("PubMed"), 3, _planetoid("PubMed")
        ),
        DatasetSpec(
            "Photo", "Amazon", "Photo/raw", ("amazon_electronics_photo.npz",), 8, _amazon("Photo")
        ),
        DatasetSpec(
            "Computers",
            "Amazon",
            "Computers/raw",
            ("amazon_electronics_computers.npz",),
            10,
            _amazon("Computers"),
        ),
        DatasetSpec("CS", "Coauthor", "CS/raw", ("ms_academic_cs.npz",), 15, _coauthor("CS")),
        DatasetSpec(
            "chameleon",
            "WikipediaNetwork",
            "chameleon/geom_gcn/raw",
            _wiki_files("chameleon"),
            5,
            _wiki("chameleon"),
        ),
        DatasetSpec(
            "squirrel",
            "WikipediaNetwork",
            "squirrel/geom_gcn/raw",
            _wiki_files("squirrel"),
            5,
            _wiki("squirrel"),
        ),
    )
}

GENERATED = ("csbm",)

# Normalised alias (lower case, no '-', '_', ' ') -> canonical key.
_ALIASES: dict[str, str] = {
    **{k: k for k in DATASETS},
    "amazonphoto": "photo",
    "amazonphotos": "photo",
    "amazoncomputers": "computers",
    "amazoncomputer": "computers",
    "computer": "computers",
    "coauthorcs": "cs",
    "wikichameleon": "chameleon",
    "wikisquirrel": "squirrel",
    "csbm": "csbm",
    "sbm": "csbm",
    "synthetic": "csbm",
}


def resolve_name(name: str) -> str:
    """Canonical key of a dataset name or alias (``"Amazon-Photo"`` -> ``"photo"``)."""
    key = "".join(ch for ch in str(name).lower() if ch not in "-_ ")
    if key not in _ALIASES:
        known = ", ".join([s.name for s in DATASETS.values()] + list(GENERATED))
        raise ValueError(f"unknown dataset {name!r}; known: {known} (case-insensitive)")
    return _ALIASES[key]


def names_csbm(name: str) -> bool:
    """Whether ``name`` is an alias of the CSBM generator (``csbm``, ``c-sbm``, ``synthetic``;
    an unknown name is not)."""
    try:
        return resolve_name(name) == "csbm"
    except ValueError:
        return False


def data_root(root: str | Path | None = None) -> Path | None:
    """The offline root: ``root`` if given, else ``$SECUREFGL_DATA``, else None."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get(ENV_DATA)
    return Path(env).expanduser() if env else None


def cache_dir() -> Path:
    """The writable cache: ``$SECUREFGL_CACHE`` or ``~/.cache/securefgl/datasets``."""
    env = os.environ.get(ENV_CACHE)
    return (Path(env) if env else _DEFAULT_CACHE).expanduser()


# --------------------------------------------------------------------------- TU graph datasets


def _tu(name: str) -> Callable[[str], object]:
    def make(family_root: str) -> object:
        from torch_geometric.datasets import TUDataset

        return TUDataset(family_root, name, use_node_attr=False)

    return make


def _tu_spec(name: str, parts: tuple[str, ...], num_classes: int) -> DatasetSpec:
    files = tuple(f"{name}_{p}.txt" for p in ("A", "graph_indicator", "graph_labels", *parts))
    return DatasetSpec(name, "TUDataset", f"{name}/raw", files, num_classes, _tu(name))


#: The TU datasets of GPFL's experiments and of the shared data root (Table 1).
TU_DATASETS: dict[str, DatasetSpec] = {
    s.name.lower(): s
    for s in (
        _tu_spec("NCI1", ("node_labels",), 2),
        _tu_spec("PROTEINS", ("node_labels",), 2),
        _tu_spec("MUTAG", ("node_labels",), 2),
        _tu_spec("ENZYMES", ("node_labels",), 6),
        _tu_spec("IMDB-BINARY", (), 2),
    )
}
GENERATED_GRAPHS = ("synthetic-graphs", "motif-basis", "motif-size")  # GOOD-Motif: good_motif.py


def resolve_graph_name(name: str) -> str:
    """Canonical key of a graph dataset (``"nci1"``, ``"imdb-binary"``, ``"synthetic-graphs"``)."""
    key = str(name).strip().lower().replace("_", "-")
    if key in TU_DATASETS or key in GENERATED_GRAPHS:
        return key
    if key.replace("-", "") == "imdbbinary":
        return "imdb-binary"
    known = ", ".join([s.name for s in TU_DATASETS.values()] + list(GENERATED_GRAPHS))
    raise ValueError(f"unknown graph dataset {name!r}; known: {known} (case-insensitive)")


# --------------------------------------------------------------------------- rating datasets

RATING_DATASETS: dict[str, tuple[str, ...]] = {
    "FilmTrust": ("SocialRec/FilmTrust/ratings.txt", "SocialRec/FilmTrust/trust.txt"),
    "Ciao": ("SocialRec/Ciao/rating.mat", "SocialRec/Ciao/trustnetwork.mat"),
    "Epinions": ("SocialRec/Epinions/rating.mat", "SocialRec/Epinions/trustnetwork.mat"),
    "MovieLens100K": ("MovieLens100K/raw/u.data",),
}
_RATING_ALIASES = {k.lower(): k for k in RATING_DATASETS} | {"ml100k": "MovieLens100K"}


def resolve_rating_name(name: str) -> str:
    """Canonical name of a rating dataset (``"ml100k"`` -> ``"MovieLens100K"``)."""
    key = name.lower().replace("-", "").replace("_", "")
    if key not in _RATING_ALIASES:
        raise ValueError(f"unknown rating dataset {name!r}; known: {', '.join(RATING_DATASETS)}")
    return _RATING_ALIASES[key]


# --------------------------------------------------------------------------- what is there


def available_datasets(root: str | Path | None = None) -> list[dict]:
    """Which named datasets are present offline (``securefgl datasets``), every task's.

    One dict per dataset: ``name``, ``task`` (``node``, ``graph`` or ``recommendation``:
    the ``--task`` that reads it), ``class`` (PyG class, or ``rating`` / ``generated``),
    ``path`` (its folder under the resolved root, or None without a root), ``present``
    (all its files there) and ``cached`` (raw files already in the cache; rating datasets
    are read in place). Generated datasets are always present.
    """
    resolved = data_root(root)
    cache = cache_dir()
    rows: list[dict] = []
    for task, specs in (("node", DATASETS), ("graph", TU_DATASETS)):
        for spec in specs.values():
            rows.append(
                {
                    "name": spec.name,
                    "task": task,
                    "class": spec.pyg_class,
                    "path": str(spec.raw_dir(resolved)) if resolved is not None else None,
                    "present": bool(resolved is not None and spec.present(resolved)),
                    "cached": spec.present(cache),
                }
            )
    for name, files in RATING_DATASETS.items():
        folder = Path(files[0]).parent
        rows.append(
            {
                "name": name,
                "task": "recommendation",
                "class": "rating",
                "path": str(resolved / folder) if resolved is not None else None,
                "present": bool(resolved is not None
                                and all((resolved / f).is_file() for f in files)),
                "cached": False,
            }  # fmt: skip
        )
    for task, names in (("node", GENERATED), ("graph", GENERATED_GRAPHS)):
        for name in names:
            rows.append({"name": name, "task": task, "class": "generated", "path": None,
                         "present": True, "cached": False})  # fmt: skip
    return rows
