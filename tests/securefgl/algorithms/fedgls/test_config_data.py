"""FedGLS on the front door: the issue's command line and its TOML twin, the preset, the
``louvain-largest`` partition and the split inside each client."""

import json
import os
import shlex

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from securefgl.algorithms.fedgls.settings import apply_preset
from securefgl.cli import build_parser, config_from_args, main
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data import client_split, csbm, partition_graph
from securefgl.data.partition import UNASSIGNED, largest_communities

ISSUE = shlex.split(
    "run --algorithms fedgls,fed-gnnk,fed-mlp --dataset CiteSeer --clients 8 "
    "--partition louvain --graphless-fraction 0.5 --protocol secagg"
)


def parse(argv: list[str]) -> ExperimentConfig:
    parser, _ = build_parser()
    return config_from_args(parser.parse_args(argv))


def test_the_issues_command_line_and_its_toml_twin(tmp_path):
    cfg = parse(ISSUE)
    assert cfg.algorithms == ["fedgls", "fed-gnnk", "fed-mlp"]
    assert (cfg.dataset, cfg.clients, cfg.partition) == ("CiteSeer", 8, "louvain")
    assert cfg.fedgls.graphless_fraction == 0.5 and cfg.protocol.stack == ["secagg"]
    toml = tmp_path / "fedgls.toml"
    toml.write_text(
        '[experiment]\nalgorithms = ["fedgls", "fed-gnnk", "fed-mlp"]\ndataset = "CiteSeer"\n'
        'clients = 8\npartition = "louvain"\nprotocol = ["secagg"]\n\n'
        "[experiment.fedgls]\ngraphless_fraction = 0.5\n"
    )
    assert ExperimentConfig.from_toml(toml) == cfg
    assert parse(["run", "--fedgls-graphless-fraction", "0.25"]).fedgls.graphless_fraction == 0.25
    assert parse(["run", "--fedgls-split", "C", "--fedgls-knn-k", "7"]).fedgls.knn_k == 7


def test_bad_fedgls_values_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="graphless_fraction"):
        ExperimentConfig(fedgls={"graphless_fraction": 1.5})
    with pytest.raises(ConfigError, match="split"):
        ExperimentConfig(fedgls={"split": "B"})
    with pytest.raises(ConfigError, match="belongs under \\[experiment.fedgls\\]"):
        ExperimentConfig.from_dict({"knn_k": 4})


def test_preset_then_flags(monkeypatch):
    cfg = parse(["run", "--dataset", "PubMed", "--fedgls-preset", "--rounds", "7"])
    assert (cfg.clients, cfg.rounds, cfg.hidden, cfg.local_epochs) == (16, 7, 16, 5)
    assert (cfg.partition, cfg.split_scope, cfg.split) == (
        "louvain-largest",
        "client",
        (0.6, 0.2, 0.2),
    )
    assert apply_preset(ExperimentConfig(dataset="Cora")).rounds == 100


def test_run_on_a_generated_graph(tmp_path):
    code = main(
        ["run", "--algorithms", "fedgls,fed-gnnk,fed-mlp", "--csbm", '{"num_nodes": 160}',
         "--clients", "4", "--partition", "louvain", "--graphless-fraction", "0.5",
         "--protocol", "secagg", "--rounds", "2", "--hidden", "8", "--output-dir", str(tmp_path),
         "--name", "gls", "--no-progress"]
    )  # fmt: skip
    assert code == 0
    result = json.loads((tmp_path / "gls" / "result.json").read_text())
    assert [r["algorithm"] for r in result["summary"]] == ["fedgls", "fed-gnnk", "fed-mlp"]
    assert result["runs"][0]["protection"]["FedAvg weights n_k"].startswith("inside the masked")


@pytest.mark.datasets
@pytest.mark.skipif(not os.environ.get("SECUREFGL_DATA"), reason="SECUREFGL_DATA not set")
def test_the_issues_command_runs_on_citeseer(tmp_path):
    argv = [*ISSUE, "--rounds", "1", "--output-dir", str(tmp_path), "--name", "c", "--no-progress"]
    assert main(argv) == 0
    result = json.loads((tmp_path / "c" / "result.json").read_text())
    assert {r["algorithm"] for r in result["summary"]} == {"fedgls", "fed-gnnk", "fed-mlp"}


@given(
    sizes=st.lists(st.integers(1, 30), min_size=2, max_size=12),
    k=st.integers(1, 12),
    seed=st.integers(0, 99),
)
def test_largest_communities_keep_the_k_largest(sizes, k, seed):
    labels = np.random.default_rng(seed).permutation(np.repeat(np.arange(len(sizes)), sizes))
    if k > len(sizes):
        with pytest.raises(ValueError, match="fewer than"):
            largest_communities(labels, k)
        return
    a = largest_communities(labels, k)
    kept = np.sort(np.bincount(a[a != UNASSIGNED], minlength=k))[::-1]
    assert kept.tolist() == sorted(sizes, reverse=True)[:k]
    for client in range(k):  # each client is exactly one community
        assert len(set(labels[a == client].tolist())) == 1


def test_louvain_largest_drops_the_other_nodes_and_their_edges():
    g = csbm(300, num_classes=3, num_features=4, avg_degree=3.0, seed=2)
    part = partition_graph(g, 4, "louvain-largest", seed=0)
    report = part.report(g)
    assert (part.assignment == UNASSIGNED).any() and sum(report.sizes) < g.num_nodes
    ei = g.edge_index.numpy()
    a = part.assignment
    inside = (a[ei[0]] == a[ei[1]]) & (a[ei[0]] != UNASSIGNED)
    assert sum(report.internal_edges) == inside.sum() // 2


@given(
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=6),
    fr=st.tuples(st.floats(0, 0.7), st.floats(0, 0.3)),
    seed=st.integers(0, 99),
)
def test_client_split_draws_the_fractions_inside_each_client(sizes, fr, seed):
    a = np.repeat(np.arange(len(sizes)), sizes)
    a = np.concatenate([a, np.full(5, UNASSIGNED)])  # nodes in no client: in no mask
    train, val = fr
    test = max(0.0, 1 - train - val)
    masks = client_split(a, train, val, test, seed=seed)
    stacked = torch.stack(masks).numpy()
    assert (stacked.sum(0) <= 1).all() and not stacked[:, a == UNASSIGNED].any()
    for c, n in enumerate(sizes):
        got = stacked[:, a == c].sum(1)
        assert got[0] == min(int(np.floor(train * n + 0.5)), n)
        assert got[1] == min(int(np.floor(val * n + 0.5)), n - got[0])


def test_louvain_results_are_cached_as_copies():
    from securefgl.data import partition as part_module

    g = csbm(200, num_classes=3, num_features=4, avg_degree=3.0, seed=5)
    first = partition_graph(g, 3, "louvain-largest", seed=1).assignment
    first[:] = -7  # the caller's copy: the cache must not see this
    again = partition_graph(g, 3, "louvain-largest", seed=1).assignment
    part_module._LOUVAIN_CACHE.clear()
    fresh = partition_graph(g, 3, "louvain-largest", seed=1).assignment
    assert np.array_equal(again, fresh) and (again != -7).all()
