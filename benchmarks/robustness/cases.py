"""The table of bad inputs and a harness that runs one through ``securefgl`` and reports it.

Each :class:`Case` says how to trigger a user error (command-line arguments, TOML text, a
prepared data root) and what the one line on stderr must contain. :func:`run_case` runs it
in a fresh folder tree, in this process (``securefgl.cli.main``) or as a subprocess
(``python -m securefgl.cli``), and returns one row: exit code, message, whether a traceback
was printed and whether anything was written outside the output folder. The tests in
``tests/securefgl/robustness/`` and ``python -m benchmarks.robustness`` both run this table.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from securefgl.data.catalog import DATASETS, ENV_CACHE, ENV_DATA

TINY = '{"num_nodes": 60, "num_classes": 3, "num_features": 4}'
FAST = ("--csbm", TINY, "--rounds", "1", "--clients", "3", "--no-progress")
CONFIG_ERROR, RUNTIME_ERROR = 2, 1


@dataclass(frozen=True)
class Case:
    """One bad input. ``argv`` may use ``{out}`` (the output root), ``{toml}`` (a file
    holding ``toml``), ``{inputs}`` (a scratch folder outside the working directory) and
    ``{root}`` (the data root ``root`` prepared; then also ``$SECUREFGL_DATA``)."""

    name: str
    category: str
    argv: tuple[str, ...]
    expect: str  # fragment of the one line on stderr
    exit_code: int
    toml: str | None = None
    root: Callable[[Path], None] | None = field(default=None, compare=False)


# --------------------------------------------------------------------------- data roots


def _raw(root: Path, key: str) -> Path:
    raw = DATASETS[key].raw_dir(root)
    raw.mkdir(parents=True)
    return raw


def cora_without_graph(root: Path) -> None:
    """Every Cora raw file but ``ind.cora.graph`` (contents never read)."""
    raw = _raw(root, "cora")
    for name in DATASETS["cora"].raw_files:
        if name != "ind.cora.graph":
            (raw / name).write_bytes(b"placeholder")


def corrupt_cora(root: Path) -> None:
    """Every Cora raw file present, none the published one."""
    raw = _raw(root, "cora")
    for name in DATASETS["cora"].raw_files:
        (raw / name).write_bytes(b"\x80\x02corrupt pickle")


def malformed_sums(root: Path) -> None:
    """Corrupt Cora files and a ``SHA256SUMS`` whose first line is not a checksum line."""
    corrupt_cora(root)
    (root / "SHA256SUMS").write_text("not a checksum line\n")


def corrupt_filmtrust(root: Path) -> None:
    """FilmTrust's two files, not the published ones (and not numbers)."""
    folder = root / "SocialRec" / "FilmTrust"
    folder.mkdir(parents=True)
    (folder / "ratings.txt").write_text("1 2 x\n")
    (folder / "trust.txt").write_text("1 2 1\n")


def occupied(inputs: Path) -> None:
    """A file where a case asks for an output folder."""
    (inputs / "occupied").write_text("a file, not a folder\n")


# --------------------------------------------------------------------------- the table


def _toml(name: str, text: str, expect: str, command: str = "run") -> Case:
    argv = (command, "--config", "{toml}", "--output-dir", "{out}", "--no-progress")
    return Case(name, "config type (TOML)", argv, expect, CONFIG_ERROR, toml=text)


def _run(name: str, category: str, args: Sequence[str], expect: str, code: int, **kw) -> Case:
    return Case(name, category, ("run", *FAST, "--output-dir", "{out}", *args), expect, code, **kw)


CASES: list[Case] = [
    # usage: argparse, before any configuration is built
    Case("int flag", "usage", ("run", "--clients", "ten"),
         "argument --clients: invalid int value: 'ten'", CONFIG_ERROR),
    Case("list flag", "usage", ("run", "--seeds", "0,x"),
         "'0,x' is not a comma-separated list of integers", CONFIG_ERROR),
    Case("JSON flag", "usage", ("run", "--csbm", "{num_nodes: 5}"),
         "argument --csbm: '{num_nodes: 5}' is not valid JSON", CONFIG_ERROR),
    Case("misspelt flag", "usage", ("run", "--clinets", "3"),
         "unrecognized arguments: --clinets 3 (did you mean '--clients'?)", CONFIG_ERROR),
    Case("unknown command", "usage", ("train",), "invalid choice: 'train'", CONFIG_ERROR),
    Case("plug-in flag (audit)", "usage", ("audit", "--rounds", "many"),
         "securefgl audit: argument --rounds: invalid int value: 'many'", CONFIG_ERROR),
    # configuration field types, from TOML
    _toml("string for int", 'clients = "ten"\n',
          "clients must be an integer, got 'ten' (a string)"),
    _toml("int for list", "seeds = 3\n", "seeds must be a list of integers, got 3 (an integer)"),
    _toml("string for list", 'protocol = "secagg"\n',
          'a list of protocol names (e.g. ["secagg"]), got \'secagg\''),
    _toml("section not a table", 'fedstruct = "masked"\n',
          "fedstruct must be a table ([experiment.fedstruct])"),
    _toml("list element type", 'algorithms = ["fedavg", 3]\n',
          "algorithms[1] must be a string, got 3"),
    _toml("string for float", '[experiment.protocol]\ndp_clip = "1.0"\n',
          "protocol.dp_clip must be a number, got '1.0'"),
    _toml("int for bool", "store_payloads = 1\n", "store_payloads must be a boolean, got 1"),
    _toml("section field type", '[experiment.fedstruct]\nnsf_dim = "wide"\n',
          "fedstruct.nsf_dim must be an integer, got 'wide'"),
    _toml("experiment not a table", "experiment = 3\n", "experiment must be a table, got 3"),
    _toml("keys outside [experiment]", "clients = 3\n[experiment]\nrounds = 1\n",
          "keys ['clients'] are outside [experiment]"),
    _toml("TOML syntax", "clients = \n", "is not valid TOML"),
    _toml("misplaced key", 'nsf = "degree"\n', "'nsf' belongs under [experiment.fedstruct]"),
    _toml("misspelt key", "clinets = 3\n", "unknown config keys ['clinets'] (did you mean "
          "'clients'?)"),
    _toml("misspelt section key", "nsf_dimm = 3\n",
          "(did you mean 'nsf_dim' under [experiment.fedstruct]?)"),
    _toml("key in the wrong section", "[experiment.fedstruct]\ndp_noise = 1.0\n",
          "unknown [fedstruct] keys ['dp_noise']; 'dp_noise' belongs under "
          "[experiment.protocol]"),
    _toml("plug-in config (audit)", 'seeds = "0"\n',
          "seeds must be a list of integers, got '0'", command="audit"),
    Case("missing config file", "config type (TOML)",
         ("run", "--config", "{inputs}/missing.toml"), "missing.toml does not exist",
         CONFIG_ERROR),
    # configuration values
    _run("CSBM negative size", "config value", ("--csbm", '{"num_nodes": -5}'),
         "csbm: num_nodes must be an integer >= 2, got -5", CONFIG_ERROR),
    _run("CSBM unknown option", "config value", ("--csbm", '{"nodes": 100}'),
         "csbm: unknown csbm option(s) ['nodes']", CONFIG_ERROR),
    _run("CSBM option type", "config value", ("--csbm", '{"homophily": "high"}'),
         "csbm: homophily must be a number, got 'high'", CONFIG_ERROR),
    _run("central DP over ckks", "config value",
         ("--protocol", "ckks,clip_noise", "--dp-mode", "central"),
         "dp_mode = 'central' cannot be used with protocol 'ckks'", CONFIG_ERROR),
    _run("central DP, malicious server", "config value",
         ("--protocol", "clip_noise", "--threat-model", "malicious"),
         "a malicious server can leave it out", CONFIG_ERROR),
    _run("distributed DP over plain", "config value",
         ("--protocol", "clip_noise", "--dp-mode", "distributed"),
         "1/√n share of the noise", CONFIG_ERROR),
    _run("secagg threshold count", "config value",
         ("--protocol", "secagg", "--secagg-threshold", "2.5"),
         "whole count", CONFIG_ERROR),
    _run("secagg threshold fraction", "config value",
         ("--protocol", "secagg", "--secagg-threshold", "0.3"),
         "secagg_threshold", CONFIG_ERROR),
    _run("secagg+ odd k", "config value", ("--protocol", "secagg+", "--secagg-k", "3"),
         "secagg_k", CONFIG_ERROR),
    _run("more clients than nodes", "config value", ("--clients", "80"),
         "clients=80 exceeds the 60 nodes", CONFIG_ERROR),
    _run("DP clip zero", "config value", ("--protocol", "clip_noise", "--dp-clip", "0"),
         "protocol: dp_clip must be a finite number > 0, got 0.0", CONFIG_ERROR),
    _run("secagg with one client", "config value",
         ("--algorithms", "fedavg", "--clients", "1", "--protocol", "secagg"),
         "protocol: secagg needs at least 2 clients per round", CONFIG_ERROR),
    _run("masked sums with one client", "config value",
         ("--algorithms", "fedstruct", "--clients", "1", "--sum-mode", "masked"),
         "fedstruct: sum_mode = 'masked' needs at least 2 clients", CONFIG_ERROR),
    Case("negative Dirichlet α", "config value",
         ("run", "--task", "graph", "--dataset", "synthetic-graphs", "--dirichlet", "-1",
          "--rounds", "1", "--no-progress", "--output-dir", "{out}"),
         "graph: dirichlet must be > 0, got -1.0", CONFIG_ERROR),
    _run("more clients than communities", "config value",
         ("--algorithms", "local", "--partition", "louvain-largest", "--clients", "50"),
         "partition louvain-largest of csbm: Louvain found", CONFIG_ERROR),
    _run("misspelt algorithm", "config value", ("--algorithms", "fedavgg"),
         "unknown algorithm 'fedavgg' for task 'node' (did you mean 'fedavg'?)", CONFIG_ERROR),
    _run("graph-task algorithm", "config value", ("--algorithms", "gpfl"),
         "unknown algorithm 'gpfl' for task 'node' (it is a graph-task algorithm: --task graph)",
         CONFIG_ERROR),
    _run("fedsage+ with known cross edges", "config value",
         ("--algorithms", "fedsage+", "--cross-edges", "known"),
         "fedsage+ generates what its clients miss across clients", CONFIG_ERROR),
    Case("rating dataset name", "config value", ("recommend", "--dataset", "Netflix"),
         "unknown rating dataset 'Netflix'", CONFIG_ERROR),
    Case("recommend rounds", "config value", ("recommend", "--rounds", "0"),
         "rounds must be ≥ 1, got 0", CONFIG_ERROR),
    # output
    _run("name with /", "output", ("--name", "a/b"),
         "name 'a/b' must be a plain folder name", CONFIG_ERROR),
    _run("name ..", "output", ("--name", ".."), "name '..' must be a plain folder name",
         CONFIG_ERROR),
    _run("absolute name", "output", ("--name", "/tmp/elsewhere"),
         "name '/tmp/elsewhere' must be a plain folder name", CONFIG_ERROR),
    Case("output folder is a file", "output",
         ("run", *FAST, "--output-dir", "{inputs}/occupied/results"),
         "occupied exists and is not a folder", CONFIG_ERROR),
    # data: roots, files, integrity
    Case("no data root", "data", ("run", "--dataset", "Cora", "--output-dir", "{out}"),
         f"--data-root is not given and {ENV_DATA} is not set", RUNTIME_ERROR),
    Case("data root missing", "data",
         ("run", "--dataset", "Cora", "--data-root", "{inputs}/nowhere", "--output-dir", "{out}"),
         "nowhere does not exist or is not a folder", RUNTIME_ERROR),
    Case("missing raw file", "data", ("run", "--dataset", "Cora", "--output-dir", "{out}"),
         "lacks ind.cora.graph", RUNTIME_ERROR, root=cora_without_graph),
    Case("corrupt raw file", "data", ("run", "--dataset", "Cora", "--output-dir", "{out}"),
         "ind.cora.x: SHA-256", RUNTIME_ERROR, root=corrupt_cora),
    Case("malformed SHA256SUMS", "data", ("run", "--dataset", "Cora", "--output-dir", "{out}"),
         "SHA256SUMS line 1 is not '<sha256> <path>'", RUNTIME_ERROR, root=malformed_sums),
    Case("datasets: root missing", "data", ("datasets", "--data-root", "{inputs}/nowhere"),
         "nowhere does not exist or is not a folder", RUNTIME_ERROR),
    Case("recommend: no data root", "data", ("recommend",),
         "rating dataset 'FilmTrust' is not available: no data root", RUNTIME_ERROR),
    Case("recommend: corrupt file", "data", ("recommend",),
         "ratings.txt: SHA-256", RUNTIME_ERROR, root=corrupt_filmtrust),
    # errors during a run
    _run("fixed-point overflow", "run",
         ("--algorithms", "fedavg", "--protocol", "secagg", "--client-lr", "1e20"),
         "fixed-point overflow during the run: input max |x|", RUNTIME_ERROR),
    _run("secagg+ threshold above holders", "run",
         ("--algorithms", "fedavg", "--clients", "6", "--protocol", "secagg+",
          "--secagg-k", "2", "--secagg-threshold", "4",
          "--csbm", '{"num_nodes": 300, "num_classes": 3, "num_features": 4}'),
         "protocol error during the run: secagg threshold 4 exceeds", RUNTIME_ERROR),
]  # fmt: skip

#: A few cases that also run as ``python -m securefgl.cli`` (one per kind of failure).
SUBPROCESS_CASES = ("string for list", "corrupt raw file", "fixed-point overflow")


def by_name(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


# --------------------------------------------------------------------------- the harness


@dataclass
class Prepared:
    argv: list[str]
    env: dict[str, str | None]  # None: unset
    work: Path  # the working directory
    out: Path  # the output root (inside work)


def prepare(case: Case, tmp: Path) -> Prepared:
    """Folders under ``tmp``: ``work`` (cwd) with ``work/out``, ``inputs``, ``cache``,
    ``root``; the TOML file and data root of ``case``; argv with placeholders filled."""
    work, inputs, root = tmp / "work", tmp / "inputs", tmp / "root"
    out = work / "out"
    for folder in (out, inputs):
        folder.mkdir(parents=True)
    occupied(inputs)
    toml = inputs / "experiment.toml"
    if case.toml is not None:
        toml.write_text(case.toml)
    env: dict[str, str | None] = {ENV_CACHE: str(tmp / "cache"), ENV_DATA: None}
    if case.root is not None:
        root.mkdir()
        case.root(root)
        env[ENV_DATA] = str(root)
    fill = {"{out}": out, "{toml}": toml, "{inputs}": inputs, "{root}": root}
    argv = list(case.argv)
    for key, value in fill.items():
        argv = [a.replace(key, str(value)) for a in argv]
    return Prepared(argv, env, work, out)


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """``relative path -> (size, mtime_ns)`` of everything under ``folder``."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.stat()
            found[str(path.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return found


@contextlib.contextmanager
def _environment(env: dict[str, str | None], cwd: Path) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    old_cwd = os.getcwd()
    try:
        for key, value in env.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        os.chdir(cwd)
        yield
    finally:
        os.chdir(old_cwd)
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


def _split(found: dict, out: str) -> tuple[dict, dict]:
    """(entries outside the output root, entries inside it); ``out`` itself is neither."""
    inside = {k: v for k, v in found.items() if k.startswith(out + os.sep)}
    return {k: v for k, v in found.items() if k != out and k not in inside}, inside


def _row(case: Case, code: int, stderr: str, before: dict, after: dict) -> dict:
    (outside_0, inside_0), (outside_1, inside_1) = _split(before, "out"), _split(after, "out")
    lines = [line for line in stderr.splitlines() if line.strip()]
    return {
        "case": case.name,
        "category": case.category,
        "exit_code": code,
        "message": lines[-1] if lines else "",
        "traceback": "Traceback" in stderr,
        "data_written_outside": outside_0 != outside_1,
        "written_inside": inside_0 != inside_1,
        "stderr_lines": len(lines),
    }


def run_case(case: Case, tmp: Path, extra: Sequence[str] = ()) -> dict:
    """Run ``case`` in this process through ``securefgl.cli.main``; its row."""
    from securefgl.cli import main

    prep = prepare(case, tmp)
    before = listing(prep.work)
    err = io.StringIO()
    with (
        _environment(prep.env, prep.work),
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        code = main([*extra, *prep.argv])
    return _row(case, code, err.getvalue(), before, listing(prep.work))


def start_subprocess(case: Case, tmp: Path) -> tuple[subprocess.Popen, Prepared, dict]:
    """Start ``python -m securefgl.cli`` on ``case``; finish with :func:`finish_subprocess`."""
    prep = prepare(case, tmp)
    env = dict(os.environ)
    for key, value in prep.env.items():
        env.pop(key, None) if value is None else env.__setitem__(key, value)
    cmd = [sys.executable, "-m", "securefgl.cli", *prep.argv]
    proc = subprocess.Popen(
        cmd, cwd=prep.work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    return proc, prep, listing(prep.work)


def finish_subprocess(case: Case, started: tuple, timeout: float = 300) -> dict:
    proc, prep, before = started
    _, stderr = proc.communicate(timeout=timeout)
    return _row(case, proc.returncode, stderr, before, listing(prep.work))


def run_subprocesses(cases: Sequence[Case], tmp: Path, jobs: int = 2) -> list[dict]:
    """Rows of ``cases`` run as subprocesses, ``jobs`` at a time, in table order."""
    rows: list[dict] = []
    for start in range(0, len(cases), jobs):
        batch = cases[start : start + jobs]
        started = [start_subprocess(c, tmp / f"case{start + i}") for i, c in enumerate(batch)]
        rows += [finish_subprocess(c, s) for c, s in zip(batch, started, strict=True)]
    return rows
