"""Every configured protection is the one applied to the messages on the transcript.

A run records how each family of its messages travels (``RunResult.protection``); here the
transcript is read independently (tags and payload types) and must agree, message by
message, for model updates, FedGCN's neighbour sums and FedStruct's Ā hop sums.
"""

import pytest

from protocols.bundles import unbundle
from protocols.secure_sum.parties import TAG_CONTRIBUTION
from securefgl.algorithms.fedgcn.algorithm import NEIGHBOUR_SUMS
from securefgl.algorithms.fedstruct.algorithm import ABAR_SUMS
from securefgl.config import ExperimentConfig
from securefgl.experiment.runner import load_graph, run_single

UPDATE_TAGS = {"plain/update": "plain", "secagg/masked-input": "secagg", "ckks/update": "ckks"}
PLAIN_BLOCK = "fedstruct/abar/B"


def _sum_mode(payload) -> str:
    """What a secure-sum contribution carries: masked words, ciphertexts or clear values
    (one mode for every part of a sender's bundle)."""
    modes = {_part_mode(part) for part in unbundle(payload, "test").values()}
    assert len(modes) == 1
    return modes.pop()


def _part_mode(part) -> str:
    if "y" in part.fields:
        return "masked"
    if any(isinstance(v, bytes) for v in part.fields.values()):
        return "ckks"
    return "plain"


def observed(run) -> dict[str, set[str]]:
    """Protection per message family, read off the transcript alone."""
    seen: dict[str, set[str]] = {}
    for entry in run.transcript.entries:
        if entry.tag in UPDATE_TAGS:
            seen.setdefault("updates", set()).add(UPDATE_TAGS[entry.tag])
        elif entry.tag == TAG_CONTRIBUTION:
            family = "sums" if entry.round < 0 else "round sums"
            seen.setdefault(family, set()).add(_sum_mode(entry.payload()))
        elif entry.tag == PLAIN_BLOCK:
            seen.setdefault("sums", set()).add("plain")
    return seen


@pytest.mark.parametrize(
    ("algorithm", "protocol", "section"),
    [
        ("fedavg", [], {}),
        ("fedavg", ["secagg"], {}),
        ("fedgls", ["secagg"], {}),
        ("fedgls", ["ckks"], {}),
        ("fedgcn", [], {}),
        ("fedgcn", ["secagg"], {}),  # the sums follow the transport: masked
        ("fedgcn", ["ckks"], {}),
        ("fedgcn", ["secagg"], {"fedgcn": {"sum_mode": "plain"}}),  # explicit, recorded
        ("fedstruct", ["secagg"], {"fedstruct": {"nsf": "degree"}}),
        ("fedstruct", [], {"fedstruct": {"nsf": "degree", "sum_mode": "masked"}}),
    ],
)
def test_recorded_protection_is_what_the_transcript_shows(algorithm, protocol, section):
    cfg = ExperimentConfig(
        csbm={"num_nodes": 240, "num_features": 8, "homophily": 0.8}, clients=3,
        partition="random", rounds=1, algorithms=[algorithm], protocol=protocol,
        store_payloads=True, **section,
    )  # fmt: skip
    if algorithm == "fedstruct":
        cfg = cfg.replace(fedstruct={"structure_hops": 2})
    run = run_single(cfg, algorithm, 0, load_graph(cfg), progress=False)
    seen, claimed = observed(run), run.protection
    transport = protocol[0] if protocol else "plain"
    assert seen["updates"] == {transport}
    assert claimed["model updates (clients -> server)"] == transport
    family = {"fedgcn": NEIGHBOUR_SUMS, "fedstruct": ABAR_SUMS}.get(algorithm)
    if family is None:
        assert "sums" not in seen
        return
    mode = claimed[family].split(" ")[0]
    assert seen["sums"] == {mode}, (claimed, seen)
    if not section.get(algorithm, {}).get("sum_mode") and "sum_mode" not in section.get(
        algorithm, {}
    ):
        assert mode == {"plain": "plain", "secagg": "masked", "ckks": "ckks"}[transport]
    assert run.to_dict()["protection"] == claimed
