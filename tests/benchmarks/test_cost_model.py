"""The cost model recovers known costs and projects sensibly (benchmarks/cost_model.py)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.cost_model import build, peers
from protocols.secagg.rounds import default_degree


def _rows(protocol: str, threat: str, ns: list[int], ds: list[int]) -> list[dict[str, Any]]:
    """Synthetic measurements from known per-party costs."""
    rows = []
    for n in ns:
        p = peers(protocol, n)
        m = n if threat == "malicious" else 0
        for d in ds:
            rows.append({
                "protocol": protocol, "threat_model": threat, "n": n, "d": d,
                "bytes_up": 100 + 4 * d + 300 * p, "client_bytes_down": 50 + 400 * p + 7 * n,
                "client_seconds": 1e-3 + 2e-9 * d + 1.5e-9 * p * d + 1e-4 * p + 2e-5 * m,
                "server_seconds": 2e-3 + 1e-9 * n * d + 3e-6 * n * p + 1e-5 * n,
            })  # fmt: skip
    return rows


@pytest.mark.parametrize("protocol", ["secagg", "secagg+"])
@pytest.mark.parametrize("threat", ["honest-but-curious", "malicious"])
def test_known_costs_are_recovered_and_extrapolate(protocol: str, threat: str) -> None:
    rows = _rows(protocol, threat, [10, 50, 100, 500], [10_000, 100_000, 1_000_000])
    model = build(rows, fit_max_n=100, n_project=1000, dims=[100_000], workers=[1, 8],
                  link_gbit=10.0)  # fmt: skip
    for check in model["checks"]:
        assert abs(check["relative_error"]) < 0.02, check


def test_the_peers_are_the_protocols_defaults() -> None:
    assert peers("secagg", 500) == 499
    assert peers("secagg+", 1000) == default_degree(1000) == 20
    assert peers("secagg+", 5) == 4  # never more than the others
    assert peers("ckks", 1000) == peers("plain", 1000) == 0


def test_more_workers_never_slow_a_round_and_a_relay_never_helps() -> None:
    rows = _rows("secagg+", "honest-but-curious", [10, 100, 500], [10_000, 1_000_000])
    model = build(rows, fit_max_n=100, n_project=1000, dims=[1_000_000],
                  workers=[1, 8, 64], link_gbit=10.0)  # fmt: skip
    rounds = [r["round_s_direct"] for r in model["projection"]]
    assert rounds == sorted(rounds, reverse=True) and rounds[0] > rounds[-1]
    assert all(r["round_s_driver_relay"] > r["round_s_direct"] for r in model["projection"])
    assert model["projection"][0]["server_bytes_in"] == pytest.approx(
        1000 * (100 + 4 * 1_000_000 + 300 * default_degree(1000)), rel=0.01
    )
