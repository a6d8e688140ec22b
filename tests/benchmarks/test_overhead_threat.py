"""The protocol-overhead grid with a threat model: cells, ratios, old rows stamped."""

from benchmarks.protocol_overhead import threat
from benchmarks.protocol_overhead.cells import Cell, make_protocol, sort_key


def _row(protocol, tm, client, **extra):
    return {"protocol": protocol, "clients": 100, "dim": 10**5, "dropout": 0.0,
            "threat_model": tm, "skipped": None, "client_seconds": client,
            "server_seconds": 1.0, "client_bytes_up": 10.0, "wall_seconds": 2.0,
            "result_ok": True, **extra}  # fmt: skip


def test_cells_run_the_malicious_variant():
    cell = Cell("secagg", 10, 100, 0.1, threat_model="malicious")
    assert "sign_survivors" in [p.method for p in make_protocol("secagg", "malicious").round_phases]
    assert cell.dropped_in_sum  # drops before unmask: after the masked input
    assert make_protocol("ckks", "malicious").threat_model == "malicious"


def test_ratios_target_and_old_rows():
    old = {k: v for k, v in _row("secagg", "honest-but-curious", 0.02).items()
           if k != "threat_model"}  # fmt: skip
    rows = threat.stamp([old, _row("secagg", "malicious", 0.028), _row("ckks", "malicious", 1)])
    assert rows[0]["threat_model"] == "honest-but-curious"
    (item,) = threat.ratios(rows)  # ckks has no honest-but-curious row to compare with
    assert item["target_cell"] and abs(item["client_ratio"] - 1.4) < 1e-9
    assert "1.40x the honest-but-curious one (target <= 1.5x: met)" in threat.summary(rows)[0]
    assert sorted(rows, key=sort_key)[0]["threat_model"] == "honest-but-curious"
    pending = threat.summary([old])
    assert "timing run pending" in pending[0]


def test_paired_measurement_gives_the_verdict():
    clock = iter([1.0, 1.6, 1.0, 1.4, 1.2, 1.5])  # hbc, malicious, hbc, malicious, ...
    pairs = threat.paired(["secagg"], 3, lambda protocol, tm: next(clock))
    pair = pairs["secagg"]
    assert pair["hbc_client_seconds"] == [1.0, 1.0, 1.2]
    assert abs(pair["ratio_median"] - 1.5) < 1e-9 and abs(pair["ratio_min"] - 1.4) < 1e-9
    rows = [_row("secagg", "honest-but-curious", 0.02), _row("secagg", "malicious", 0.04)]
    (line,) = threat.summary(rows, {"paired": pairs})
    assert "1.50x the honest-but-curious one in 3 back-to-back pairs" in line
    assert "the grid rows, measured apart, give 2.00x" in line and "met)" in line
    pairs["secagg"]["ratio_median"] = 1.51
    assert "NOT met" in threat.summary(rows, {"paired": pairs})[0]


def test_dropping_clients_go_silent_before_the_rounds_last_client_phase() -> None:
    from benchmarks.protocol_overhead.cells import default_drop_phase

    assert default_drop_phase("ckks") == "open_mean"  # the relayed round
    assert default_drop_phase("ckks", "malicious") == "decrypt"
    assert default_drop_phase("secagg") == "unmask"
    assert default_drop_phase("plain") == "send_update"
