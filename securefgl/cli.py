"""Command line: ``securefgl run``, ``securefgl datasets``, ``securefgl recommend``, and the
commands of installed plug-ins (``securefgl audit`` comes from the ``attacks`` package).

Every :class:`~securefgl.config.ExperimentConfig` field is a flag, in one argparse group per
topic (data, federation, protocol stack, training, execution, output) and one per installed
family's settings section, with the help text and choices of its field metadata
(:mod:`securefgl.config.families`); ``--help`` lists a family section's flags by name,
``--help-all`` explains each. Plug-ins are modules named in the ``securefgl.plugins``
entry-point group; each may define ``register_commands(subparsers) -> {name: handler}`` and
``recommend_reports``, callables ``(trainer, views, aggregation) -> dict`` whose results
``securefgl recommend`` prints. A new command is a ``sub.add_parser`` call, its handler
``(args) -> exit status`` in :func:`build_parser`'s table, and :func:`add_config_flags` if
it reads an experiment. Building the parser imports no torch, so ``--help`` answers at once.

Errors (every command, plug-ins included): one line ``securefgl: ...`` on stderr, no
traceback unless ``-v``; exit status 2 for usage and configuration errors, 1 for data,
protocol and other run-time errors, 130 when interrupted (docs/robustness.md). Progress:
a bar when stderr is a terminal, else a line a minute on stderr; ``--quiet`` hides both.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import logging
import os
import sys
import textwrap
import traceback
import typing
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from securefgl.config import ConfigError
from securefgl.config.flags import add_config_flags, config_from_args
from securefgl.data.integrity import DatasetError
from securefgl.deploy.cli import register_commands as deployment_commands

__all__ = ["add_config_flags", "build_parser", "config_from_args", "main", "report_error"]

Handler = Callable[[argparse.Namespace], int]

#: Exit statuses: usage / configuration errors, run-time errors (data, protocol, I/O).
EXIT_USAGE, EXIT_RUNTIME, EXIT_INTERRUPTED = 2, 1, 130
#: The logger of progress lines (shown at the default level, hidden by ``--quiet``).
PROGRESS_LOGGER = "securefgl.progress"

RUN_EXAMPLES = """\
examples:
  securefgl run                    # fedavg, local and central on a generated graph
  securefgl run --dataset Cora --clients 10 --algorithms fedavg,fedstruct \\
      --protocol secagg --seeds 0,1,2
  securefgl run --protocol secagg,clip_noise --dp-noise 1.1 --dp-clip 1
  securefgl run --task graph --dataset PROTEINS --algorithms fedavg,gpfl
  securefgl run --config experiment.toml --rounds 50   # flags override the file

Results: <output-dir>/<name>/result.json (every number, the resolved configuration and
where it ran) and result.md. Family sections list their flags by name; --help-all
explains every flag (docs/configuration.md: the same keys in TOML)."""

DESCRIPTION = (
    "Privacy-hardened federated graph learning: compare algorithms under secure aggregation, "
    "homomorphic encryption and differential privacy, and audit what leaks."
)
MAIN_EXAMPLES = """\
examples:
  securefgl datasets               # which datasets are present offline
  securefgl run --help             # flags, algorithms and protocols
  securefgl run --dataset Cora --algorithms fedavg,central --protocol secagg
  securefgl recommend --dataset FilmTrust --time-budget 600
  securefgl audit --list-attacks"""


class Formatter(argparse.HelpFormatter):
    """Help text whose line breaks are kept: each line is wrapped on its own, lines that
    start with a space (examples) are left as they are."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=26)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False,
                             break_long_words=False)  # fmt: skip

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines: list[str] = []
        paragraph: list[str] = []
        for line in [*text.splitlines(), ""]:
            if line.strip() and not line.startswith(" "):
                paragraph.append(line)
                continue
            if paragraph:
                lines += textwrap.wrap(" ".join(paragraph), width, initial_indent=indent,
                                       subsequent_indent=indent, break_on_hyphens=False,
                                       break_long_words=False)  # fmt: skip
                paragraph = []
            lines.append(indent + line)
        return "\n".join(lines[:-1])


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``securefgl: usage error: ...``, exit status 2) that
    suggest the closest flag for a misspelt one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> typing.NoReturn:  # type: ignore[override]
        hint = f"(see '{self.prog} --help')"
        self.exit(EXIT_USAGE, f"securefgl: usage error: {self.prog}: {message} {hint}\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self.command(getattr(parsed, "command", None)) or self
            hint = flag_hint(extras, command)
            command.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed

    def command(self, name: str | None) -> argparse.ArgumentParser | None:
        """The parser of command ``name`` (None: no such command)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                return action.choices[name]
        return None


def flag_hint(words: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """`` (did you mean '--clients'?)`` for the first misspelt flag among ``words``."""
    known = [o for o in parser._option_string_actions if o.startswith("--")]
    for word in words:
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
            if close:
                return f" (did you mean {close[0]!r}?)"
    return ""


def load_plugins() -> list[ModuleType]:
    """The modules of the ``securefgl.plugins`` entry-point group (e.g. ``attacks.cli``); a
    plug-in that fails to import is skipped with a warning."""
    plugins = []
    for ep in entry_points(group="securefgl.plugins"):
        try:
            plugins.append(importlib.import_module(ep.value))
        except ImportError as err:
            logging.getLogger(__name__).warning("plug-in %s not loaded: %s", ep.value, err)
    return plugins


def version() -> str:
    """The installed package's version (the source tree's when it is not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("securefgl")
    except PackageNotFoundError:  # pragma: no cover - a source tree on PYTHONPATH only
        from securefgl import __version__

        return __version__


def add_run_options(parser: argparse.ArgumentParser, what: str = "experiment") -> Any:
    """``--config`` and ``--no-progress``, in a ``general`` group (returned) that a command
    may extend; ``-v``, ``-q``, ``--log-file`` are added to every command."""
    group = parser.add_argument_group("general")
    group.add_argument("--config", metavar="FILE",
                       help=f"TOML file of the {what} ([experiment] table or top-level keys; "
                       "flags override it)")  # fmt: skip
    group.add_argument(
        "--no-progress", action="store_true",
        help="no progress bar (a line a minute instead; --quiet: neither)",
    )  # fmt: skip
    return group


def _logging_flags(parser: argparse.ArgumentParser, top: bool) -> None:
    """``-v``, ``-q`` and ``--log-file`` (on a command: they keep the values given before
    it unless given again)."""
    keep = {} if top else {"default": argparse.SUPPRESS}
    groups = [g for g in parser._action_groups if g.title == "general"]
    add = (groups[0] if groups else parser).add_argument
    add("-v", "--verbose", action="count", **({"default": 0} | keep),
        help="more logging (-vv: debug); tracebacks on errors")  # fmt: skip
    add("-q", "--quiet", action="store_true", **({"default": False} | keep),
        help="errors only: no progress bar, no progress lines, no warnings")  # fmt: skip
    add("--log-file", metavar="FILE", **({"default": None} | keep),
        help="also write the log (progress lines, -v detail) to FILE")  # fmt: skip


def build_parser(plugins: Sequence[ModuleType] = ()) -> tuple[argparse.ArgumentParser, dict]:
    """The parser and the handler of each command (plug-ins add theirs)."""
    parser = Parser(prog="securefgl", description=DESCRIPTION, epilog=MAIN_EXAMPLES)
    parser.add_argument("--version", action="version", version=f"securefgl {version()}")
    _logging_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run", help="train and compare algorithms; saves JSON + Markdown",
        usage="%(prog)s [--config FILE] [options]", epilog=RUN_EXAMPLES,
        description="Train every algorithm × seed on one dataset, partition and protocol "
        "stack, and compare them: accuracy, macro-F1, ε, bytes and seconds.",
    )  # fmt: skip
    add_run_options(run)
    add_config_flags(run)
    ds = sub.add_parser("datasets", help="which datasets are available offline, by task",
                        description="Every dataset each task reads, and whether it is "
                        "present under the data root.")  # fmt: skip
    ds.add_argument(
        "--data-root", "--root", dest="root", metavar="DIR",
        help="data root (default: $SECUREFGL_DATA)",
    )  # fmt: skip
    rec = sub.add_parser(
        "recommend", help="federated recommendation (FeSoG / FedGNN) on a rating dataset",
        usage="%(prog)s [--config FILE] [options]",
        description="Train FeSoG / FedGNN (and the central reference) on a rating dataset; "
        "saves <output-dir>/<name>/result.json and result.md, like `securefgl run`.",
        epilog="examples:\n  securefgl recommend --dataset FilmTrust --protocol secagg "
        "--time-budget 600\n  securefgl recommend --algorithms fedgnn,central --ldp laplace",
    )  # fmt: skip
    general = add_run_options(rec)
    general.add_argument(
        "--checkpoint", metavar="DIR",
        help="directory where the run saves itself every 10 evaluations and from which it "
        "resumes (each party writes its own file)",
    )  # fmt: skip
    general.add_argument("--json", action="store_true", help="print the results as JSON")
    add_config_flags(rec, tasks=("recommendation",))
    handlers: dict[str, Handler] = {
        "run": _cmd_run,
        "datasets": _cmd_datasets,
        "recommend": lambda args: _cmd_recommend(args, _recommend_reports(plugins)),
        **deployment_commands(sub),  # securefgl party, securefgl deploy
    }
    for plugin in plugins:
        register = getattr(plugin, "register_commands", None)
        if register is not None:
            handlers.update(register(sub))
    for command in sub.choices.values():  # -v, -q, --log-file after the command too
        with contextlib.suppress(argparse.ArgumentError):  # the command has its own
            _logging_flags(command, top=False)
    return parser, handlers


def _recommend_reports(plugins: Sequence[ModuleType]) -> list[Callable[..., dict]]:
    return [r for p in plugins for r in getattr(p, "recommend_reports", ())]


def show_progress(args: argparse.Namespace) -> bool:
    """Whether a command may draw a progress bar (lines are the logging's business)."""
    return not (getattr(args, "no_progress", False) or args.quiet)


def _cmd_run(args: argparse.Namespace) -> int:
    from securefgl.experiment import run_experiment
    from securefgl.experiment.report import text_table
    from securefgl.experiment.results import check_output_dir, save_result

    config = config_from_args(args)
    check_output_dir(config.output_dir)  # before hours of training, not after
    result = run_experiment(config, progress=show_progress(args))
    folder = save_result(result)
    print(text_table(result))
    print(f"results: {folder}/result.json, {folder}/result.md")
    return 0


def _cmd_recommend(args: argparse.Namespace, reports: Sequence[Callable[..., dict]]) -> int:
    """Train every algorithm × seed, then run every ``report(trainer, views, aggregation)``
    on each trained federated model; their ``summary`` lines are printed."""
    from securefgl.config.families import task_runner
    from securefgl.experiment.report import recommendation_lines
    from securefgl.experiment.results import check_output_dir, dumps_strict, save_rows

    config = config_from_args(args, task="recommendation")
    run = task_runner("recommendation")
    if run is None:
        raise ConfigError("no installed family runs the recommendation task")
    check_output_dir(config.output_dir)
    rows = run(config, reports, args.checkpoint, progress=show_progress(args))
    folder = save_rows(config, rows)
    if args.json:
        print(dumps_strict(rows[0] if len(rows) == 1 else rows, indent=1))
        print(f"results: {folder}/result.json, {folder}/result.md", file=sys.stderr)
        return 0
    print(recommendation_lines(rows))
    print(f"results: {folder}/result.json, {folder}/result.md")
    return 0


_TASK_TITLES = {
    "node": "node classification (securefgl run)",
    "graph": "graph classification (securefgl run --task graph)",
    "recommendation": "recommendation (securefgl recommend)",
}


def _cmd_datasets(args: argparse.Namespace) -> int:
    from securefgl.data import DatasetNotAvailableError, available_datasets, data_root

    root = data_root(args.root)
    if root is not None and not root.is_dir():
        raise DatasetNotAvailableError(f"the data root {root} does not exist or is not a folder")
    rows = available_datasets(args.root)
    width = max(len(r["name"]) for r in rows)
    print(f"data root: {root or 'none (--data-root or $SECUREFGL_DATA)'}")
    for task, title in _TASK_TITLES.items():
        print(f"\n{title}:")
        for r in (r for r in rows if r["task"] == task):
            state = "generated" if r["class"] == "generated" else (
                "present" if r["present"] else "cached" if r["cached"] else "missing"
            )  # fmt: skip
            print(f"  {r['name']:<{width}}  {state:<9} {r.get('path') or ''}".rstrip())
    return 0


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def report_error(err: BaseException) -> tuple[int, str]:
    """``(exit status, message)`` of an error raised by a command."""
    from protocols.base import ProtocolError  # here: the parser is built without them
    from protocols.fixedpoint import FixedPointOverflowError
    from securefgl.federation.party import PartyError

    if isinstance(err, ConfigError):
        return EXIT_USAGE, f"configuration error: {_one_line(err)}"
    if isinstance(err, DatasetError):
        return EXIT_RUNTIME, f"data error: {_one_line(err)}"
    if isinstance(err, FixedPointOverflowError):
        return EXIT_RUNTIME, (
            f"fixed-point overflow during the run: {_one_line(err)} (a secagg client masks "
            "w·x and w, w its weight, e.g. its training nodes: --secagg-value-bound bounds "
            "|x|, --secagg-weight-bound bounds w)"
        )
    if isinstance(err, ProtocolError):
        return EXIT_RUNTIME, f"protocol error during the run: {_one_line(err)}"
    if isinstance(err, PartyError):  # a party refused or could not answer (deployments)
        return EXIT_RUNTIME, f"party error: {_one_line(err)}"
    if isinstance(err, KeyboardInterrupt):
        return EXIT_INTERRUPTED, "interrupted"
    if isinstance(err, OSError):
        where = f" ({err.filename})" if err.filename and str(err.filename) not in str(err) else ""
        return EXIT_RUNTIME, f"error: {_one_line(err)}{where}"
    return EXIT_RUNTIME, (
        f"error: {type(err).__name__}: {_one_line(err)} (unexpected: rerun with -v for the "
        "traceback and report it if the input was valid)"
    )


class _Shown(logging.Filter):
    """What stderr shows: records at ``level`` and above, and progress lines unless quiet."""

    def __init__(self, level: int, progress: bool) -> None:
        super().__init__()
        self.level, self.progress = level, progress

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.level:
            return True
        return self.progress and record.name == PROGRESS_LOGGER and record.levelno >= logging.INFO


def setup_logging(args: argparse.Namespace) -> list[logging.Handler]:
    """Log to stderr (warnings, or more with ``-v``; errors only with ``-q``; progress lines
    unless ``-q``) and, with ``--log-file``, everything at INFO (DEBUG with ``-vv``) to
    the file; returns the handlers added."""
    level = logging.ERROR if args.quiet else logging.WARNING - 10 * min(args.verbose, 2)
    stderr = logging.StreamHandler()
    stderr.addFilter(_Shown(level, not args.quiet))
    stderr.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handlers: list[logging.Handler] = [stderr]
    floor = min(level, logging.INFO)
    if args.log_file:
        file = logging.FileHandler(args.log_file, encoding="utf-8")
        file.setLevel(logging.DEBUG if args.verbose >= 2 else logging.INFO)
        file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(file)
        floor = min(floor, file.level)
    root = logging.getLogger()
    root.setLevel(floor)
    # the command owns its logging, whatever level a host set on "securefgl" before
    logging.getLogger("securefgl").setLevel(logging.NOTSET)
    for handler in handlers:
        root.addHandler(handler)
    return handlers


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; errors become one line on stderr and an exit status."""
    parser, handlers = build_parser(load_plugins())
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, or a bad flag (the parser printed why)
        return int(done.code or 0)
    root, level = logging.getLogger(), logging.getLogger().level
    package_level = logging.getLogger("securefgl").level
    try:
        added = setup_logging(args)
    except OSError as err:
        print(f"securefgl: error: --log-file: {_one_line(err)}", file=sys.stderr)
        return EXIT_RUNTIME
    try:
        return handlers[args.command](args)
    except BrokenPipeError:  # the reader went away (securefgl datasets | head): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (Exception, KeyboardInterrupt) as err:
        code, message = report_error(err)
        if args.verbose:
            traceback.print_exc()
        for handler in added[1:]:  # the log file gets the traceback
            handler.handle(root.makeRecord("securefgl", logging.ERROR, __file__, 0, message, (),
                                           sys.exc_info()))  # fmt: skip
        print(f"securefgl: {message}", file=sys.stderr)
        return code
    finally:
        for handler in added:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)
        logging.getLogger("securefgl").setLevel(package_level)


if __name__ == "__main__":
    sys.exit(main())
