"""Command line: ``securefgl run``, ``securefgl datasets``, ``securefgl recommend``, and the
commands of installed plug-ins (``securefgl audit`` comes from the ``attacks`` package).

Every :class:`~securefgl.config.ExperimentConfig` field is a flag, in one argparse group per
topic (data, federation, protocol stack, training, output) and per algorithm section
(FedStruct, FedGCN), with the help text and choices of its field metadata. Plug-ins are
modules named in the ``securefgl.plugins`` entry-point group; each may define
``register_commands(subparsers) -> {name: handler}`` and ``recommend_reports``, callables
``(trainer, views, backend) -> dict`` whose results ``securefgl recommend`` prints.

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
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from protocols.base import ProtocolError
from protocols.fixedpoint import FixedPointOverflowError
from securefgl.config import SECTIONS, ConfigError, ExperimentConfig, section_aliases
from securefgl.data.integrity import DatasetError
from securefgl.recommendation.cli import add_recommend_parser, cmd_recommend

Handler = Callable[[argparse.Namespace], int]

#: Exit statuses: usage / configuration errors, run-time errors (data, protocol, I/O).
EXIT_USAGE, EXIT_RUNTIME, EXIT_INTERRUPTED = 2, 1, 130


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``securefgl: usage error: ...``, exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        hint = f"(see '{self.prog} --help')"
        self.exit(EXIT_USAGE, f"securefgl: usage error: {self.prog}: {message} {hint}\n")


#: Per section: the argparse group title and the flag prefix of its fields.
SECTION_FLAGS = {
    "fedstruct": ("FedStruct (Aliakbari et al. 2025; default: the dataset's Table 5 preset)", ""),
    "fedgcn": ("FedGCN (Yao et al. 2023)", "fedgcn-"),
    "fedgls": ("FedGLS family (Fu et al., TMLR)", "fedgls-"),
    "graph": ("graph classification (--task graph; defaults: GPFL's set-up)", "graph-"),
    "gpfl": ("GPFL (TMLR 2025): client network, private similarity and sums", "gpfl-"),
    "spreadfgl": ("SpreadFGL / FedGL (Zhong et al.) and their baselines", "spreadfgl-"),
    "fedsage": ("FedSage+ (Zhang et al., NeurIPS 2021)", "fedsage-"),
}
_SCALARS = {"int": int, "float": float, "str": str}
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


def _add_flag(group: Any, f: dataclasses.Field, names: list[str], dest: str, default: Any) -> None:
    """One flag for field ``f``; unset flags stay None (the TOML / default value wins)."""
    meta, kind = f.metadata, str(f.type).replace(" | None", "")
    help_text = meta.get("help", "")
    if default is not None:
        help_text += f" (default: {default})"
    options: dict[str, Any] = {"dest": dest, "default": None, "help": help_text}
    if kind == "bool":
        group.add_argument(*names, action=argparse.BooleanOptionalAction, **options)
        return
    if kind.startswith("list["):
        options.update(type=_csv(_SCALARS[kind[5:-1]]), metavar="A,B,...")
    elif kind.startswith("dict"):
        options.update(type=_json_table, metavar="JSON")
    else:
        options["type"] = _SCALARS[kind]
    if meta.get("choices"):
        options["choices"] = meta["choices"]
    group.add_argument(*names, **options)


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """Flags for every generic field and every section field of ExperimentConfig."""
    groups: dict[str, Any] = {}
    for f in dataclasses.fields(ExperimentConfig):
        if f.name in SECTIONS:
            continue
        topic = f.metadata.get("group", "other")
        group = groups.get(topic) or groups.setdefault(topic, parser.add_argument_group(topic))
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        _add_flag(group, f, [_flag(f.name)], f.name, default)
    for name, kind in SECTIONS.items():
        title, prefix = SECTION_FLAGS[name]
        group = parser.add_argument_group(title)
        aliases = section_aliases(kind)
        for f in dataclasses.fields(kind):
            names = [_flag(prefix + f.name)] + [_flag(a) for a, t in aliases.items() if t == f.name]
            if prefix and f.metadata.get("unprefixed"):  # also without the prefix
                names.append(_flag(f.name))
            default = None if f.default is dataclasses.MISSING else f.default
            _add_flag(group, f, names, f"{name}.{f.name}", default)


def add_fedgls_preset_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fedgls-preset",
        action="store_true",
        help="FedGLS's set-up for the dataset: louvain-largest partition, 60/20/20 per "
        "client, hidden 16, lr 0.01, E = 5, the paper's K and rounds (flags still win)",
    )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    """The TOML file (if any), then ``--preset`` / ``--fedgls-preset``, then every flag that
    was given."""
    config = ExperimentConfig.from_toml(args.config) if args.config else ExperimentConfig()
    dataset = getattr(args, "dataset", None) or config.dataset
    if getattr(args, "preset", False):
        from securefgl.fedstruct.settings import apply_preset

        config = apply_preset(config, dataset)
    if getattr(args, "fedgls_preset", False):
        from securefgl.fedgls.settings import apply_preset as apply_fedgls_preset

        config = apply_fedgls_preset(config, dataset)
    given = {k: v for k, v in vars(args).items() if v is not None}
    changes: dict[str, Any] = {
        f.name: given[f.name]
        for f in dataclasses.fields(ExperimentConfig)
        if f.name not in SECTIONS and f.name in given
    }
    for name in SECTIONS:
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
    run.add_argument(
        "--preset",
        action="store_true",
        help="FedStruct Table 5 lr / weight decay / dropout / rounds for the dataset "
        "(explicit flags still win)",
    )
    add_fedgls_preset_flag(run)
    add_config_flags(run)
    ds = sub.add_parser("datasets", help="which datasets are available offline")
    ds.add_argument("--root", help="data root (default: $SECUREFGL_DATA)")
    add_recommend_parser(sub)
    handlers: dict[str, Handler] = {
        "run": _cmd_run,
        "datasets": _cmd_datasets,
        "recommend": lambda args: cmd_recommend(args, _recommend_reports(plugins)),
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
        f"{'+'.join(cfg.protocol) or 'plain'} · {len(cfg.seeds)} seed(s)"
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
