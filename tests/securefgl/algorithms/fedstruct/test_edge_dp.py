"""Edge DP on FedStruct's Ā inputs: every edge perturbed once, cross blocks consistent."""

import pytest

from securefgl.algorithms.fedstruct.edge_dp import IDS_TAG, perturb_federation
from securefgl.algorithms.fedstruct.settings import EdgeDP
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment import run_experiment
from securefgl.experiment.report import assumption_lines, markdown_table, text_table
from securefgl.federation import Channel
from tests.securefgl.algorithms.fedstruct.test_adjacency import make_world

UNIT = "edge-level (edgerand; cross-client edges)"


def perturbed(views, mechanism: str, epsilon: float, seed: int = 0):
    channel = Channel()
    return perturb_federation(views, EdgeDP(mechanism, epsilon), seed, channel=channel), channel


def edge_set(view) -> set[tuple[int, int]]:
    """Every edge of a view as (opaque id, opaque id): internal both ways, external."""
    ids = view.node_ids.numpy()
    ei, ext = view.edge_index.numpy(), view.external_edges.numpy()
    return {*zip(ids[ei[0]], ids[ei[1]], strict=True), *zip(ids[ext[0]], ext[1], strict=True)}


def cross_pairs(view, owner: int) -> set[tuple[int, int]]:
    ids, ext = view.node_ids.numpy(), view.external_edges.numpy()
    sel = view.external_owner.numpy() == owner
    return set(zip(ids[ext[0][sel]], ext[1][sel], strict=True))


def test_a_huge_budget_keeps_every_edge() -> None:
    _, _, views = make_world(n=120, K=3)
    for mechanism in ("edgerand", "lapgraph"):
        out, _ = perturbed(views, mechanism, 3000.0)
        for v, w in zip(views, out, strict=True):
            assert edge_set(w) == edge_set(v)


@pytest.mark.parametrize("mechanism", ["edgerand", "lapgraph"])
def test_cross_blocks_agree_and_small_budgets_change_the_graph(mechanism: str) -> None:
    _, _, views = make_world(n=150, K=4)
    out, channel = perturbed(views, mechanism, 1.0)
    for i, vi in enumerate(out):
        for k, vk in enumerate(out):
            if i != k:  # both ends hold the same noisy block (one perturbation per edge)
                assert cross_pairs(vi, k) == {(b, a) for a, b in cross_pairs(vk, i)}
    true = set().union(*(edge_set(v) for v in views))
    noisy = set().union(*(edge_set(v) for v in out))
    assert noisy != true and len(noisy - true) > 0 and len(true - noisy) > 0
    # node ids travel only to lower clients; no message carries a true block
    id_msgs = [e for e in channel.transcript.entries if e.envelope().tag == IDS_TAG]
    assert len(id_msgs) == 2 * (4 * 3 // 2)  # every pair, relayed: client -> server -> client


def test_fedstruct_reports_the_edge_budget_and_equals_no_dp_at_huge_epsilon() -> None:
    base = dict(
        csbm={"num_nodes": 300}, clients=3, partition="random", algorithms=["fedstruct"],
        rounds=5,
    )  # fmt: skip
    section = {"nsf": "degree", "structure_hops": 2}
    plain = run_experiment(ExperimentConfig(**base, fedstruct=section), progress=False)
    dp = run_experiment(
        ExperimentConfig(
            **base, fedstruct={**section, "edge_dp": "edgerand", "edge_epsilon": 3000.0}
        ),
        progress=False,
    )
    privacy = dp.runs[0].privacy
    assert (privacy["edge_dp"], privacy["edge_epsilon"]) == ("edgerand", 3000.0)
    assert privacy["noise"] == "secret" and "private" not in privacy
    assert "feature branch trains on the true internal edges" in privacy["edge_dp_covers"]
    assert dp.summary()[0]["test_acc"] == plain.summary()[0]["test_acc"]
    # the edge budget is the run's ε wherever ε is shown: summary, tables, header
    row = dp.summary()[0]
    assert row["epsilon"] == 3000.0 and row["guarantees"][0]["unit"] == UNIT
    assert plain.summary()[0]["epsilon"] is None and plain.summary()[0]["noise"] == "none"
    md, text = markdown_table(dp), text_table(dp)
    assert f"protocol plain + {UNIT} DP" in md.splitlines()[0]
    assert f"| 3000.00 ({UNIT}, δ = 0, vs everyone) |" in md
    assert any("covers: cross-client edges" in line for line in assumption_lines(dp))
    assert "3e+03" in text.splitlines()[2] and UNIT in text
    with pytest.raises(ConfigError, match="edge_epsilon"):
        ExperimentConfig(**base, fedstruct={**section, "edge_dp": "lapgraph"})
    with pytest.raises(ConfigError, match="mechanism"):
        ExperimentConfig(**base, fedstruct={**section, "edge_dp": "rr", "edge_epsilon": 1.0})
