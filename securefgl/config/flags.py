"""The command-line flags of an experiment's configuration: one flag per field of
:class:`~securefgl.config.ExperimentConfig`, of ``[experiment.protocol]`` and of every
installed family's section, with the help text, choices and group of the field's metadata;
and the configuration that a parse of them gives (TOML file, presets, then flags).

A family section's flags are listed by name in ``--help`` (its group's description) and
explained by ``--help-all`` (:class:`HelpAll`), so that ``securefgl run --help`` stays short.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from collections.abc import Callable, Collection, Sequence
from typing import Any

from protocols.settings import ProtocolSettings
from securefgl.config.experiment import GRAPH_TASKS, ExperimentConfig
from securefgl.config.families import (
    algorithm_names,
    default_algorithms,
    families,
    sections,
    task_defaults,
)
from securefgl.config.fields import hints, public_fields

_NAMES = {int: "integer", float: "number", str: "string"}
_METAVARS = {int: "N", float: "X", str: "NAME"}


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


def shown(value: Any) -> str | None:
    """A default as the help shows it (None: not shown)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "none"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def _add_flag(
    group: Any, f: dataclasses.Field, hint: Any, names: list[str], dest: str, default: Any,
    choices: tuple[Any, ...] | None = None, help_text: str | None = None,
) -> argparse.Action:  # fmt: skip
    """One flag for field ``f`` of type ``hint``; unset flags stay None (the TOML / default
    value wins)."""
    meta = f.metadata
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]  # X | None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    help_text = meta.get("help", "") if help_text is None else help_text
    if shown(default) is not None:
        help_text += f" (default: {shown(default)})"
    options: dict[str, Any] = {"dest": dest, "default": None, "help": help_text.replace("%", "%%")}
    if hint is bool:
        return group.add_argument(*names, action=argparse.BooleanOptionalAction, **options)
    if origin in (list, tuple):
        each = meta.get("metavar") or _METAVARS.get(args[0], "VALUE")
        options.update(type=_csv(args[0]), metavar=f"{each},...")
    elif origin is dict or hint is dict:
        options.update(type=_json_table, metavar="JSON")
    else:
        options["type"] = hint
    if choices or meta.get("choices"):
        options["choices"] = choices or meta["choices"]
    elif "metavar" not in options:
        options["metavar"] = meta.get("metavar") or _METAVARS.get(hint, "VALUE")
    return group.add_argument(*names, **options)


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class HelpAll(argparse.Action):
    """``--help-all``: the help with every family section's flags explained."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        kwargs.update(nargs=0, default=argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        for action, text in getattr(parser, "full_help", {}).items():
            action.help = text
        for group in parser._action_groups:
            if getattr(group, "full", False):
                group.description = None
        parser.print_help()
        parser.exit()


def _section_flags(parser: Any, name: str, kind: type, title: str, prefix: str,
                   compact: bool) -> Any:  # fmt: skip
    """The flags of one settings section (its group, returned); ``compact``: listed by
    name in ``--help``."""
    group = parser.add_argument_group(title)
    kinds, names = hints(kind), []
    for f in public_fields(kind):
        flags = [_flag(f.metadata.get("flag") or prefix + f.name)]
        if prefix and f.metadata.get("unprefixed"):  # also without the prefix
            flags.append(_flag(f.name))
        action = _add_flag(group, f, kinds[f.name], flags, f"{name}.{f.name}", _default(f))
        if compact:
            parser.full_help[action] = action.help
            action.help = argparse.SUPPRESS
            names.append(flags[0])
    if compact:
        group.description, group.full = " ".join(names), True  # type: ignore[attr-defined]
    return group


def _preset_flags(parser: Any, group: Any, presets: Sequence[Any]) -> None:
    """The presets' flags, in their family's group (listed there when it is compact)."""
    for preset in presets:
        action = group.add_argument(_flag(preset.flag), action="store_true", help=preset.help)
        if getattr(group, "full", False):
            parser.full_help[action] = action.help
            action.help = argparse.SUPPRESS
            group.description += f" {_flag(preset.flag)}"


def _algorithm_help(tasks: Sequence[str]) -> tuple[str, str]:
    """The ``--algorithms`` help (every algorithm of ``tasks``) and its default."""
    default = "; ".join(
        ("" if i == 0 else f"--task {t}: ") + ",".join(default_algorithms(t))
        for i, t in enumerate(tasks)
    )
    names = "; ".join(
        ("" if i == 0 else f"--task {t}: ") + ", ".join(algorithm_names(t))
        for i, t in enumerate(tasks)
    )
    return f"algorithms to compare, comma-separated: {names}", default


def add_config_flags(
    parser: argparse.ArgumentParser, tasks: Sequence[str] = GRAPH_TASKS,
    defaults: dict[str, Any] | None = None,
) -> None:  # fmt: skip
    """Flags for the generic fields of ExperimentConfig that apply to ``tasks``, the
    protocol section, and the sections and presets of the families of ``tasks`` (those
    listed by name in ``--help``; ``--help-all`` explains them). ``defaults``: the defaults
    a command shows instead of the configuration's (e.g. the audit's algorithms)."""
    groups: dict[str, Any] = {}
    own = task_defaults(tasks[0]) if len(tasks) == 1 else {}
    parser.full_help = {}  # type: ignore[attr-defined]
    for f in dataclasses.fields(ExperimentConfig):
        if f.metadata.get("internal") or f.metadata.get("section"):
            continue
        if not set(f.metadata.get("tasks", ())) & set(tasks):
            continue
        topic = f.metadata.get("group") or "other"
        group = groups.get(topic) or groups.setdefault(topic, parser.add_argument_group(topic))
        choices = tuple(tasks) if f.name == "task" else None  # the command's tasks only
        default, text = own.get(f.name, _default(f)), None
        if f.name == "task" and len(tasks) == 1:  # a command of one task defaults to it
            default = tasks[0]
        if f.name == "algorithms":
            text, default = _algorithm_help(tasks)
        default = (defaults or {}).get(f.name, default)
        _add_flag(group, f, hints(ExperimentConfig)[f.name], [_flag(f.name)], f.name, default,
                  choices, text)  # fmt: skip
    _section_flags(parser, "protocol", ProtocolSettings, "protocol stack", "", compact=False)
    shown_sections: dict[str, Any] = {}
    for family in families().values():
        if family.task not in tasks:
            continue
        section, group = family.section, parser
        if section is not None and section.name not in shown_sections:
            own_section = len(tasks) == 1 and section.name in _OWN_SECTIONS.get(tasks[0], ())
            shown_sections[section.name] = _section_flags(
                parser, section.name, section.settings, section.title, section.prefix,
                compact=not own_section,
            )  # fmt: skip
        if section is not None:
            group = shown_sections[section.name]
        _preset_flags(parser, group, family.presets)
    if parser.full_help:  # type: ignore[attr-defined]
        parser.add_argument("--help-all", action=HelpAll,
                            help="show every flag's help, family sections included")  # fmt: skip


#: sections shown in full on a command of one task (the recommendation task's only section)
_OWN_SECTIONS = {"recommendation": ("recommendation",)}


def config_from_args(
    args: argparse.Namespace, task: str | None = None, tables: Collection[str] = ()
) -> ExperimentConfig:
    """The TOML file (if any), then the presets given, then every flag that was given;
    ``task``: the command's task when it has one (``securefgl recommend``); ``tables``: the
    command's own top-level TOML tables (:meth:`ExperimentConfig.from_toml`)."""
    given = {k: v for k, v in vars(args).items() if v is not None}
    if task is not None:
        given["task"] = task
    presets = [(family, preset) for family in families().values() for preset in family.presets
               if given.get(preset.flag.replace("-", "_"))]  # fmt: skip
    if getattr(args, "config", None):
        config = ExperimentConfig.from_toml(args.config, tables)
        if task is not None and config.task != task:
            config = config.replace(task=task)
    else:  # the task, dataset and algorithms first: a preset may be another task's
        base = {k: given[k] for k in ("task", "dataset", "algorithms") if k in given}
        if "task" not in base and presets:
            base["task"] = presets[0][0].task
        config = ExperimentConfig(**base)
    dataset = given.get("dataset") or config.dataset
    for _, preset in presets:
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
