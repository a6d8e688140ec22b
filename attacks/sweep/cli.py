"""``securefgl sweep``: the privacy–utility frontier in one command (registered by the
attack suite's plug-in, :mod:`attacks.cli`)."""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from securefgl.cli import add_config_flags, add_run_options, config_from_args, show_progress
from securefgl.config import ConfigError
from securefgl.config.fields import unknown_keys

if TYPE_CHECKING:
    from attacks.sweep.grid import SweepConfig

DEFAULTS: dict[str, Any] = {
    "protections": ["plain", "secagg,clip_noise", "ckks"],
    "epsilons": [0.5, 1.0, 2.0, 4.0, 8.0],
}
EXAMPLE = """example (the frontier of FedAvg and FedStruct on Cora, 10 clients, 3 seeds):
  securefgl sweep --dataset Cora --clients 10 --algorithms fedavg,fedstruct --seeds 0,1,2 \\
      --protections 'plain;secagg,clip_noise;ckks' --epsilons 0.5,1,2,4,8 \\
      --attacks link_stealing,membership_inference --name cora_frontier
A killed sweep continues where it stopped when run again with the same settings."""


def _floats(text: str) -> list[float]:
    try:
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        message = f"{text!r} is not a comma-separated list of numbers"
        raise argparse.ArgumentTypeError(message) from None


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def register_sweep(sub: argparse._SubParsersAction) -> Callable[[argparse.Namespace], int]:
    sweep = sub.add_parser(
        "sweep", help="privacy–utility frontier: protections × privacy levels × algorithms × "
        "seeds, attacked; resumable; JSON + Markdown + plots",
        usage="%(prog)s [--config FILE] [options]", epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    add_run_options(sweep, "base experiment and the grid ([sweep] table)")
    group = sweep.add_argument_group("sweep")
    group.add_argument("--protections", type=lambda s: [p for p in s.split(";") if p.strip()],
                       help="semicolon-separated protections, e.g. "
                       "'plain;secagg,clip_noise;ckks;edgerand' (default: "
                       f"{';'.join(DEFAULTS['protections'])})")  # fmt: skip
    group.add_argument("--epsilons", type=_floats, help="target ε of clip_noise (σ calibrated) "
                       "and ε of edge DP (default: 0.5,1,2,4,8)")  # fmt: skip
    group.add_argument("--noise", type=_floats, help="σ levels instead (clip_noise, ldp_gaussian)")
    group.add_argument("--ldp-epsilons", type=_floats, help="ldp_laplace: ε per release")
    group.add_argument("--attacks", type=_names,
                       help="comma-separated attacks (default: all that target each algorithm)")
    group.add_argument("--no-fedstruct-preset", dest="fedstruct_preset", action="store_false",
                       default=None, help="FedStruct cells keep this run's lr, weight decay, "
                       "dropout and rounds (default: the paper's Table 5 values replace them)")
    group.add_argument("--restart", action="store_true",
                       help="discard the cells a previous sweep of this name left")  # fmt: skip
    add_config_flags(sweep)
    return cmd_sweep


def _table(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    with open(path, "rb") as fh:
        table = tomllib.load(fh).get("sweep", {})
    if not isinstance(table, dict):
        raise ConfigError(f"config file {path}: sweep must be a table ([sweep])")
    unknown_keys("sweep", table, tuple(TABLE_TYPES))
    for key, value in table.items():
        kind = TABLE_TYPES[key]
        accepts = (int, float) if kind is float else kind  # TOML writes 1 for 1.0
        ok = (isinstance(value, bool) if kind is bool else isinstance(value, list) and all(
            isinstance(v, accepts) and not isinstance(v, bool) for v in value))  # fmt: skip
        if not ok:
            want = "true or false" if kind is bool else f"a list of {kind.__name__}s"
            example = {str: '["plain", "secagg,clip_noise"]', float: "[0.5, 1, 8]",
                       int: "[0, 1]", bool: "false"}[kind]  # fmt: skip
            raise ConfigError(f"config file {path}: [sweep] {key} must be {want}, e.g. "
                              f"{key} = {example}; got {value!r}")  # fmt: skip
    return {k: [float(v) for v in table[k]] if TABLE_TYPES[k] is float else table[k]
            for k in table}  # fmt: skip


#: the [sweep] table's keys and the type of their values (lists, but the preset)
TABLE_TYPES: dict[str, type] = {
    "algorithms": str, "protections": str, "attacks": str, "epsilons": float, "noise": float,
    "ldp_epsilons": float, "seeds": int, "fedstruct_preset": bool,
}


def sweep_from_args(args: argparse.Namespace) -> SweepConfig:
    from attacks.sweep.grid import Protection, SweepConfig

    base = config_from_args(args, tables=("sweep",))
    table = _table(args.config)
    given = {k: getattr(args, k) for k in ("protections", "epsilons", "noise", "ldp_epsilons",
                                           "attacks", "fedstruct_preset")
             if getattr(args, k) is not None}  # fmt: skip
    settings = {**table, **given}
    settings.setdefault("protections", DEFAULTS["protections"])
    wants_epsilons = any(
        p.edge_dp or p.mechanism == "clip_noise"
        for p in map(Protection.parse, settings["protections"])
    )
    if "epsilons" not in settings and "noise" not in settings and wants_epsilons:
        settings["epsilons"] = DEFAULTS["epsilons"]
    if args.algorithms or "algorithms" not in settings:
        settings["algorithms"] = list(base.algorithms)
    if args.seeds or "seeds" not in settings:
        settings["seeds"] = list(base.seeds)
    return SweepConfig(base=base, **settings)


def cmd_sweep(args: argparse.Namespace) -> int:
    from attacks.sweep import save_frontier
    from attacks.sweep.engine import run_sweep
    from securefgl.experiment.results import check_output_dir
    from securefgl.extras import check

    sweep = sweep_from_args(args)
    check_output_dir(sweep.base.output_dir)
    check("plots", "the frontier's plots")  # before any training, not after the grid
    name = sweep.base.name or f"sweep_{sweep.base.dataset.lower()}"
    folder = Path(sweep.base.output_dir) / name
    try:
        records = run_sweep(sweep, folder, progress=show_progress(args), restart=args.restart)
    except ValueError as err:
        raise ConfigError(str(err)) from err
    out = save_frontier(records, folder, "frontier")
    print(out["md"].read_text())
    print("results: " + ", ".join(str(p) for p in out.values()))
    return 0
