"""SpreadFGL reproduction: the traffic table's units; report statistics read from the runs."""

import sys

from benchmarks.reproduce_spreadfgl.__main__ import traffic
from securefgl.algorithms.spreadfgl.client import H_TAG
from securefgl.algorithms.spreadfgl.patch import PATCH_TAG
from securefgl.federation.transcript import TranscriptEntry


def entry(rnd: int, sender: str, receiver: str, tag: str, nbytes: int) -> TranscriptEntry:
    return TranscriptEntry(rnd, sender, receiver, tag, nbytes, None)


def test_client_traffic_is_kilobytes_per_client_per_round():
    rounds, clients = 10, ("client-0", "client-1")
    log = [entry(-1, "edge-0", c, "setup", 5_000) for c in clients]
    for r in range(rounds):
        for c in clients:
            log.append(entry(r, c, "edge-0", "model", 4_000))  # 4 kB up every round
            log.append(entry(r, "edge-0", c, "model", 2_000))  # 2 kB down every round
            if r % 5 == 0:  # H up and a patch down every 5 rounds
                log.append(entry(r, c, "edge-0", H_TAG, 1_000))
                log.append(entry(r, "edge-0", c, PATCH_TAG, 3_000))
    t = traffic(log, rounds)
    assert t["client_up_kb"] == 4.0 + 0.2 and t["client_down_kb"] == 2.0 + 0.6
    assert t["h_kb"] == 0.2 and t["patch_kb"] == 0.6
    assert t["h_per_upload_kb"] == 1.0 and t["patch_per_download_kb"] == 3.0
    assert t["setup_mb"] == 0.01


def test_the_report_recomputes_each_cell_from_its_runs(tmp_path, monkeypatch):
    import json

    from benchmarks.reproduce_spreadfgl import __main__ as reproduce_spreadfgl

    runs = [{"seed": s, "acc": 70.0 + s, "f1": 60.0, "seconds": 1.0, "bytes": {"h_kb": 0.0},
             "val_round_acc": 80.0 + 2 * s, "best_round_acc": 90.0} for s in range(2)]  # fmt: skip
    stale = {"setting": "best-round", "dataset": "Cora", "clients": 6, "edge_servers": 1,
             "method": "fedgl", "protection": "none", "runs": runs, "acc": 70.5, "seeds": 2,
             "val_round_acc": 80.0, "best_round_acc": 90.0, "paper_acc": 84.47}  # fmt: skip
    out = tmp_path / "spreadfgl.json"
    out.write_text(json.dumps([stale]))
    monkeypatch.setattr(sys, "argv", ["x", "--out", str(out), "--report-only"])
    reproduce_spreadfgl.main()
    (row,) = json.loads(out.read_text())
    assert row["val_round_acc"] == 81.0 and row["acc"] == 70.5 and row["seeds"] == 2
    assert "| FedGL | 70.50 / 81.00 / 90.00 (84.47) [2 seeds] |" in (
        out.with_suffix(".md").read_text()
    )
