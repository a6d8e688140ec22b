"""The active-server adversary: every attack works against honest-but-curious protocols and
is refused by their malicious-server mode (each defence has its failing attack here)."""

from __future__ import annotations

import pytest

from attacks.active_server import ckks, cohort, secagg, secure_sums
from attacks.active_server.audit import active_server_rows, markdown, merge_rows

HBC, MAL = "honest-but-curious", "malicious"


@pytest.mark.parametrize("attack", list(secagg.ATTACKS))
@pytest.mark.parametrize(("protocol", "n"), [("secagg", 10), ("secagg+", 20)])
def test_secagg_attacks_recover_an_input_only_when_honest_but_curious(attack, protocol, n):
    won = secagg.run_attack(attack, HBC, protocol, n, dim=8)
    assert won.success and won.outcome == "recovered"
    assert won.details["max_abs_error"] < 1e-6
    lost = secagg.run_attack(attack, MAL, protocol, n, dim=8)
    assert not lost.success and lost.outcome == "refused"
    victim = lost.refusals[0]
    expected_phase = "sign_survivors" if attack == "inconsistent_dropout" else "share_keys"
    assert (victim["party"], victim["phase"]) == ("c00", expected_phase)


def test_inconsistent_dropout_needs_the_consistency_round_not_just_t_above_half():
    """t = 6 > n/2 at n = 10: the split views still unmask the victim without the round."""
    won = secagg.run_attack("inconsistent_dropout", HBC, "secagg", 10, dim=4)
    assert won.details["t"] == 6 and 2 * won.details["t"] > won.details["clients"]
    assert won.success


@pytest.mark.parametrize("protocol", ["secagg", "secagg+"])
def test_a_server_running_one_state_per_pair_learns_pair_sums_only_when_honest_but_curious(
    protocol,
):
    won = cohort.run_pair_cohort(HBC, protocol, 10, dim=8)
    assert won.success and won.outcome == "recovered"
    assert won.details["pairs_recovered"] == 5 and won.details["max_abs_error"] < 1e-6
    lost = cohort.run_pair_cohort(MAL, protocol, 10, dim=8)
    assert not lost.success and lost.outcome == "refused"
    assert lost.details["pairs_recovered"] == 0
    refused = {(r["party"], r["phase"]) for r in lost.refusals if r["party"] != "server"}
    assert refused == {(f"c{i:02d}", "share_keys") for i in range(10)}
    assert "minimum cohort" in lost.refusals[0]["error"]


@pytest.mark.parametrize("mode", ckks.FORGERIES)
def test_ckks_forgeries_are_accepted_only_when_honest_but_curious(mode):
    won = ckks.run_forgery(HBC, mode, dim=16)
    assert won.success and won.outcome == "corrupted"
    assert won.details["max_abs_error_accepted"] > 1e-3
    lost = ckks.run_forgery(MAL, mode, dim=16)
    assert not lost.success and lost.outcome == "refused"
    assert all(r["phase"] == "decrypt" for r in lost.refusals)


def test_key_substitution_reads_masked_sums_only_when_honest_but_curious():
    won = secure_sums.run_substitution(HBC)
    assert won.success and won.details["blocks_read"] == 4
    lost = secure_sums.run_substitution(MAL)
    assert not lost.success and lost.details["blocks_read"] == 0
    assert {r["phase"] for r in lost.refusals if r["party"] != "server"} == {"setup_install"}


def test_audit_rows_cover_both_threat_models():
    rows = active_server_rows()
    assert {r["threat_model"] for r in rows} == {HBC, MAL}
    assert {r["attack"] for r in rows} == {
        "inconsistent_dropout", "share_replay", "message_substitution", "forged_aggregate",
        "pair_cohort",
    }  # fmt: skip
    assert {r["protocol"] for r in rows if "cohort" in r["attack"]} == {"secagg", "secagg+"}
    for r in rows:
        assert r["adversary"] == "active server"
        assert r["success"] is (r["threat_model"] == HBC)
    merged = merge_rows([{"adversary": "server", "attack": "x"}, *rows[:2]], rows)
    assert len(merged) == 1 + len(rows)
    assert "| inconsistent_dropout | secagg | **recovered** | refused |" in markdown(rows)
