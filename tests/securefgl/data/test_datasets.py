"""Tests for securefgl.data.datasets (offline-first loading through PyG).

Without network: a tiny fake Amazon "Photo" in PyG raw layout (loaded with
``verify=False``: it is not the published file) exercises the copy / cache /
normalisation logic, and downloads are monkeypatched to fail. Real datasets
are tested only when SECUREFGL_DATA is set (``-m datasets``).
"""

import hashlib
import logging
import multiprocessing
import os
import shutil
from pathlib import Path
from urllib.error import URLError

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch_geometric.datasets import Amazon, Coauthor, Planetoid, WikipediaNetwork
from torch_geometric.utils import contains_self_loops, is_undirected

from securefgl.data import (
    DatasetCorruptError,
    DatasetNotAvailableError,
    available_datasets,
    load_dataset,
    resolve_name,
)
from securefgl.data.datasets import ENV_CACHE, ENV_DATA, _cache_lock

REAL_ROOT = os.environ.get(ENV_DATA)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Never touch ~/.cache or the real root's env in a test (unless it asks)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(ENV_CACHE, str(cache))
    monkeypatch.delenv(ENV_DATA, raising=False)
    return cache


@pytest.fixture
def no_download(monkeypatch):
    """Every PyG download fails like an offline machine; records the attempts."""
    calls = []

    def fail(self):
        calls.append(type(self).__name__)
        raise URLError("network is unreachable (test)")

    for cls in (Planetoid, Amazon, Coauthor, WikipediaNetwork):
        monkeypatch.setattr(cls, "download", fail)
    return calls


def write_fake_photo(root: Path) -> Path:
    """A 5-node Amazon-format npz with a self-loop, a duplicate and one-way edges."""
    raw = root / "Amazon" / "Photo" / "raw"
    raw.mkdir(parents=True)
    attr = sp.csr_matrix(
        np.array([[1, 0, 2], [0, 1, 0], [3, 0, 0], [0, 0, 1], [1, 1, 0]], dtype=np.float32)
    )
    rows = [0, 1, 1, 2, 3, 4]  # 0->1, 1->1 (self-loop), 1->2, 2->3, 3->4, 4->0 one-way
    cols = [1, 1, 2, 3, 4, 0]
    adj = sp.csr_matrix((np.ones(6, dtype=np.float32), (rows, cols)), shape=(5, 5))
    np.savez(
        raw / "amazon_electronics_photo.npz",
        attr_data=attr.data,
        attr_indices=attr.indices,
        attr_indptr=attr.indptr,
        attr_shape=attr.shape,
        adj_data=adj.data,
        adj_indices=adj.indices,
        adj_indptr=adj.indptr,
        adj_shape=adj.shape,
        labels=np.array([0, 1, 2, 1, 0]),
    )
    return root


def tree_snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """(size, mtime_ns, sha256) of every file and the set of directories under root."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for dn in dirnames:
            snap[os.path.join(dirpath, dn)] = (0, 0, "dir")
        for fn in filenames:
            p = os.path.join(dirpath, fn)
            st = os.stat(p)
            digest = hashlib.sha256(Path(p).read_bytes()).hexdigest()
            snap[p] = (st.st_size, st.st_mtime_ns, digest)
    return snap


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("alias", "key"),
    [
        ("Cora", "cora"),
        ("CITESEER", "citeseer"),
        ("pubmed", "pubmed"),
        ("amazon-photo", "photo"),
        ("Photo", "photo"),
        ("Amazon_Computers", "computers"),
        ("coauthor-cs", "cs"),
        ("CS", "cs"),
        ("Chameleon", "chameleon"),
        ("squirrel", "squirrel"),
        ("CSBM", "csbm"),
    ],
)
def test_resolve_name_aliases(alias, key):
    assert resolve_name(alias) == key


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown dataset 'ogbn-arxiv'"):
        load_dataset("ogbn-arxiv")


def test_csbm_needs_no_root(no_download):
    d = load_dataset("csbm")
    assert d.name == "csbm" and d.num_nodes == 3000 and d.num_classes == 5
    assert no_download == []


# --------------------------------------------------------------------------- offline


def test_fake_root_is_loaded_normalised_and_not_written(tmp_path, isolated_cache, no_download):
    root = write_fake_photo(tmp_path / "root")
    before = tree_snapshot(root)
    d = load_dataset("amazon-photo", root=root, verify=False)
    assert no_download == []
    assert tree_snapshot(root) == before  # nothing written into the user's root
    assert (isolated_cache / "Amazon" / "Photo" / "processed").is_dir()
    assert (isolated_cache / "Amazon" / "Photo" / "raw" / "amazon_electronics_photo.npz").is_file()
    assert d.name == "Photo" and d.num_classes == 8  # Photo has 8 classes in PyG
    assert d.x.dtype == torch.float32 and d.y.dtype == torch.long
    assert d.x.shape == (5, 3) and d.y.tolist() == [0, 1, 2, 1, 0]
    assert is_undirected(d.edge_index) and not contains_self_loops(d.edge_index)
    assert d.edge_index.size(1) == 10  # 5 undirected edges, both directions
    assert "train_mask" not in d and "val_mask" not in d and "test_mask" not in d
    # second load comes from the cache, still without writing into root
    d2 = load_dataset("photo", root=root, verify=False)
    assert torch.equal(d.edge_index, d2.edge_index) and tree_snapshot(root) == before


def test_root_from_environment(tmp_path, monkeypatch, no_download):
    root = write_fake_photo(tmp_path / "envroot")
    monkeypatch.setenv(ENV_DATA, str(root))
    assert load_dataset("Photo", verify=False).num_nodes == 5
    rows = {r["name"]: r for r in available_datasets()}
    assert rows["Photo"]["present"] and rows["Photo"]["cached"]
    assert rows["Photo"]["path"] == str(root / "Amazon" / "Photo" / "raw")
    assert not rows["Cora"]["present"] and not rows["Cora"]["cached"]
    assert rows["csbm"]["present"]
    assert {r["name"] for r in available_datasets() if r["task"] == "node"} == {
        "Cora",
        "CiteSeer",
        "PubMed",
        "Photo",
        "Computers",
        "CS",
        "chameleon",
        "squirrel",
        "csbm",
    }
    names = {task: {r["name"] for r in rows.values() if r["task"] == task}
             for task in ("graph", "recommendation")}  # fmt: skip
    assert names["graph"] == {"NCI1", "PROTEINS", "MUTAG", "ENZYMES", "IMDB-BINARY",
                              "synthetic-graphs", "motif-basis", "motif-size"}  # fmt: skip
    assert names["recommendation"] == {"FilmTrust", "Ciao", "Epinions", "MovieLens100K"}
    assert not rows["FilmTrust"]["present"] and rows["synthetic-graphs"]["present"]


def test_changed_root_file_is_recopied(tmp_path, isolated_cache, no_download):
    root = write_fake_photo(tmp_path / "root")
    assert load_dataset("photo", root=root, verify=False).num_nodes == 5
    shutil.rmtree(root)
    write_fake_photo(root)
    f = root / "Amazon" / "Photo" / "raw" / "amazon_electronics_photo.npz"
    with np.load(f) as z:
        arrays = dict(z)
    arrays["labels"] = np.array([4, 4, 4, 4, 4])
    np.savez(f, **arrays)
    os.utime(f, (1_000_000_000, 1_000_000_000))
    assert load_dataset("photo", root=root, verify=False).y.tolist() == [4, 4, 4, 4, 4]


def _load_photo_when_told(go, root: str) -> None:
    go.wait()
    assert load_dataset("photo", root=root, verify=False).num_nodes == 5


def test_concurrent_loads_wait_for_the_cache_lock(tmp_path, isolated_cache, no_download):
    """A second process does not copy or process while another holds the dataset's lock."""
    root = write_fake_photo(tmp_path / "root")
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    # forked before the lock file is opened, so the child does not inherit (and keep) it
    child = ctx.Process(target=_load_photo_when_told, args=(go, str(root)))
    child.start()
    try:
        with _cache_lock(isolated_cache, "Photo"):
            go.set()
            child.join(timeout=2.0)
            assert child.is_alive()  # blocked on the lock
            assert not (isolated_cache / "Amazon").exists()
        child.join(timeout=60)
        assert child.exitcode == 0
    finally:
        child.kill()
    assert (isolated_cache / "Amazon" / "Photo" / "processed").is_dir()


def test_missing_everywhere_raises_one_clear_error(tmp_path, isolated_cache, no_download):
    root = tmp_path / "empty"
    root.mkdir()
    with pytest.raises(DatasetNotAvailableError) as info:
        load_dataset("cora", root=root, download=True)
    msg = str(info.value)
    assert "'Cora'" in msg and str(root / "Planetoid" / "Cora" / "raw") in msg
    assert str(isolated_cache) in msg and ENV_DATA in msg and "download" in msg
    assert "URLError" in msg and isinstance(info.value.__cause__, URLError)
    assert no_download == ["Planetoid"]
    assert not (isolated_cache / "Planetoid").exists()  # no debris in the cache
    assert tree_snapshot(root) == {}


@pytest.mark.parametrize("name", ["photo", "coauthor-cs", "chameleon"])
def test_failed_download_without_root(name, no_download):
    with pytest.raises(DatasetNotAvailableError, match="not set"):
        load_dataset(name, download=True)
    assert len(no_download) == 1


def test_download_disabled_never_calls_pyg(tmp_path, no_download):
    with pytest.raises(DatasetNotAvailableError, match="disabled"):
        load_dataset("squirrel", root=tmp_path, download=False)
    assert no_download == []


def test_processing_error_is_not_reported_as_missing(tmp_path, no_download):
    root = write_fake_photo(tmp_path / "root")
    (root / "Amazon" / "Photo" / "raw" / "amazon_electronics_photo.npz").write_bytes(b"junk")
    with pytest.raises(DatasetCorruptError, match="amazon_electronics_photo.npz"):
        load_dataset("photo", root=root, verify=False)


# ------------------------------------------------------------------- processed cache


def _processed(cache: Path) -> Path:
    return cache / "Amazon" / "Photo" / "processed"


@pytest.mark.parametrize("damage", ["truncate", "garbage", "truncate-unrecorded"])
def test_a_corrupt_processed_cache_is_rebuilt_once_with_a_warning(
    tmp_path, isolated_cache, no_download, caplog, damage
):
    root = write_fake_photo(tmp_path / "root")
    first = load_dataset("photo", root=root, verify=False)
    data_pt = _processed(isolated_cache) / "data.pt"
    blob = data_pt.read_bytes()
    if damage.startswith("truncate"):  # a run killed while PyG wrote it
        data_pt.write_bytes(blob[: len(blob) // 2])
    else:
        data_pt.write_bytes(bytes(len(blob)))
    if damage.endswith("unrecorded"):  # ... or a cache from before the completion record
        for f in _processed(isolated_cache).glob(".securefgl-complete*"):
            f.unlink()
    with caplog.at_level(logging.WARNING, logger="securefgl.data"):
        again = load_dataset("photo", root=root, verify=False)
    assert torch.equal(first.x, again.x) and torch.equal(first.edge_index, again.edge_index)
    assert "processed cache is corrupt" in caplog.text and "rebuilding" in caplog.text
    named = str(data_pt) if damage != "truncate-unrecorded" else str(data_pt.parent)
    assert named in caplog.text and "amazon_electronics_photo.npz" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="securefgl.data"):
        load_dataset("photo", root=root, verify=False)
    assert caplog.text == ""  # healed for good


def test_a_run_killed_while_processing_leaves_no_partial_cache(
    tmp_path, isolated_cache, no_download, monkeypatch
):
    """PyG's processed file is written aside and renamed: a kill in the middle of writing
    it leaves nothing the next run could trip over."""
    from torch_geometric.io import fs

    root = write_fake_photo(tmp_path / "root")
    real_save = fs.torch_save

    def killed(data, path):
        if str(path).endswith("data.pt"):
            real_save(data, path)
            Path(path).write_bytes(Path(path).read_bytes()[:100])
            raise KeyboardInterrupt  # SIGKILL, as far as the files are concerned
        real_save(data, path)

    monkeypatch.setattr(fs, "torch_save", killed)
    with pytest.raises(KeyboardInterrupt):
        load_dataset("photo", root=root, verify=False)
    monkeypatch.setattr(fs, "torch_save", real_save)
    assert not (_processed(isolated_cache) / "data.pt").exists()
    assert load_dataset("photo", root=root, verify=False).num_nodes == 5
    assert not list(isolated_cache.glob(".build-*"))


# --------------------------------------------------------------------------- real data

needs_data = pytest.mark.skipif(REAL_ROOT is None, reason=f"{ENV_DATA} not set")

# nodes, directed edges after our normalisation (symmetrised, no self-loops), features,
# classes
REAL = {
    "Cora": (2708, 10556, 1433, 7),
    "CiteSeer": (3327, 9104, 3703, 6),
    "PubMed": (19717, 88648, 500, 3),
    "amazon-photo": (7650, 238162, 745, 8),
    "chameleon": (2277, 62742, 2325, 5),
}


@pytest.fixture(scope="module")
def real_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("real_cache")


@pytest.mark.datasets
@needs_data
@pytest.mark.parametrize("name", list(REAL))
def test_real_dataset_statistics(name, real_cache, monkeypatch, no_download):
    monkeypatch.setenv(ENV_CACHE, str(real_cache))
    monkeypatch.setenv(ENV_DATA, REAL_ROOT)
    d = load_dataset(name)
    n, e, f, c = REAL[name]
    assert (d.num_nodes, d.edge_index.size(1), d.x.size(1), d.num_classes) == (n, e, f, c)
    assert d.x.dtype == torch.float32 and d.y.dtype == torch.long
    assert is_undirected(d.edge_index) and not contains_self_loops(d.edge_index)
    assert no_download == []


@pytest.mark.datasets
@needs_data
def test_real_root_tree_unchanged(tmp_path, isolated_cache, no_download):
    # tests run as root, so chmod cannot stop writes: compare the tree instead
    root = tmp_path / "root"
    shutil.copytree(
        Path(REAL_ROOT) / "Planetoid" / "Cora" / "raw", root / "Planetoid" / "Cora" / "raw"
    )
    for dirpath, _, filenames in os.walk(root):
        os.chmod(dirpath, 0o555)
        for fn in filenames:
            os.chmod(os.path.join(dirpath, fn), 0o444)
    before = tree_snapshot(root)
    d = load_dataset("cora", root=root)
    assert tree_snapshot(root) == before
    assert (isolated_cache / "Planetoid" / "Cora" / "processed").is_dir()
    assert d.num_nodes == 2708
    for dirpath, _, _ in os.walk(root):
        os.chmod(dirpath, 0o755)


@pytest.mark.datasets
@needs_data
def test_real_available_datasets():
    rows = available_datasets(REAL_ROOT)
    assert all(r["present"] for r in rows), [r["name"] for r in rows if not r["present"]]
