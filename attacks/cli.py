"""The attack suite's command-line plug-in (entry point ``securefgl.plugins``).

Adds ``securefgl audit`` (algorithm × protocol stack × attack grid), ``securefgl sweep``
(the privacy–utility frontier) and the
interaction-inference report of ``securefgl recommend``, so that ``securefgl`` itself never
imports ``attacks``. The attack modules are imported when a command runs, not when the
parser is built (``securefgl --help`` loads no torch).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from attacks.sweep.cli import register_sweep
from securefgl.cli import add_config_flags, add_run_options, config_from_args, show_progress
from securefgl.config import ConfigError


def register_commands(sub: argparse._SubParsersAction) -> dict[str, Any]:
    audit = sub.add_parser(
        "audit",
        help="leakage audit: algorithm × protocol stack × attack; saves JSON + Markdown + plot",
        usage="%(prog)s [--config FILE] [options]",
        description="Train each algorithm under each protocol stack and run every attack "
        "that targets it; saves <output-dir>/<name>/result.json, result.md and result.png.",
        epilog="examples:\n  securefgl audit --list-attacks\n  securefgl audit --algorithms "
        "fedavg,fedstruct --protocols 'plain;secagg;clip_noise;edgerand:1'",
    )  # fmt: skip
    add_run_options(audit, "base experiment")
    group = audit.add_argument_group("audit")
    group.add_argument(
        "--protocols", default=None, metavar="STACK;...",
        help="semicolon-separated stacks, e.g. 'plain;secagg;ckks;secagg,clip_noise;edgerand:1' "
        "(default: plain;secagg;ckks;clip_noise;secagg,clip_noise;edgerand:1)",
    )  # fmt: skip
    group.add_argument(
        "--attacks", type=lambda s: [t for t in s.split(",") if t.strip()], default=None,
        metavar="NAME,...", help="comma-separated attacks (default: all that target each "
        "algorithm; --list-attacks names them)",
    )  # fmt: skip
    group.add_argument("--central-rounds", type=int, default=None, metavar="N",
                       help="rounds of central (default: --rounds)")  # fmt: skip
    group.add_argument("--no-fedstruct-preset", dest="fedstruct_preset", action="store_false",
                       help="FedStruct cells keep this run's lr, weight decay, dropout and "
                       "rounds (default: the paper's Table 5 values replace them)")  # fmt: skip
    group.add_argument("--list-attacks", action="store_true", help="list attacks and exit")
    group.add_argument(
        "--strict",
        action="store_true",
        help="exit with status 3 when a DP audit's lower bound exceeds the run's claimed ε",
    )
    add_config_flags(audit, defaults={"algorithms": "central,fedavg"})
    return {"audit": cmd_audit, "sweep": register_sweep(sub)}


def cmd_audit(args: argparse.Namespace) -> int:
    from attacks.audit import (
        DEFAULT_PROTOCOLS,
        AuditConfig,
        audit_settings,
        markdown_table,
        run_audit,
        save_audit,
        violations,
    )
    from attacks.registry import describe
    from securefgl.experiment.results import check_output_dir, result_folder

    if args.list_attacks:
        for row in describe():
            print(f"{row['attack']:<28} targets {', '.join(row['targets'])}")
        return 0
    base = config_from_args(args)
    check_output_dir(base.output_dir)  # before the grid runs, not after
    protocols = [p for p in args.protocols.split(";") if p.strip()] if args.protocols else None
    if args.protocols is not None and not protocols:
        raise ConfigError(f"--protocols {args.protocols!r} names no stack (e.g. 'plain;secagg')")
    audit = AuditConfig(
        base=base,
        algorithms=list(base.algorithms) or ["central", "fedavg"],
        protocols=protocols or list(DEFAULT_PROTOCOLS),
        attacks=args.attacks or [],
        seeds=list(base.seeds),
        central_rounds=args.central_rounds,
        fedstruct_preset=args.fedstruct_preset,
    )
    try:
        rows = run_audit(audit, progress=show_progress(args))
    except ValueError as err:
        raise ConfigError(str(err)) from err
    folder = result_folder(base, f"audit_{base.dataset}")
    out = save_audit(rows, folder, audit_settings(audit), base)
    print(markdown_table(rows))
    print("results: " + ", ".join(str(p) for p in out.values()))
    bad = violations(rows)
    if bad:
        message = f"securefgl: {len(bad)} DP claim(s) refuted by the audit (see the table)"
        print(message, file=sys.stderr)
        return 3 if args.strict else 0
    return 0


def interaction_report(trainer: Any, views: Any, aggregation: str) -> dict[str, Any]:
    """Interaction inference on the server's view of one fresh round (``securefgl recommend``):
    a round drawn for the measurement after the run, outside the run's releases (the run's
    ε does not cover it, and no deployment sends it); the summary says so."""
    from attacks.interaction_inference import interaction_inference

    seen = "plain" if aggregation == "plain" else "ideal"
    a = interaction_inference(trainer.observe(0, seen), views).as_dict()
    a["summary"] = (
        f"interaction inference ({a['view']}): AUC {a['auc']:.3f} (popularity prior "
        f"{a['baseline_auc']:.3f}: {'leaks' if a['leaks'] else 'no more than the prior'}), "
        f"AUC among uploaded rows {a['auc_uploaded']:.3f} (½: indistinguishable), "
        f"P@{a['k']} {a['precision_at_k']:.3f}; on one extra round drawn for the measurement "
        "(outside the run's ε)"
    )
    return {"attack": a}


recommend_reports = (interaction_report,)
