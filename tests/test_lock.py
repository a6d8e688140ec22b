"""The lock (constraints.txt) agrees with pyproject.toml.

`make install` installs from constraints.txt (pip install -c), so a dependency that
pyproject.toml names but the lock does not pin, or pins at a version outside pyproject's
range, would be installed unpinned or not at all. `make lock` regenerates the lock.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")


def read_lock(text: str) -> dict[str, Version]:
    """Package (canonical name) -> pinned version; every line an exact ``name==version``."""
    pins: dict[str, Version] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = PIN.match(line)
        if m is None:
            raise ValueError(f"constraints.txt:{number}: not an exact pin (name==version): {line}")
        name = canonicalize_name(m.group(1))
        if name in pins:
            raise ValueError(f"constraints.txt:{number}: {name} pinned twice")
        pins[name] = Version(m.group(2))
    return pins


def declared(pyproject: dict) -> list[tuple[str, Requirement]]:
    """(where, requirement) for every requirement pyproject.toml names: the build system's,
    the dependencies and every extra's."""
    out = [("build-system", Requirement(r)) for r in pyproject["build-system"]["requires"]]
    out += [("dependencies", Requirement(r)) for r in pyproject["project"]["dependencies"]]
    for extra, reqs in pyproject["project"].get("optional-dependencies", {}).items():
        out += [(f"[{extra}]", Requirement(r)) for r in reqs]
    return out


def mismatches(pyproject: dict, pins: dict[str, Version]) -> list[str]:
    """What the lock misses or pins outside pyproject's specifiers (empty: they agree)."""
    problems = []
    for where, req in declared(pyproject):
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # not for this platform / Python
        name = canonicalize_name(req.name)
        if name == canonicalize_name(pyproject["project"]["name"]):
            continue  # an extra naming the package itself
        if name not in pins:
            problems.append(f"{req} ({where}) is not pinned in constraints.txt")
        elif not req.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{req} ({where}): constraints.txt pins {name}=={pins[name]}")
    return problems


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pins() -> dict[str, Version]:
    return read_lock((ROOT / "constraints.txt").read_text(encoding="utf-8"))


def test_every_requirement_is_pinned_within_its_range(pyproject, pins):
    assert mismatches(pyproject, pins) == []


def test_torch_is_the_cpu_build_of_2_13_0(pins):
    assert pins["torch"] == Version("2.13.0+cpu")  # never a CUDA build (see the Makefile)


def test_make_installs_every_extra(pyproject):
    """`make install` (and `make lock`) install every extra pyproject.toml defines, so the
    lock covers them all and `make test` can test every optional feature."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    m = re.search(r"^EXTRAS\s*:=\s*(\S+)\s*$", makefile, re.M)
    assert m is not None, "Makefile: no EXTRAS := line"
    assert set(m.group(1).split(",")) == set(pyproject["project"]["optional-dependencies"])
    assert "-c $(LOCK)" in makefile and re.search(r"^LOCK\s*:=\s*constraints\.txt$", makefile, re.M)


def test_the_check_finds_what_is_wrong():
    pyproject = {
        "build-system": {"requires": ["setuptools>=77"]},
        "project": {
            "name": "securefgl",
            "dependencies": ["numpy>=1.26", "tqdm>=4.66", 'tomli>=2; python_version < "3.11"'],
            "optional-dependencies": {"ray": ["ray>=2.40"], "all": ["securefgl[ray]"]},
        },
    }
    pins = read_lock("# a comment\nsetuptools==84.2.1\nNumPy==1.25.0\nray==2.60.0\n")
    assert mismatches(pyproject, pins) == [
        "numpy>=1.26 (dependencies): constraints.txt pins numpy==1.25.0",
        "tqdm>=4.66 (dependencies) is not pinned in constraints.txt",
    ]
    with pytest.raises(ValueError, match="not an exact pin"):
        read_lock("numpy>=1.26\n")
    with pytest.raises(ValueError, match="pinned twice"):
        read_lock("numpy==2.0\nNumPy==2.1\n")
