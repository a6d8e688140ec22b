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
