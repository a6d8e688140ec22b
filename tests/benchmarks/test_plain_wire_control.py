"""The float64-wire control: a plain run whose aggregate is the exact float64 mean, labelled
as a control in the secure = plain report, and the library's wire left as it was."""

from __future__ import annotations

import json

import numpy as np
import pytest

import protocols.plain
from benchmarks.plain_wire_control import main
from benchmarks.secure_plain import row_of

TINY = '{"num_nodes": 300, "num_features": 8}'
ARGS = ["--csbm", TINY, "--clients", "3", "--rounds", "2", "--algorithms", "fedavg",
        "--seeds", "0", "--no-progress"]  # fmt: skip


def test_the_control_is_exact_and_labelled(tmp_path) -> None:
    assert main([*ARGS, "--output-dir", str(tmp_path), "--name", "c"]) == 0
    assert protocols.plain.WIRE_DTYPE is np.dtype(np.float32)
    result = json.loads((tmp_path / "c" / "result.json").read_text())
    assert result["summary"][0]["aggregate_max_abs_error"] == 0.0
    row = row_of(tmp_path / "c")
    assert row["protocol"] == "plain" and row["ring"] == "float64 (control)"


def test_a_protocol_stack_is_refused(tmp_path) -> None:
    with pytest.raises(SystemExit, match="plain transport"):
        main([*ARGS, "--output-dir", str(tmp_path), "--protocol", "secagg"])
