"""One-run DP audit and the ``securefgl audit`` grid."""

import json

import numpy as np
import pytest

from attacks.audit import AuditConfig, parse_protocol, run_audit, save_audit
from attacks.dp_audit import _p_value, dp_audit, epsilon_lower_bound
from attacks.registry import ATTACKS
from protocols.dp import PrivacyAccountant
from securefgl.cli import main
from securefgl.config import ExperimentConfig


@pytest.mark.parametrize(("r", "v"), [(100, 100), (100, 80), (500, 400)])
def test_lower_bound_is_the_largest_eps_with_p_below_beta(r, v):
    eps = epsilon_lower_bound(r, v, 1000, delta=1e-5)
    assert eps > 0
    assert _p_value(eps, r, v, 1000, 1e-5) < 0.05 <= _p_value(eps + 1e-3, r, v, 1000, 1e-5)
    assert epsilon_lower_bound(r, v - 5, 1000, 1e-5) < eps  # fewer correct: weaker bound


def test_audit_without_noise_gets_every_guess_right():
    r = dp_audit(clip=1.0, noise_multiplier=0.0, rounds=1, guesses=40)
    assert r.details["correct"] == r.details["guesses"] == 40
    assert r.value == r.details["max_lower_bound_for_these_guesses"]
    assert r.metrics["claimed_epsilon"] == float("inf") and not r.details["violation"]


@pytest.mark.parametrize(
    ("sigma", "rounds", "mode", "sampling", "knows", "q_claimed"),
    [
        (0.8, 1, "central", "fixed", False, 1.0),
        (3.0, 5, "central", "fixed", True, 1.0),
        (2.5, 5, "distributed", "fixed", True, 1.0),
        (1.5, 5, "central", "poisson", False, 0.5),  # an observer: amplification claimed
    ],
)
def test_audit_bound_stays_below_the_claim_and_could_refute_it(
    sigma, rounds, mode, sampling, knows, q_claimed
):
    accountant = PrivacyAccountant("rdp", 1e-5)
    accountant.step(sigma, q_claimed, rounds)
    r = dp_audit(
        clip=1.0, noise_multiplier=sigma, rounds=rounds, mode=mode, sampling=sampling,
        sample_rate=0.5, knows_participation=knows, claimed_epsilon=accountant.epsilon(),
    )  # fmt: skip
    assert r.value <= r.metrics["claimed_epsilon"] and not r.details["violation"]
    # enough guesses that a perfect guesser could refute the claim (100 cap it at 3.47)
    assert r.details["max_lower_bound_for_these_guesses"] > r.metrics["claimed_epsilon"]
    assert r.details["can_refute_claim"]


def test_a_false_claim_is_flagged():
    """σ = 0.3 for 10 rounds, claimed as if it were ε = 1 (e.g. an amplification the
    adversary does not grant): the audit's lower bound exceeds the claim."""
    r = dp_audit(clip=1.0, noise_multiplier=0.3, rounds=10, claimed_epsilon=1.0)
    assert r.details["violation"] and r.value > 1.0


def test_parse_protocol():
    assert parse_protocol("plain") == ([], None)
    assert parse_protocol("secagg,edgerand:2") == (["secagg"], ("edgerand", 2.0))
    with pytest.raises(ValueError):
        parse_protocol("secagg,ckks")


def _tiny_base() -> ExperimentConfig:
    return ExperimentConfig(
        dataset="csbm",
        csbm={"num_nodes": 120, "feature_signal": 0.5, "homophily": 0.8},
        clients=3,
        partition="random",
        rounds=2,
        hidden=8,
        protocol={"dp_noise": 2.0},
    )


def test_audit_grid_rows_and_outputs(tmp_path):
    base = _tiny_base()
    audit = AuditConfig(
        base=base,
        algorithms=["central", "fedavg"],
        protocols=["plain", "secagg,clip_noise"],
        attacks=["link_stealing", "gradient_inversion", "dp_audit"],
    )
    rows = run_audit(audit, progress=False)
    keys = {"dataset", "algorithm", "protocol", "attack", "adversary", "metric", "value"}
    assert all(keys | {"accuracy", "epsilon"} <= set(r) for r in rows)
    cells = {(r["algorithm"], r["protocol"]) for r in rows}
    assert cells == {("central", "plain"), ("fedavg", "plain"), ("fedavg", "secagg,clip_noise")}
    na = [r for r in rows if r["value"] is None and r.get("reason")]
    assert {(r["attack"], r["protocol"]) for r in na} == {
        ("gradient_inversion", "secagg,clip_noise"),  # the server sees a masked sum
        ("dp_audit", "plain"),  # nothing to audit
    }
    assert all(r["metric"] == ATTACKS[r["attack"]].metric for r in na)
    dp = [r for r in rows if r["attack"] == "dp_audit" and r["value"] is not None]
    assert dp and all(np.isfinite(r["epsilon"]) for r in dp)
    out = save_audit(rows, tmp_path / "grid", config=base)
    saved = json.loads(out["json"].read_text())
    assert saved["rows"] == json.loads(json.dumps(rows)) and saved["settings"] == {}
    assert saved["provenance"]["config"]["protocol"]["dp_noise"] == 2.0
    assert saved["units"]["accuracy"].startswith("fraction")
    assert out["json"] == tmp_path / "grid" / "result.json"
    assert "n/a [1]" in out["md"].read_text() and out["png"].stat().st_size > 0


def test_cli_lists_attacks(capsys):
    assert main(["audit", "--list-attacks"]) == 0
    assert "linkteller" in capsys.readouterr().out


def test_simulate_keeps_payloads_only_up_to_the_attacked_round():
    from attacks.simulation import simulate
    from securefgl.data.synthetic import csbm

    cfg = ExperimentConfig(clients=2, partition="random", rounds=3, hidden=8)
    run = simulate(cfg, "fedavg", 0, csbm(num_nodes=60, num_features=8, seed=1))
    kept = {e.round for e in run.transcript.entries if e.data is not None}
    dropped = {e.round for e in run.transcript.entries if e.data is None}
    assert kept == {-1, 0} and dropped == {1, 2}
    assert all(e.nbytes > 0 for e in run.transcript.entries)  # sizes are always counted


def test_rows_carry_baselines_and_what_each_epsilon_covers(tmp_path):
    base = _tiny_base()
    audit = AuditConfig(
        base=base,
        algorithms=["fedavg", "fedstruct"],
        protocols=["clip_noise", "secagg,clip_noise", "edgerand:2"],
        attacks=["link_stealing", "hop2vec_leakage"],
        fedstruct_preset=False,
    )
    rows = run_audit(audit, progress=False)
    assert {r["algorithm"] for r in rows if r["attack"] == "link_stealing"} == {
        "fedavg",
        "fedstruct",
    }
    for r in rows:
        assert {"baseline", "advantage", "leaks", "covers"} <= set(r)
        if r["value"] is not None and r["baseline"] is not None:
            assert np.isclose(r["advantage"], r["value"] - r["baseline"])
            assert r["leaks"] == (r["advantage"] > r["margin"])
        assert r["epsilon"] is None or r["covers"]
    covers = {(r["algorithm"], r["protocol"]): r["covers"] for r in rows}
    assert covers["fedstruct", "edgerand:2"].startswith("Ā and structural NSFs")
    assert "feature branch" in covers["fedstruct", "edgerand:2"]
    assert covers["fedavg", "clip_noise"].startswith("released model updates (client-level")
    secure = next(r for r in rows if r["protocol"] == "secagg,clip_noise")
    assert secure["guarantees"][0]["adversary"] == "server"
    assert "collude with the server" in secure["guarantees"][0]["assumes"]
    md = save_audit(rows, tmp_path / "grid")["md"].read_text()
    assert "| baseline | advantage | leaks |" in md and "ε covers" in md
    assert "Ā and structural NSFs" in md and "released model updates" in md
    assert "(assumes: none claimed (the server sees who takes part)" in md


def test_a_refuted_claim_is_flagged_in_rows_table_and_exit_code(monkeypatch, tmp_path, capsys):
    from attacks import registry
    from attacks.audit import markdown_table, violations

    def false_claim(cell):  # an audit whose lower bound beats the run's claim
        return dp_audit(clip=1.0, noise_multiplier=0.3, rounds=10, claimed_epsilon=1.0)

    spec = registry.ATTACKS["dp_audit"]
    monkeypatch.setitem(registry.ATTACKS, "dp_audit", type(spec)(spec.name, spec.targets,
                                                                 false_claim, spec.metric))
    argv = ["audit", "--csbm", '{"num_nodes": 120}', "--clients", "3", "--rounds", "2",
            "--algorithms", "fedavg", "--protocols", "clip_noise", "--attacks", "dp_audit",
            "--output-dir", str(tmp_path), "--no-progress"]  # fmt: skip
    assert main(argv) == 0  # reported, not fatal by default ...
    assert main([*argv, "--strict"]) == 3  # ... but fatal with --strict
    assert "refuted" in capsys.readouterr().err
    rows = json.loads((tmp_path / "audit_csbm" / "result.json").read_text())["rows"]
    assert violations(rows) and "above the claimed ε" in markdown_table(rows)


def test_gpfl_property_ldp_is_the_rows_epsilon():
    """GPFL's property LDP is a guarantee of the run: its rows carry that ε (not "–")."""
    from tests.attacks.test_gpfl_inference import config

    base = config(property_epsilon=1.0)
    audit = AuditConfig(base=base, algorithms=["gpfl"], protocols=["plain"],
                        attacks=["property_inference"])  # fmt: skip
    rows = run_audit(audit, progress=False)
    assert rows and all(r["epsilon"] is not None and r["epsilon"] > 0 for r in rows)
    assert rows[0]["epsilon_unit"].startswith("graph properties")


def test_the_audit_command_writes_one_folder_per_run(tmp_path, capsys):
    argv = ["audit", "--csbm", '{"num_nodes": 120}', "--clients", "3", "--rounds", "1",
            "--algorithms", "fedavg", "--protocols", "plain", "--attacks", "link_stealing",
            "--output-dir", str(tmp_path), "--name", "grid", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid"]
    saved = json.loads((tmp_path / "grid" / "result.json").read_text())
    assert {"rows", "settings", "units", "provenance"} <= set(saved)
    assert (tmp_path / "grid" / "result.md").exists()


def test_audit_help_shows_its_own_defaults(capsys):
    from attacks.audit import DEFAULT_PROTOCOLS

    assert main(["audit", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"(default: {';'.join(DEFAULT_PROTOCOLS)})" in out
    assert "(default: central,fedavg)" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--protocol", "secagg", "--protocols", "plain"], "stack 'secagg' would be ignored"),
        (["--central-rounds", "0"], "central_rounds must be ≥ 1"),
        (["--algorithms", "central", "--protocols", "secagg"], "no cell to run"),
    ],
)
def test_the_audit_command_refuses_what_it_would_ignore(tmp_path, capsys, flags, message):
    argv = ["audit", "--csbm", '{"num_nodes": 120}', "--clients", "3", "--rounds", "1",
            "--attacks", "link_stealing", "--output-dir", str(tmp_path), "--no-progress",
            *flags]  # fmt: skip
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_audit_takes_its_algorithms_from_the_config_file(tmp_path, capsys):
    toml = tmp_path / "audit.toml"
    toml.write_text('[experiment]\nalgorithms = ["fedprox"]\n')
    argv = ["audit", "--config", str(toml), "--csbm", '{"num_nodes": 120}', "--clients", "3",
            "--rounds", "1", "--protocols", "plain", "--attacks", "link_stealing",
            "--output-dir", str(tmp_path), "--name", "grid", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    saved = json.loads((tmp_path / "grid" / "result.json").read_text())
    assert {r["algorithm"] for r in saved["rows"]} == {"fedprox"}


def test_an_empty_protocol_list_is_refused_not_replaced_by_the_defaults(tmp_path, capsys):
    argv = ["audit", "--protocols", ";;", "--output-dir", str(tmp_path), "--no-progress"]
    assert main(argv) == 2
    assert "names no stack" in capsys.readouterr().err
