"""Command line: ``securefgl run``, ``securefgl audit``, ``securefgl datasets`` and
``securefgl recommend``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from securefgl.config import ALIASES, ConfigError, ExperimentConfig
from securefgl.recommendation.cli import add_recommend_parser, cmd_recommend

_LISTS = {
    "algorithms": str,
    "protocol": str,
    "seeds": int,
    "structure_beta": float,
    "feature_hidden": int,
    "structure_hidden": int,
}


def _csv(kind: type) -> Any:
    def parse(text: str) -> list:
        return [kind(t) for t in text.split(",") if t.strip()]

    return parse


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per ExperimentConfig field; unset flags keep the TOML/default value."""
    aliases = {name: alias for alias, name in ALIASES.items()}
    for f in dataclasses.fields(ExperimentConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.name in aliases:
            parser.add_argument(flag, "--" + aliases[f.name], dest=f.name, default=None)
        elif f.name in _LISTS:
            parser.add_argument(
                flag, type=_csv(_LISTS[f.name]), default=None, help=f"comma-separated {f.name}"
            )
        elif f.name == "csbm":
            parser.add_argument(
                flag,
                type=json.loads,
                default=None,
                help="generator options as JSON, e.g. '{\"num_nodes\": 5000}'",
            )
        elif str(f.type).startswith("bool"):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None)
        else:
            kind = {"int": int, "float": float}.get(str(f.type).split(" |")[0], str)
            parser.add_argument(flag, type=kind, default=None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="securefgl", description=__doc__)
    parser.add_argument("-v", "--verbose", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train and compare algorithms; saves JSON + Markdown")
    run.add_argument("--config", help="TOML file ([experiment] table or top-level keys)")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument(
        "--preset",
        action="store_true",
        help="FedStruct Table 5 lr / weight decay / dropout / rounds for the "
        "dataset (explicit flags still win)",
    )
    _add_config_flags(run)
    audit = sub.add_parser(
        "audit",
        help="leakage audit: algorithm × protocol stack × attack; saves JSON + Markdown + plot",
    )
    audit.add_argument("--config", help="TOML file for the base experiment settings")
    audit.add_argument("--no-progress", action="store_true", help="hide progress bars")
    audit.add_argument(
        "--protocols",
        default=None,
        help="semicolon-separated stacks, e.g. 'plain;secagg;ckks;secagg,clip_noise;edgerand:1'",
    )
    audit.add_argument("--attacks", type=_csv(str), default=None, help="comma-separated attacks")
    audit.add_argument("--central-rounds", type=int, default=None)
    audit.add_argument("--list-attacks", action="store_true", help="list attacks and exit")
    _add_config_flags(audit)
    ds = sub.add_parser("datasets", help="which datasets are available offline")
    ds.add_argument("--root", help="data root (default: $SECUREFGL_DATA)")
    add_recommend_parser(sub)
    return parser


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    config = ExperimentConfig.from_toml(args.config) if args.config else ExperimentConfig()
    if getattr(args, "preset", False):
        from securefgl.fedstruct.presets import apply_preset

        config = apply_preset(config, getattr(args, "dataset", None) or config.dataset)
    overrides = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(ExperimentConfig)
        if getattr(args, f.name, None) is not None
    }
    return config.replace(**overrides)


def _print_table(result: Any, folder: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from securefgl.experiment.results import format_epsilon

    cfg = result.config
    table = Table(
        title=f"{cfg.dataset} · {cfg.partition} · K={cfg.clients} · "
        f"{'+'.join(cfg.protocol) or 'plain'} · {len(cfg.seeds)} seed(s)"
    )
    for col in (
        "algorithm",
        "federated",
        "test acc %",
        "test macro-F1 %",
        "ε (δ)",
        "MB",
        "seconds",
    ):
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
    _print_table(result, save_result(result))
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from attacks.audit import DEFAULT_PROTOCOLS, AuditConfig, audit_settings, run_audit, save_audit
    from attacks.registry import describe

    if args.list_attacks:
        for row in describe():
            print(f"{row['attack']:<28} targets {', '.join(row['targets'])}")
        return 0
    base = config_from_args(args)
    protocols = [p for p in args.protocols.split(";") if p.strip()] if args.protocols else None
    audit = AuditConfig(
        base=base,
        algorithms=list(base.algorithms) if args.algorithms else ["central", "fedavg"],
        protocols=protocols or list(DEFAULT_PROTOCOLS),
        attacks=args.attacks or [],
        seeds=list(base.seeds),
        central_rounds=args.central_rounds,
    )
    try:
        rows = run_audit(audit, progress=not args.no_progress)
    except ValueError as err:
        raise ConfigError(str(err)) from err
    name = base.name or f"audit_{base.dataset}"
    out = save_audit(rows, base.output_dir, name, audit_settings(audit))
    from attacks.audit import markdown_table

    print(markdown_table(rows))
    print("results: " + ", ".join(str(p) for p in out.values()))
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
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        commands = {
            "run": _cmd_run,
            "audit": _cmd_audit,
            "datasets": _cmd_datasets,
            "recommend": cmd_recommend,
        }
        return commands[args.command](args)
    except ConfigError as err:
        print(f"securefgl: configuration error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
