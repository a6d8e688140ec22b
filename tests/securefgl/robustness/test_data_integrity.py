"""Data roots are untrusted: raw files are checked against their claimed SHA-256 before
PyG or the rating loader reads them, the cache is private, downloads are opt-in."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from urllib.error import URLError

import pytest
from torch_geometric.datasets import Amazon, Planetoid

from benchmarks.robustness.cases import corrupt_cora, corrupt_filmtrust
from securefgl.config import ExperimentConfig
from securefgl.data import integrity
from securefgl.data.datasets import DATASETS, ENV_CACHE, ENV_DATA, load_dataset
from securefgl.data.hashlist import loader_files
from securefgl.data.integrity import (
    DatasetCorruptError,
    DatasetError,
    DatasetIntegrityError,
    DatasetNotAvailableError,
)
from securefgl.data.ratings import load_ratings
from securefgl.experiment import runner
from tests.securefgl.data.test_datasets import write_fake_photo

REAL_ROOT = os.environ.get(ENV_DATA)
PHOTO = "Amazon/Photo/raw/amazon_electronics_photo.npz"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv(ENV_CACHE, str(path))
    monkeypatch.delenv(ENV_DATA, raising=False)
    return path


@pytest.fixture
def no_download(monkeypatch):
    calls = []

    def fail(self):
        calls.append(type(self).__name__)
        raise URLError("offline (test)")

    for cls in (Planetoid, Amazon):
        monkeypatch.setattr(cls, "download", fail)
    return calls


@pytest.fixture
def unlisted_photo(monkeypatch):
    """The packaged list without the Photo file (so the root's SHA256SUMS decides)."""
    files = {k: v for k, v in integrity.known_hashes().items() if k != PHOTO}
    monkeypatch.setattr(integrity, "known_hashes", lambda: files)


def test_packaged_list_covers_exactly_the_files_the_loaders_read():
    known = integrity.known_hashes()
    assert set(known) == set(loader_files())
    assert all(len(h) == 64 for h in known.values())
    data = json.loads(integrity.KNOWN_HASHES.read_text())
    assert data["files"] == known and "SHA256SUMS" in data["about"]


def test_corrupt_file_is_refused_before_pyg_reads_it(tmp_path, cache, no_download):
    corrupt_cora(tmp_path / "root")
    with pytest.raises(DatasetIntegrityError, match=r"Cora/raw/ind\.cora\.x: SHA-256"):
        load_dataset("cora", root=tmp_path / "root")
    raw = DATASETS["cora"].raw_dir(cache)
    assert not any(raw.iterdir())  # nothing unverified reached the cache
    assert no_download == []


def test_root_sha256sums_is_checked_too(tmp_path, unlisted_photo, no_download):
    root = write_fake_photo(tmp_path / "root")
    digest = hashlib.sha256((root / PHOTO).read_bytes()).hexdigest()
    (root / "SHA256SUMS").write_text(f"{'0' * 64}  ./{PHOTO}\n")
    with pytest.raises(DatasetIntegrityError, match=r"listed in .*root/SHA256SUMS"):
        load_dataset("photo", root=root)
    (root / "SHA256SUMS").write_text(f"{digest}  ./{PHOTO}\n")
    assert load_dataset("photo", root=root).num_nodes == 5


def test_a_cached_copy_is_checked_against_hashes_claimed_later(tmp_path, unlisted_photo):
    root = write_fake_photo(tmp_path / "root")
    assert load_dataset("photo", root=root, verify=False).num_nodes == 5
    (root / "SHA256SUMS").write_text(f"{'1' * 64}  {PHOTO}\n")
    with pytest.raises(DatasetIntegrityError, match="amazon_electronics_photo.npz"):
        load_dataset("photo", root=root)


def test_a_cached_copy_gone_bad_is_copied_again_from_the_root(tmp_path, cache, unlisted_photo,
                                                              caplog):
    root = write_fake_photo(tmp_path / "root")
    digest = hashlib.sha256((root / PHOTO).read_bytes()).hexdigest()
    (root / "SHA256SUMS").write_text(f"{digest}  ./{PHOTO}\n")
    assert load_dataset("photo", root=root).num_nodes == 5
    copy = cache / PHOTO
    st, data = copy.stat(), bytearray(copy.read_bytes())
    data[100:104] = bytes(b ^ 0xFF for b in data[100:104])  # same size and time: the hash tells
    copy.write_bytes(bytes(data))
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
    with caplog.at_level("WARNING"):
        assert load_dataset("photo", root=root).num_nodes == 5
    assert "copying it again" in caplog.text
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == digest


def test_unparsable_raw_files_name_the_dataset_and_file(tmp_path):
    root = write_fake_photo(tmp_path / "root")
    (root / PHOTO).write_bytes(b"not an npz")
    with pytest.raises(DatasetCorruptError, match="'Photo'.*amazon_electronics_photo.npz"):
        load_dataset("photo", root=root, verify=False)


def test_cache_is_private(tmp_path, cache):
    root = write_fake_photo(tmp_path / "root")
    load_dataset("photo", root=root, verify=False)
    folders = [cache] + [Path(d) / n for d, ns, _ in os.walk(cache) for n in ns]
    assert {stat.S_IMODE(f.stat().st_mode) for f in folders} == {0o700}
    assert (cache / "Amazon" / "Photo" / "processed").is_dir()
    assert stat.S_IMODE((cache / ".Photo.lock").stat().st_mode) == 0o600
    copy = cache / PHOTO
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600  # the root's mode is not copied
    assert int(copy.stat().st_mtime) == int((root / PHOTO).stat().st_mtime)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to hand the cache to another user")
def test_a_cache_of_another_user_is_refused(tmp_path, cache):
    cache.mkdir()
    os.chown(cache, 65534, 65534)
    with pytest.raises(DatasetError, match="belongs to another user"):
        load_dataset("photo", root=write_fake_photo(tmp_path / "root"), verify=False)


def test_downloading_is_opt_in(tmp_path, cache, no_download, monkeypatch):
    with pytest.raises(DatasetNotAvailableError) as info:
        load_dataset("cora")
    assert no_download == []  # never attempted silently
    assert ENV_DATA in str(info.value) and "--download" in str(info.value)
    with pytest.raises(DatasetNotAvailableError, match="PyG download failed"):
        load_dataset("cora", download=True)
    assert no_download == ["Planetoid"]
    seen = {}
    monkeypatch.setattr(runner, "load_dataset", lambda *a, **kw: seen.update(kw))
    runner.load_graph(ExperimentConfig(dataset="Cora", download=True))
    assert seen == {"download": True}


def test_rating_files_are_checked_and_parse_errors_name_the_file(tmp_path):
    corrupt_filmtrust(tmp_path)
    with pytest.raises(DatasetIntegrityError, match=r"FilmTrust/ratings\.txt: SHA-256"):
        load_ratings("FilmTrust", tmp_path)
    with pytest.raises(DatasetCorruptError, match=r"FilmTrust/ratings\.txt cannot be parsed"):
        load_ratings("FilmTrust", tmp_path, verify=False)
    (tmp_path / "SocialRec" / "FilmTrust" / "ratings.txt").write_text("1 2\n")
    with pytest.raises(DatasetCorruptError, match="at least 3 numbers"):
        load_ratings("FilmTrust", tmp_path, verify=False)
    with pytest.raises(DatasetNotAvailableError, match="lacks SocialRec/Ciao/rating.mat"):
        load_ratings("Ciao", tmp_path)


@pytest.mark.datasets
@pytest.mark.skipif(REAL_ROOT is None, reason=f"{ENV_DATA} not set")
def test_published_files_pass_and_a_disagreeing_sums_file_fails(tmp_path, cache):
    root = tmp_path / "root"
    raw = DATASETS["cora"].raw_dir(root)
    shutil.copytree(DATASETS["cora"].raw_dir(REAL_ROOT), raw)
    assert load_dataset("cora", root=root).num_nodes == 2708
    shutil.rmtree(cache)
    (root / "SHA256SUMS").write_text(f"{'2' * 64}  ./Planetoid/Cora/raw/ind.cora.y\n")
    with pytest.raises(DatasetIntegrityError, match=r"ind\.cora\.y: .*SHA256SUMS"):
        load_dataset("cora", root=root)


@pytest.mark.parametrize("kind", ["missing parent", "a file"])
def test_an_unusable_cache_is_named(tmp_path, monkeypatch, kind):
    path = tmp_path / "cache-file"
    if kind == "a file":
        path.write_text("not a folder")
    else:
        path = tmp_path / "file" / "cache"
        (tmp_path / "file").write_text("")
    monkeypatch.setenv(ENV_CACHE, str(path))
    root = write_fake_photo(tmp_path / "root")
    with pytest.raises(DatasetError, match=f"cache {path} cannot be used.*{ENV_CACHE}"):
        load_dataset("photo", root=root, verify=False)


def test_a_published_rating_split_file_is_checked(tmp_path):
    relpath = "MovieLens100K/raw/u1.test"
    assert relpath in integrity.known_hashes()
    (tmp_path / relpath).parent.mkdir(parents=True)
    (tmp_path / relpath).write_text("1\t1\t5\t874965758\n")  # not the published fold
    with pytest.raises(DatasetIntegrityError, match=r"u1\.test: SHA-256"):
        integrity.read_verified(tmp_path, relpath, True)
