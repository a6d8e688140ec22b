"""A control for secure = plain: the plain transport with float64 on the wire.

The plain transport carries each weighted update as float32 (its mean errs by ~1e-9
against the float64 mean of the clients' inputs). This control runs ``securefgl run`` with
the same arguments but float64 updates (error ~1e-16), so no transport is involved at all:
the gap between the two plain runs is how far the workload itself moves under a
perturbation of the aggregate's rounding. A secure transport cannot be shown closer to
plain than that. The run folder gets a ``control.json`` that ``benchmarks.secure_plain``
reads to label the row::

    python -m benchmarks.plain_wire_control --dataset Computers --algorithms fedgls \\
        --fedgls-preset --clients 8 --rounds 100 --seeds 0,1,2 \\
        --name computers-fedgls-plain64
    python -m benchmarks.secure_plain results/computers-fedgls-{plain,plain64,secagg32,secagg64}

Deviation from a library run: the wire dtype is set on the module before the run (the
setting is deliberately not a user option: float32 is the models' precision).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import numpy as np

import protocols.plain
from benchmarks.harness.results import CONTROL_FILE
from securefgl import cli
from securefgl.config.flags import config_from_args
from securefgl.experiment import run_experiment
from securefgl.experiment.results import check_output_dir, save_result

WIRE = "float64"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser, _ = cli.build_parser()
    config = config_from_args(parser.parse_args(["run", *args]))
    check_output_dir(config.output_dir)
    if config.protocol.stack:
        raise SystemExit("the control runs the plain transport: no protocol stack")
    wire, protocols.plain.WIRE_DTYPE = protocols.plain.WIRE_DTYPE, np.dtype(WIRE)
    try:
        result = run_experiment(config, progress="--no-progress" not in args)
    finally:
        protocols.plain.WIRE_DTYPE = wire
    folder = save_result(result)
    (folder / CONTROL_FILE).write_text(json.dumps({"plain_wire": WIRE}) + "\n")
    print(f"results: {folder}/result.json (plain, {WIRE} on the wire)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
