"""Command line: ``securefgl run``, ``securefgl datasets``, ``securefgl recommend``, and the
commands of installed plug-ins (``securefgl audit`` comes from the ``attacks`` package).

Every :class:`~securefgl.config.ExperimentConfig` field is a flag, in one argparse group per
topic (data, federation, protocol stack, training, output) and per algorithm section
(FedStruct, FedGCN), with the help text and choices of its field metadata. Plug-ins are
modules named in the ``securefgl.plugins`` entry-point group; each may define
``register_commands(subparsers) -> {name: handler}`` and ``recommend_reports``, callables
``(trainer, views, backend) -> dict`` whose results ``securefgl recommend`` prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from securefgl.config import SECTIONS, ConfigError, ExperimentConfig, section_aliases
from securefgl.recommendation.cli import add_recommend_parser, cmd_recommend

Handler = Callable[[argparse.Namespace], int]

#: Per section: the argparse group title and the flag prefix of its fields.
SECTION_FLAGS = {
    "fedstruct": ("FedStruct (Aliakbari et al. 2025; default: the dataset's Table 5 preset)", ""),
    "fedgcn": ("FedGCN (Yao et al. 2023)", "fedgcn-"),
}
_SCALARS = {"int": int, "float": float, "str": str}


def _csv(kind: type) -> Callable[[str], list]:
    def parse(text: str) -> list:
        return [kind(t) for t in text.split(",") if t.strip()]

    return parse


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
        options.update(type=json.loads, metavar="JSON")
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
            default = None if f.default is dataclasses.MISSING else f.default
            _add_flag(group, f, names, f"{name}.{f.name}", default)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    """The TOML file (if any), then ``--preset``, then every flag that was given."""
    config = ExperimentConfig.from_toml(args.config) if args.config else ExperimentConfig()
    if getattr(args, "preset", False):
        from securefgl.fedstruct.settings import apply_preset

        config = apply_preset(config, getattr(args, "dataset", None) or config.dataset)
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
    parser = argparse.ArgumentParser(prog="securefgl", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="count", default=0)
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
    return parser, handlers


def _recommend_reports(plugins: Sequence[ModuleType]) -> list[Callable[..., dict]]:
    return [r for p in plugins for r in getattr(p, "recommend_reports", ())]


def print_table(result: Any, folder: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from securefgl.experiment.results import format_epsilon

    cfg = result.config
    table = Table(
        title=f"{cfg.dataset} · {cfg.partition} · K={cfg.clients} · "
        f"{'+'.join(cfg.protocol) or 'plain'} · {len(cfg.seeds)} seed(s)"
    )
    columns = ("algorithm", "federated", "test acc %", "test macro-F1 %", "ε (δ)", "MB", "seconds")
    for col in columns:
        table.add_column(col, justify="left" if col == "algorithm" else "right")
    for row in result.summary():
        table.add_row(
            row["algorithm"],
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
    from securefgl.experiment.results import save_result

    result = run_experiment(config_from_args(args), progress=not args.no_progress)
    print_table(result, save_result(result))
    return 0


def _cmd_datasets(args: argparse.Namespace) -> int:
    from securefgl.data import available_datasets

    rows = available_datasets(args.root)
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        state = "present" if r["present"] else "missing"
        print(f"{r['name']:<{width}}  {state:<8} {r.get('path') or ''}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser, handlers = build_parser(load_plugins())
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, or a bad flag (argparse printed why)
        return int(done.code or 0)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return handlers[args.command](args)
    except ConfigError as err:
        print(f"securefgl: configuration error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
