"""Named node-classification datasets, loaded offline-first through PyTorch Geometric.

Root, the first that applies: the ``root`` argument, ``$SECUREFGL_DATA``, else none (PyG
downloads into the cache). A root follows PyG's raw layout, one folder per PyG class::

    <root>/Planetoid/Cora/raw/ind.cora.x ...
    <root>/Amazon/Photo/raw/amazon_electronics_photo.npz
    <root>/WikipediaNetwork/chameleon/geom_gcn/raw/out1_graph_edges.txt ...

The root is never written to, and its files are untrusted: the dataset's raw files are
copied into ``$SECUREFGL_CACHE`` (default ``~/.cache/securefgl/datasets``; new folders mode
0700), each checked against the SHA-256 claimed for it by the packaged list of published
files and by the root's ``SHA256SUMS`` (:mod:`securefgl.data.integrity`) before PyG reads
it, re-copied when the root's copy changes (removing the stale ``processed/``), under a
per-dataset lock so processes sharing a cache do not race. PyG's ``processed/`` is built in
a staging folder and renamed into place, recorded and checked on every load; a corrupt one
(e.g. a run killed while writing it) is rebuilt once, with a warning that names the file
(:mod:`securefgl.data.processed_cache`). PyG downloads only when asked
(``download=True``). Every graph is normalised: ``x`` float32, ``y`` int64, ``edge_index``
symmetrised, coalesced and without self-loops, PyG's preset masks dropped (splits come from
:func:`securefgl.data.random_split`), plus ``data.name`` and ``data.num_classes``.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Data
from torch_geometric.utils import remove_self_loops, to_undirected

from securefgl.data import processed_cache
from securefgl.data.catalog import (
    DATASETS,
    ENV_CACHE,
    ENV_DATA,
    DatasetSpec,
    available_datasets,
    cache_dir,
    data_root,
    resolve_name,
)
from securefgl.data.integrity import (
    DatasetCorruptError,
    DatasetError,
    DatasetIntegrityError,
    DatasetNotAvailableError,
    copy_verified,
    verify_copy,
)

__all__ = [
    "DATASETS",
    "DatasetCorruptError",
    "DatasetError",
    "DatasetIntegrityError",
    "DatasetNotAvailableError",
    "DatasetSpec",
    "available_datasets",
    "cache_dir",
    "data_root",
    "load_dataset",
    "resolve_name",
]

logger = logging.getLogger(__name__)

def private_dir(path: Path, stop: Path | None = None) -> Path:
    """Create ``path`` and its missing parents with mode 0700; folders between ``stop``
    (exclusive) and ``path`` that exist and are ours are restricted to 0700 too."""
    path = Path(path)
    chain = [path, *path.parents]
    chain = chain[: chain.index(stop)] if stop in chain else chain
    for folder in reversed(chain):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            if stop is not None and folder.is_dir() and folder.stat().st_uid == os.getuid():
                folder.chmod(0o700)
    return path


def _sync_raw(spec: DatasetSpec, root: Path, cache: Path, verify: bool) -> None:
    """Copy the dataset's raw files from ``root`` into ``cache`` (never the reverse).

    Each file goes through a temporary name and is checked (``verify``) against its claimed
    SHA-256 before the rename, so PyG never reads an unverified or half-copied file. A
    changed source file invalidates the cached ``processed/``.
    """
    src, dst = spec.raw_dir(root), spec.raw_dir(cache)
    changed = False
    for name in spec.raw_files:
        entry, target = src / name, dst / name
        relpath = f"{spec.pyg_class}/{spec.raw_subdir}/{name}"
        st = entry.stat()
        if target.is_file():
            tt = target.stat()
            if tt.st_size == st.st_size and int(tt.st_mtime) == int(st.st_mtime):
                try:
                    if verify:  # copied earlier, maybe before a hash was claimed for it
                        verify_copy(root, relpath, target)
                    continue
                except DatasetIntegrityError as err:  # the copy went bad: copy it again
                    logger.warning("%s; copying it again from %s", err, entry)
        private_dir(dst, cache)
        copy_verified(root, relpath, target, verify)
        changed = True
        logger.debug("copied %s -> %s", entry, target)
    processed = dst.parent / "processed"
    if changed and processed.is_dir():
        logger.info("raw files of %s changed; removing stale %s", spec.name, processed)
        shutil.rmtree(processed)


def _not_available(
    spec: DatasetSpec, root: Path | None, cache: Path, why: str, downloaded: bool = False
) -> str:
    example = Path("<root>") / spec.pyg_class / spec.raw_subdir / spec.raw_files[0]
    if root is None:
        where = f"no data root (--data-root is not given and {ENV_DATA} is not set)"
    elif not root.is_dir():
        where = f"the data root {root} does not exist or is not a folder"
    else:
        raw = spec.raw_dir(root)
        missing = [f for f in spec.raw_files if not (raw / f).is_file()]
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if missing[3:] else "")
        where = f"{raw} lacks {shown}"
    fix = "" if downloaded else ", or pass --download to let PyG fetch it"
    return (
        f"dataset {spec.name!r} is not available offline: {where}; not in the cache "
        f"{spec.raw_dir(cache)} either. {why} To fix: export {ENV_DATA}=/path/to/datasets "
        f"(a folder in PyG raw layout, e.g. {example}){fix}."
    )


@contextmanager
def _cache_lock(cache: Path, name: str) -> Iterator[None]:
    """Hold an exclusive lock on ``cache/.<name>.lock`` (no-op where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; concurrent first loads may race
        yield
        return
    private_dir(cache)
    fd = os.open(cache / f".{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _load_pyg(spec: DatasetSpec, root: Path | None, download: bool, verify: bool) -> Data:
    return load_pyg_dataset(spec, root, download, verify)[0]  # type: ignore[index]


def load_pyg_dataset(
    spec: DatasetSpec, root: Path | None, download: bool = False, verify: bool = True
) -> Any:
    """The PyG dataset object of ``spec`` (every graph of it, e.g. a ``TUDataset``), its raw
    files copied into the cache and checked first (the module docstring)."""
    cache = cache_dir()
    if cache.exists() and cache.stat().st_uid != os.getuid():
        raise DatasetError(
            f"the dataset cache {cache} belongs to another user; set {ENV_CACHE} to a folder "
            "of your own"
        )
    try:
        private_dir(cache)
        if not cache.is_dir():
            raise NotADirectoryError(20, "not a folder")
    except OSError as err:
        raise DatasetError(f"the dataset cache {cache} cannot be used ({err.strerror}); set "
                           f"{ENV_CACHE} to a writable folder of your own") from None  # fmt: skip
    with _cache_lock(cache, spec.name):
        return _sync_and_process(spec, root, cache, download, verify)


def _sync_and_process(
    spec: DatasetSpec, root: Path | None, cache: Path, download: bool, verify: bool
) -> Any:
    if root is not None and spec.present(root):
        _sync_raw(spec, root, cache, verify)
    elif not spec.present(cache):
        if not download:
            why = "Downloading is disabled (the default)."
            raise DatasetNotAvailableError(_not_available(spec, root, cache, why))
        logger.info(
            "%s: raw files not found offline; downloading with PyG into %s", spec.name, cache
        )
    raw_existed = spec.raw_dir(cache).is_dir()
    processed = spec.raw_dir(cache).parent / "processed"
    status, why = processed_cache.state(processed)
    if status == "corrupt":
        _discard(spec, processed, why)
    built = status != "complete" and spec.present(cache)
    if built:
        _build(spec, root, cache)
    else:
        private_dir(processed, cache)
    try:
        dataset = spec.factory(str(cache / spec.pyg_class))
    except Exception as exc:  # PyG raises URLError/OSError/aiohttp/fsspec errors
        if not spec.present(cache):
            _download_failed(spec, root, cache, raw_existed, exc)
        if status == "complete" and not built:  # a recorded cache that still fails: once more
            _discard(spec, processed, f"PyG could not load it ({type(exc).__name__}: {exc})")
            _build(spec, root, cache)
            try:
                dataset = spec.factory(str(cache / spec.pyg_class))
            except Exception as again:
                raise _unloadable(spec, processed, again) from again
        else:
            raise _unloadable(spec, processed, exc) from exc
    if not (processed / processed_cache.RECORD).is_file():  # downloaded and processed in place
        processed_cache.record(processed)
    return dataset


def _discard(spec: DatasetSpec, processed: Path, why: str) -> None:
    logger.warning(
        "dataset %s: the processed cache is corrupt: %s; rebuilding it from the raw files",
        spec.name, why,
    )  # fmt: skip
    shutil.rmtree(processed, ignore_errors=True)


def _build(spec: DatasetSpec, root: Path | None, cache: Path) -> None:
    """Process the raw files into ``processed/`` atomically; a failure blames the raw files."""
    private_dir(spec.raw_dir(cache), cache)
    try:
        processed_cache.build_staged(
            cache, spec.name, spec.raw_dir, lambda stage: spec.factory(str(stage / spec.pyg_class))
        )
    except Exception as exc:
        files = ", ".join(spec.raw_files[:3]) + (", ..." if spec.raw_files[3:] else "")
        raise DatasetCorruptError(
            f"dataset {spec.name!r}: PyG could not read its raw files ({files} in "
            f"{spec.raw_dir(root if root is not None else cache)}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _unloadable(spec: DatasetSpec, processed: Path, exc: Exception) -> DatasetCorruptError:
    return DatasetCorruptError(
        f"dataset {spec.name!r}: PyG could not load its processed cache {processed} (built "
        f"from the raw files and checked just before): {type(exc).__name__}: {exc}; remove "
        f"{processed} to rebuild it"
    )


def _download_failed(
    spec: DatasetSpec, root: Path | None, cache: Path, raw_existed: bool, exc: Exception
) -> None:
    if not raw_existed:  # remove the empty / partial folders the failed download left
        shutil.rmtree(spec.raw_dir(cache).parent, ignore_errors=True)
        parent = spec.raw_dir(cache).parent.parent
        while parent != cache and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    why = f"PyG download failed: {type(exc).__name__}: {exc}."
    raise DatasetNotAvailableError(_not_available(spec, root, cache, why, True)) from exc


def _normalise(data: Data, name: str, num_classes: int) -> Data:
    n = int(data.num_nodes)
    edge_index, _ = remove_self_loops(data.edge_index.long())
    edge_index = to_undirected(edge_index, num_nodes=n)  # also coalesces (sorted, unique)
    out = Data(
        x=data.x.to(torch.float32).contiguous(),
        y=data.y.to(torch.long).view(-1).contiguous(),
        edge_index=edge_index.contiguous(),
        num_nodes=n,
    )
    out.name = name
    out.num_classes = int(num_classes)
    return out


def load_dataset(
    name: str, root: str | Path | None = None, *, download: bool = False, verify: bool = True
) -> Data:
    """Load a named dataset as a normalised PyG ``Data`` (see the module docstring).

    ``name`` is case-insensitive and accepts aliases (``"amazon-photo"``,
    ``"coauthor-cs"``). ``"csbm"`` returns :func:`securefgl.data.csbm` with its
    defaults and needs no root. ``download=True`` lets PyG download a dataset missing
    offline; ``verify=False`` skips the SHA-256 checks (your own modified copies).

    Raises:
        ValueError: unknown name.
        DatasetNotAvailableError: not present offline and not downloaded.
        DatasetIntegrityError: a root file does not match its claimed SHA-256.
        DatasetCorruptError: PyG cannot parse the raw files.
    """
    key = resolve_name(name)
    if key == "csbm":
        from securefgl.data.synthetic import csbm

        return csbm()
    spec = DATASETS[key]
    raw = _load_pyg(spec, data_root(root), download, verify)
    num_classes = max(spec.num_classes, int(raw.y.max()) + 1)
    data = _normalise(raw, spec.name, num_classes)
    logger.info(
        "loaded %s: %d nodes, %d directed edges, %d features, %d classes",
        spec.name,
        data.num_nodes,
        data.edge_index.size(1),
        data.x.size(1),
        num_classes,
    )
    return data
