"""Command line: ``securefgl run``, ``securefgl datasets``, ``securefgl recommend``, and the
commands of installed plug-ins (``securefgl audit`` comes from the ``attacks`` package).

Every :class:`~securefgl.config.ExperimentConfig` field is a flag, in one argparse group per
topic (data, federation, protocol stack, training, output) and one per installed family's
settings section, with the help text and choices of its field metadata
(:mod:`securefgl.config.families`). Plug-ins are modules named in the ``securefgl.plugins``
entry-point group; each may define ``register_commands(subparsers) -> {name: handler}`` and
``recommend_reports``, callables ``(trainer, views, aggregation) -> dict`` whose results
``securefgl recommend`` prints.

Errors (every command, plug-ins included): one line ``securefgl: ...`` on stderr, no
traceback unless ``-v``; exit status 2 for usage and configuration errors, 1 for data,
protocol and other run-time errors, 130 when interrupted (docs/robustness.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import logging
import sys
import traceback
import types
import typing
from collections.abc import Callable, Collection, Sequence
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from protocols.base import ProtocolError
from protocols.fixedpoint import FixedPointOverflowError
from protocols.settings import ProtocolSettings
from securefgl.config import ConfigError, ExperimentConfig, families, sections
from securefgl.config.experiment import GRAPH_TASKS
from securefgl.config.families import task_defaults, task_runner
from securefgl.config.fields import hints, public_fields
from securefgl.data.integrity import DatasetError
from securefgl.deploy.cli import register_commands as deployment_commands

Handler = Callable[[argparse.Namespace], int]

#: Exit statuses: usage / configuration errors, run-time errors (data, protocol, I/O).
EXIT_USAGE, EXIT_RUNTIME, EXIT_INTERRUPTED = 2, 1, 130


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``securefgl: usage error: ...``, exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        hint = f"(see '{self.prog} --help')"
        self.exit(EXIT_USAGE, f"securefgl: usage error: {self.prog}: {message} {hint}\n")


_NAMES = {int: "integer", float: "number", str: "string"}


def _csv(kind: type) -> Callable[[str], list]:
    def parse(text: str) -> list:
        try:
            return [kind(t) for t in text.split(",") if t.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a comma-separated list of {_NAMES[kind]}s"
            ) from None

    return parse


def _json_table(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object ({{...}})")
    return value


def _add_flag(
    group: Any, f: dataclasses.Field, hint: Any, names: list[str], dest: str, default: Any,
    choices: tuple[Any, ...] | None = None,
) -> None:  # fmt: skip
    """One flag for field ``f`` of type ``hint``; unset flags stay None (the TOML / default
    value wins)."""
    meta = f.metadata
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]  # X | None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    help_text = meta.get("help", "")
    if default is not None:
        help_text += f" (default: {default})"
    options: dict[str, Any] = {"dest": dest, "default": None, "help": help_text.replace("%", "%%")}
    if hint is bool:
        group.add_argument(*names, action=argparse.BooleanOptionalAction, **options)
        return
    if origin in (list, tuple):
        options.update(type=_csv(args[0]), metavar="A,B,...")
    elif origin is dict or hint is dict:
        options.update(type=_json_table, metavar="JSON")
    else:
        options["type"] = hint
    if choices or meta.get("choices"):
        options["choices"] = choices or meta["choices"]
    elif "metavar" not in options:
        options["metavar"] = dest.rsplit(".", 1)[-1].upper()
    group.add_argument(*names, **options)


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _section_flags(parser: Any, name: str, kind: type, title: str, prefix: str) -> None:
    group = parser.add_argument_group(title)
    kinds = hints(kind)
    for f in public_fields(kind):
        names = [_flag(f.metadata.get("flag") or prefix + f.name)]
        if prefix and f.metadata.get("unprefixed"):  # also without the prefix
            names.append(_flag(f.name))
        _add_flag(group, f, kinds[f.name], names, f"{name}.{f.name}", _default(f))


def add_config_flags(parser: argparse.ArgumentParser, tasks: Sequence[str] = GRAPH_TASKS) -> None:
    """Flags for the generic fields of ExperimentConfig that apply to ``tasks``, the
    protocol section, and the sections and presets of the families of ``tasks``."""
    groups: dict[str, Any] = {}
    own = task_defaults(tasks[0]) if len(tasks) == 1 else {}
    for f in dataclasses.fields(ExperimentConfig):
        if f.metadata.get("internal") or f.metadata.get("section"):
            continue
        if not set(f.metadata.get("tasks", ())) & set(tasks):
            continue
        topic = f.metadata.get("group") or "other"
        group = groups.get(topic) or groups.setdefault(topic, parser.add_argument_group(topic))
        choices = tuple(tasks) if f.name == "task" else None  # the command's tasks only
        _add_flag(group, f, hints(ExperimentConfig)[f.name], [_flag(f.name)], f.name,
                  own.get(f.name, _default(f)), choices)  # fmt: skip
    _section_flags(parser, "protocol", ProtocolSettings, "protocol stack", "")
    shown: set[str] = set()
    for family in families().values():
        if family.task not in tasks:
            continue
        section = family.section
        if section is not None and section.name not in shown:
            shown.add(section.name)
            _section_flags(parser, section.name, section.settings, section.title, section.prefix)
        for preset in family.presets:
            parser.add_argument(_flag(preset.flag), action="store_true", help=preset.help)


def config_from_args(
    args: argparse.Namespace, task: str | None = None, tables: Collection[str] = ()
) -> ExperimentConfig:
    """The TOML file (if any), then the presets given, then every flag that was given;
    ``task``: the command's task when it has one (``securefgl recommend``); ``tables``: the
    command's own top-level TOML tables (:meth:`ExperimentConfig.from_toml`)."""
    given = {k: v for k, v in vars(args).items() if v is not None}
    if task is not None:
        given["task"] = task
    if getattr(args, "config", None):
        config = ExperimentConfig.from_toml(args.config, tables)
        if task is not None and config.task != task:
            config = config.replace(task=task)
    else:
        config = ExperimentConfig(**({"task": task} if task else {}))
    dataset = given.get("dataset") or config.dataset
    for family in families().values():
        for preset in family.presets:
            if given.get(preset.flag.replace("-", "_")):
                config = preset.apply(config, dataset)
    changes: dict[str, Any] = {
        f.name: given[f.name]
        for f in dataclasses.fields(ExperimentConfig)
        if not f.metadata.get("internal") and not f.metadata.get("section") and f.name in given
    }
    for name in ("protocol", *sections()):
        section = {k.split(".", 1)[1]: v for k, v in given.items() if k.startswith(f"{name}.")}
        if section:
            changes[name] = section
    return config.replace(**changes)


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


def build_parser(plugins: Sequence[ModuleType] = ()) -> tuple[argparse.ArgumentParser, dict]:
    """The parser and the handler of each command (plug-ins add theirs)."""
    parser = Parser(prog="securefgl", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging; tracebacks on errors"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train and compare algorithms; saves JSON + Markdown")
    run.add_argument("--config", help="TOML file ([experiment] table or top-level keys)")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    add_config_flags(run)
    ds = sub.add_parser("datasets", help="which datasets are available offline")
    ds.add_argument(
        "--data-root", "--root", dest="root", help="data root (default: $SECUREFGL_DATA)"
    )
    rec = sub.add_parser(
        "recommend", help="federated recommendation (FeSoG / FedGNN) on a rating dataset"
    )
    rec.add_argument("--config", help="TOML file ([experiment] table or top-level keys)")
    rec.add_argument(
        "--checkpoint",
        help="directory where the run saves itself every 10 evaluations and from which it "
        "resumes (each party writes its own file)",
    )
    rec.add_argument("--json", action="store_true", help="print the results as JSON")
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
    for command in sub.choices.values():  # -v after the command too (plug-ins included)
        with contextlib.suppress(argparse.ArgumentError):  # the command has its own -v
            command.add_argument(
                "-v", "--verbose", action="count", default=argparse.SUPPRESS, help="as above"
            )
    return parser, handlers


def _recommend_reports(plugins: Sequence[ModuleType]) -> list[Callable[..., dict]]:
    return [r for p in plugins for r in getattr(p, "recommend_reports", ())]


def print_table(result: Any, folder: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from securefgl.experiment.results import format_epsilon

    cfg = result.config
    split = f"Dirichlet α={cfg.graph.dirichlet:g}" if cfg.task == "graph" else cfg.partition
    table = Table(
        title=f"{cfg.dataset} · {split} · K={cfg.clients} · "
        f"{cfg.protocol.label} · {len(cfg.seeds)} seed(s)"
    )
    columns = (
        "algorithm", "model", "federated", "test acc %", "test macro-F1 %", "ε (δ)", "MB",
        "seconds",
    )  # fmt: skip
    for col in columns:
        table.add_column(col, justify="left" if col == "algorithm" else "right")
    for row in result.summary():
        table.add_row(
            row["algorithm"],
            row.get("model", ""),
            "yes" if row["federated"] else "no (upper bound)",
            f"{row['test_acc']:.2f} ± {row['test_acc_std']:.2f}",
            f"{row['test_f1']:.2f} ± {row['test_f1_std']:.2f}",
            format_epsilon(row),
            f"{row['bytes'] / 1e6:.2f}",
            f"{row['seconds']:.1f}",
        )
    console = Console()
    console.print(table)
    console.print(f"results: {folder}/result.json, {folder}/result.md")


def _cmd_run(args: argparse.Namespace) -> int:
    from securefgl.experiment import run_experiment
    from securefgl.experiment.results import check_output_dir, save_result

    config = config_from_args(args)
    check_output_dir(config.output_dir)  # before hours of training, not after
    result = run_experiment(config, progress=not args.no_progress)
    print_table(result, save_result(result))
    return 0


def _cmd_recommend(args: argparse.Namespace, reports: Sequence[Callable[..., dict]]) -> int:
    """Train every algorithm × seed, then run every ``report(trainer, views, aggregation)``
    on each trained federated model; their ``summary`` lines are printed."""
    from securefgl.experiment.results import check_output_dir, save_rows

    config = config_from_args(args, task="recommendation")
    run = task_runner("recommendation")
    if run is None:
        raise ConfigError("no installed family runs the recommendation task")
    check_output_dir(config.output_dir)
    rows = run(config, reports, args.checkpoint)
    folder = save_rows(config, rows)
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else rows, indent=1, default=str))
        print(f"saved: {folder}/result.json", file=sys.stderr)
        return 0
    for row in rows:
        print(
            f"{row['method']} on {row['dataset']['dataset']} (seed {row['seed']}): test RMSE "
            f"{row['test_rmse']:.4f}  MAE {row['test_mae']:.4f}  ({row['rounds']} rounds, "
            f"{row['seconds']:.0f}s)"
        )
        print(f"privacy: {row['privacy']}")
        for value in row.values():
            if isinstance(value, dict) and "summary" in value:
                print(value["summary"])
    print(f"saved: {folder}/result.json")
    return 0


def _cmd_datasets(args: argparse.Namespace) -> int:
    from securefgl.data import DatasetNotAvailableError, available_datasets, data_root

    root = data_root(args.root)
    if root is not None and not root.is_dir():
        raise DatasetNotAvailableError(f"the data root {root} does not exist or is not a folder")
    rows = available_datasets(args.root)
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        state = "present" if r["present"] else "missing"
        print(f"{r['name']:<{width}}  {state:<8} {r.get('path') or ''}")
    return 0


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def report_error(err: BaseException) -> tuple[int, str]:
    """``(exit status, message)`` of an error raised by a command."""
    if isinstance(err, ConfigError):
        return EXIT_USAGE, f"configuration error: {_one_line(err)}"
    if isinstance(err, DatasetError):
        return EXIT_RUNTIME, f"data error: {_one_line(err)}"
    if isinstance(err, FixedPointOverflowError):
        return EXIT_RUNTIME, f"fixed-point overflow during the run: {_one_line(err)}"
    if isinstance(err, ProtocolError):
        return EXIT_RUNTIME, f"protocol error during the run: {_one_line(err)}"
    if isinstance(err, KeyboardInterrupt):
        return EXIT_INTERRUPTED, "interrupted"
    if isinstance(err, OSError):
        where = f" ({err.filename})" if err.filename and str(err.filename) not in str(err) else ""
        return EXIT_RUNTIME, f"error: {_one_line(err)}{where}"
    return EXIT_RUNTIME, (
        f"error: {type(err).__name__}: {_one_line(err)} (unexpected: rerun with -v for the "
        "traceback and report it if the input was valid)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; errors become one line on stderr and an exit status."""
    parser, handlers = build_parser(load_plugins())
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, or a bad flag (the parser printed why)
        return int(done.code or 0)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return handlers[args.command](args)
    except (Exception, KeyboardInterrupt) as err:
        code, message = report_error(err)
        if args.verbose:
            traceback.print_exc()
        print(f"securefgl: {message}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
