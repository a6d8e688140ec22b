"""``threat_model = "malicious"`` end to end: the stack's PKI, signed messages on the wire,
the same model as the honest-but-curious run (the checks change no value)."""

from __future__ import annotations

import pytest

from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment.runner import load_graph, run_single
from securefgl.federation.stack import build_stack

SIGNED = {
    "secagg": "secagg/consistency-signature",
    "ckks": "ckks/update",
    "masked": "secure-sum/masked/keylist",
}


def _config(algorithm: str, protocol: list[str], threat_model: str, **section) -> ExperimentConfig:
    return ExperimentConfig(
        csbm={"num_nodes": 200, "num_features": 8, "homophily": 0.8}, clients=4,
        partition="random", rounds=2, eval_every=1, algorithms=[algorithm],
        protocol={"stack": protocol, "threat_model": threat_model}, store_payloads=True, **section,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("algorithm", "protocol", "section"),
    [
        ("fedavg", ["secagg"], {}),
        ("fedavg", ["ckks"], {}),
        ("fedgcn", ["secagg+"], {}),  # neighbour sums follow the transport: masked
        ("fedstruct", ["secagg"], {"fedstruct": {"nsf": "degree", "structure_hops": 2}}),
    ],
)
def test_malicious_runs_sign_and_match_the_honest_run(algorithm, protocol, section) -> None:
    runs = {}
    for tm in ("honest-but-curious", "malicious"):
        cfg = _config(algorithm, protocol, tm, **section)
        runs[tm] = run_single(cfg, algorithm, 0, load_graph(cfg), progress=False)
    mal, hbc = runs["malicious"], runs["honest-but-curious"]
    assert mal.final == pytest.approx(hbc.final)
    entries = mal.transcript.entries
    transport = protocol[0].rstrip("+")
    if transport == "secagg":
        assert any(e.tag == SIGNED["secagg"] for e in entries)
    else:
        updates = [e for e in entries if e.tag == SIGNED["ckks"]]
        assert updates and all("sig" in e.payload().fields for e in updates)
    if algorithm in ("fedgcn", "fedstruct"):
        keylists = [e for e in entries if e.tag == SIGNED["masked"]]
        assert keylists and all("sigs" in e.payload().fields for e in keylists)
    assert not any(e.tag == "secagg/consistency-check" for e in hbc.transcript.entries)


def test_the_stack_issues_the_pki_and_sum_options() -> None:
    stack = build_stack(_config("fedavg", ["secagg"], "malicious"), 4, "exp")
    assert stack.pki is not None and {"server", "key-authority", "client-3"} <= set(
        stack.pki.registry.keys
    )
    options = stack.sum_options()
    assert options["threat_model"] == "malicious" and set(options["registry"]["keys"]) == set(
        stack.pki.registry.keys
    )
    plain = build_stack(_config("fedavg", ["secagg"], "honest-but-curious"), 4, "exp")
    assert plain.pki is None and plain.sum_options() == {}


def test_threat_model_from_toml_and_refusals(tmp_path) -> None:
    path = tmp_path / "exp.toml"
    path.write_text('[experiment.protocol]\nstack = ["secagg"]\nthreat_model = "malicious"\n')
    assert ExperimentConfig.from_toml(path).protocol.threat_model == "malicious"
    with pytest.raises(ConfigError, match="threat_model"):
        ExperimentConfig(protocol={"threat_model": "byzantine"})
    assert ExperimentConfig().protocol.threat_model == "honest-but-curious"


def _rdp_epsilon(sigma: float, rounds: int, delta: float = 1e-5) -> float:
    """ε of ``rounds`` full-participation Gaussian rounds, straight from Opacus."""
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    acc.history = [(sigma, 1.0, rounds)]
    return float(acc.get_epsilon(delta))


@pytest.mark.parametrize(
    ("transport", "fraction", "summands", "per_round"),
    [
        # secagg: every client enforces a cohort of the clients per round; no sum the server
        # opens holds fewer than that cohort's Shamir t = ⌊h/2⌋ + 1 (Bonawitz et al. 2017)
        ("secagg", 1.0, 6, 10),
        ("secagg", 0.5, 3, 5),
        # malicious ckks: the clients refuse an aggregate of less than a majority
        ("ckks", 1.0, 6, 10),
    ],
)
def test_malicious_distributed_dp_is_charged_at_the_cohort_the_clients_enforce(
    transport: str, fraction: float, summands: int, per_round: int
) -> None:
    sigma, rounds = 1.0, 3
    cfg = ExperimentConfig(
        csbm={"num_nodes": 300, "num_features": 8}, clients=10, partition="random",
        rounds=rounds, eval_every=rounds, algorithms=["fedavg"], client_fraction=fraction,
        protocol={"stack": [transport, "clip_noise"], "threat_model": "malicious",
                  "dp_noise": sigma},
    )  # fmt: skip
    run = run_single(cfg, "fedavg", 0, load_graph(cfg), progress=False)
    server, observers = run.privacy["guarantees"]
    assert server["adversary"] == "server" and "chooses the cohort" in server["collusion"]
    # each client's share is N(0, σ²S²/n), n = clients per round: a sum of m shares keeps
    # σ·√(m/n); against a participating observer its own share is known (m − 1), and the
    # aggregate it sees is the one the server chose: charged at the same floor
    assert server["epsilon"] == pytest.approx(
        _rdp_epsilon(sigma * (summands / per_round) ** 0.5, rounds), rel=1e-6
    )
    assert observers["epsilon"] == pytest.approx(
        _rdp_epsilon(sigma * ((summands - 1) / per_round) ** 0.5, rounds), rel=1e-6
    )


def test_honest_but_curious_distributed_dp_charges_the_survivors() -> None:
    cfg = ExperimentConfig(
        csbm={"num_nodes": 300, "num_features": 8}, clients=4, partition="random", rounds=2,
        eval_every=2, algorithms=["fedavg"], protocol={"stack": ["secagg", "clip_noise"]},
    )  # fmt: skip
    run = run_single(cfg, "fedavg", 0, load_graph(cfg), progress=False)
    server, observers = run.privacy["guarantees"]
    assert server["epsilon"] == pytest.approx(_rdp_epsilon(1.0, 2), rel=1e-6)
    assert observers["epsilon"] == pytest.approx(_rdp_epsilon((3 / 4) ** 0.5, 2), rel=1e-6)


def test_the_clients_enforce_the_cohort_the_experiment_sets() -> None:
    cfg = _config("fedavg", ["secagg"], "malicious")
    stack = build_stack(cfg.replace(client_fraction=0.5), 2, "exp")
    assert stack.protocol.config_for(4).min_cohort == 2
    stack = build_stack(cfg, 4, "exp")
    assert stack.protocol.config_for(4).min_cohort == 4
    with pytest.raises(ConfigError, match="Poisson sampling"):
        _config("fedavg", ["secagg"], "malicious", client_sampling="poisson")
    with pytest.raises(ConfigError, match="exceeds the 2 clients of a round"):
        ExperimentConfig(
            clients=4, client_fraction=0.5,
            protocol={"stack": ["secagg"], "threat_model": "malicious", "min_cohort": 3},
        )  # fmt: skip


def test_a_finished_run_leaves_no_signing_key_in_the_process() -> None:
    from protocols.identity import clear_keystore, keystore_parties

    clear_keystore()  # keys other tests' stacks left behind
    cfg = _config("fedavg", ["secagg"], "malicious")
    run_single(cfg, "fedavg", 0, load_graph(cfg), progress=False)
    assert keystore_parties() == []
